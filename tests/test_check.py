"""``attn check``: correct low-precision outputs pass (exit 0); outputs with
the bugs kernel writers keep filing fail (exit 3): a swapped RoPE convention,
a window off by one, a dropped sink, mis-grouped GQA heads; bad data is 1,
bad usage 2."""

import io
import json

import numpy as np
import pytest

from attncli import AttentionOptions
from attncli.core.check import check, naive, ulp
from attncli.core.options import Rope

from reference import heads_attention

ml_dtypes = pytest.importorskip("ml_dtypes")

B, H, H_KV, N, D = 1, 4, 2, 24, 32
RNG = np.random.default_rng(5)
Q, K, V = RNG.standard_normal((B, H, N, D)), RNG.standard_normal((B, H_KV, N, D)), RNG.standard_normal((B, H_KV, N, D))
SINKS = np.array([0.3, 1.0, -0.5, 2.0])
WINDOW = 5
# the case every test checks: GQA, RoPE neox, a causal sliding window of 6 keys, sinks
ARGS = ["--rope", "neox", "--window", f"{WINDOW},0"]
SETTINGS = dict(rope=("neox", 10000.0, None, None), window=(WINDOW, 0), sinks=SINKS)
DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def inputs(tmp_path, dtype):
    """Q, K, V and the sinks saved in ``dtype`` (as a framework holds them) -> their paths and values."""
    low = [m.astype(dtype) for m in (Q, K, V)]
    for name, m in zip("qkv", low, strict=True):
        np.save(tmp_path / f"{name}.npy", m.astype(np.float32) if dtype is ml_dtypes.bfloat16 else m)
    np.save(tmp_path / "sinks.npy", SINKS)
    # bfloat16 values go through float32 NPY files exactly (NPY cannot name bfloat16)
    return [tmp_path / f"{n}.npy" for n in "qkv"], [m.astype(np.float64) for m in low]


def kernel_output(low, dtype, **settings):
    """A correct kernel's output for ``settings``: exact attention on the stored inputs, rounded to ``dtype``."""
    out, _ = heads_attention(*low, **settings)
    return out.astype(dtype)


def save_out(tmp_path, out):
    """OUT as a kernel would save it: safetensors keeps bfloat16, NPY float16."""
    from safetensors.numpy import save_file

    path = tmp_path / "out.safetensors"
    save_file({"out": np.ascontiguousarray(out)}, path)
    return path


def run_check(attn, out_path, files, *args):
    return attn("check", out_path, *files, *args, "--sinks", files[0].parent / "sinks.npy", "-f", "json")


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_a_correct_low_precision_output_passes(attn, tmp_path, dtype_name):
    dtype = DTYPES[dtype_name]
    files, low = inputs(tmp_path, dtype)
    result = run_check(attn, save_out(tmp_path, kernel_output(low, dtype, **SETTINGS)), files, *ARGS)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["passed"] and data["verdict"] == "pass" and data["dtype"] == dtype_name
    assert data["max_abs_error"] <= data["tolerance"] == pytest.approx(2 * data["baseline_error"] + data["atol"])
    assert result.stderr == ""


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_our_own_float32_kernel_rounded_passes(attn, tmp_path, dtype_name):
    """A kernel that computes in float32 from low-precision inputs, as fused kernels do."""
    from attncli import attention

    dtype = DTYPES[dtype_name]
    files, low = inputs(tmp_path, dtype)
    options = AttentionOptions(rope=Rope("neox"), window=(WINDOW, 0), sinks=SINKS)
    out, _ = attention(*(m.astype(np.float32) for m in low), options, need_weights=False)
    assert run_check(attn, save_out(tmp_path, out.astype(dtype)), files, *ARGS).exit_code == 0


def planted(low, bug):
    """The output of a kernel with one of the bugs of the issue's list."""
    if bug == "RoPE gptj for neox":
        return heads_attention(*low, **{**SETTINGS, "rope": ("gptj", 10000.0, None, None)})[0]
    if bug == "window off by one":
        return heads_attention(*low, **{**SETTINGS, "window": (WINDOW + 1, 0)})[0]
    if bug == "sink dropped":
        return heads_attention(*low, **{**SETTINGS, "sinks": None})[0]
    if bug == "one sink of four dropped":
        return heads_attention(*low, **{**SETTINGS, "sinks": np.array([0.3, 1.0, -np.inf, 2.0])})[0]
    if bug == "GQA heads mis-grouped":  # query head h reads K/V head h % H_kv instead of h // (H / H_kv)
        q, k, v = low
        tiled = [np.tile(m, (1, H // H_KV, 1, 1)) for m in (k, v)]
        return heads_attention(q, *tiled, **SETTINGS)[0]
    if bug == "scale 1/d instead of 1/sqrt(d)":
        return heads_attention(*low, scale=1 / D, **SETTINGS)[0]
    raise ValueError(bug)


BUGS = [
    "RoPE gptj for neox",
    "window off by one",
    "sink dropped",
    "one sink of four dropped",
    "GQA heads mis-grouped",
    "scale 1/d instead of 1/sqrt(d)",
]


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("bug", BUGS)
def test_planted_bugs_fail_with_exit_3(attn, tmp_path, bug, dtype_name):
    dtype = DTYPES[dtype_name]
    files, low = inputs(tmp_path, dtype)
    out_path = save_out(tmp_path, planted(low, bug).astype(dtype))
    result = run_check(attn, out_path, files, *ARGS)
    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)  # the figures are written before the verdict line
    assert not data["passed"] and data["max_abs_error"] > 2 * data["tolerance"]
    line = result.stderr.splitlines()
    assert len(line) == 1 and line[0].startswith(f"attn: error: {out_path}: disagrees with the reference: ")


def test_a_planted_error_is_found_where_it_is(attn, tmp_path):
    files, low = inputs(tmp_path, np.float16)
    out = kernel_output(low, np.float16, **SETTINGS)
    out[0, 3, 17, 9] += np.float16(0.25)
    result = run_check(attn, save_out(tmp_path, out), files, *ARGS)
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert data["worst"]["index"] == [0, 3, 17, 9] and data["worst"]["where"] == "batch 0, head 3, query 17, column 9"
    per_head = np.array(data["per_head"]["max_abs_error"])
    assert per_head.shape == (1, 4) and per_head.argmax() == 3
    assert np.array(data["error_by_query"]).shape == (1, 4, N)
    assert result.stderr.startswith(
        f"attn: error: {tmp_path}/out.safetensors: disagrees with the reference: "
        "max |OUT - ref| = 0.25 at batch 0, head 3, query 17, column 9 is more than "
        "the tolerance "
    )


def test_nan_in_out_is_a_disagreement_not_bad_data(attn, tmp_path):
    files, low = inputs(tmp_path, np.float16)
    out = kernel_output(low, np.float16, **SETTINGS)
    out[0, 1, 2, 3] = np.nan
    result = run_check(attn, save_out(tmp_path, out), files, *ARGS)
    assert result.exit_code == 3
    assert result.stderr == (
        f"attn: error: {tmp_path}/out.safetensors: holds a non-finite value at batch 0, "
        "head 1, query 2, column 3 (the reference is finite)\n"
    )
    data = json.loads(result.stdout)
    assert data["max_abs_error"] is None and data["worst"]["out"] is None
    assert data["per_head"]["max_abs_error"][0][1] is None


def test_bshd_layout_and_a_bundle(attn, tmp_path):
    low = [m.astype(np.float16) for m in (Q, K, V)]
    np.savez(
        tmp_path / "case.npz", **{n: m.transpose(0, 2, 1, 3) for n, m in zip("qkv", low, strict=True)}, sinks=SINKS
    )
    out = kernel_output([m.astype(np.float64) for m in low], np.float16, **SETTINGS).transpose(0, 2, 1, 3)
    np.save(tmp_path / "out.npy", out)
    result = attn("check", tmp_path / "out.npy", tmp_path / "case.npz", "--layout", "bshd", *ARGS, "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["shape"] == [1, N, H, D]
    result = attn("check", tmp_path / "out.npy", tmp_path / "case.npz", *ARGS)  # the layout forgotten
    assert result.exit_code == 1  # 24 "heads" now: the sinks do not fit
    assert result.stderr == "attn: error: sinks: 4 given for 24 query heads (give one per query head, or one for all)\n"
    np.save(tmp_path / "out.npy", out[:, :, :2])
    result = attn("check", tmp_path / "out.npy", tmp_path / "case.npz", "--layout", "bshd", *ARGS)
    assert result.stderr == (
        "attn: error: OUT is 1×24×2×32 but the output of Q, K and V is 1×24×4×32 "
        "(the same inputs, options and layout as the kernel's)\n"
    )


def test_the_terminal_view(attn, tmp_path):
    files, low = inputs(tmp_path, np.float16)
    out = kernel_output(low, np.float16, **SETTINGS)
    out[0, 2, 4, 0] += np.float16(0.5)
    result = attn("check", save_out(tmp_path, out), *files, *ARGS, "--sinks", tmp_path / "sinks.npy", "-f", "table")
    assert result.exit_code == 3
    lines = result.stdout.splitlines()
    assert lines[0] == f"attn check {tmp_path}/out.safetensors: FAIL (float16, 1×4×24×32, bhsd)"
    assert lines[1] == "scale 1/√32 = 0.1768 · RoPE neox (θ 10000) · window 5,0 · sinks"
    assert lines[2].startswith("max |OUT - ref| 0.5") and "at batch 0, head 2, query 4, column 0" in lines[2]
    assert lines[5] == "baseline: naive attention in float16, inputs and every step rounded to it"
    assert "per head" in result.stdout and "head 2 │" in result.stdout and "NO" in result.stdout
    assert "max |OUT - ref| / tolerance by head (down) and query (across): above 1 fails" in result.stdout


def test_emit_error_and_reference_arrays(attn, tmp_path):
    files, low = inputs(tmp_path, np.float16)
    out_path = save_out(tmp_path, kernel_output(low, np.float16, **SETTINGS))
    for which in ("error", "reference"):
        result = attn("check", out_path, *files, *ARGS, "--sinks", tmp_path / "sinks.npy", "-f", "npy", "--emit", which)
        assert result.exit_code == 0
        array = np.load(io.BytesIO(result.stdout_bytes))
        assert array.shape == (B, H, N, D) and array.dtype == np.float64
    expected, _ = heads_attention(*low, **SETTINGS)
    np.testing.assert_allclose(array, expected, atol=1e-12)


def test_factor_and_atol_change_the_verdict(attn, tmp_path):
    files, low = inputs(tmp_path, np.float16)
    out = kernel_output(low, np.float16, **SETTINGS)
    out[0, 0, 0, 0] += np.float16(0.05)
    path = save_out(tmp_path, out)
    assert run_check(attn, path, files, *ARGS).exit_code == 3
    assert run_check(attn, path, files, *ARGS, "--atol", "0.1").exit_code == 0
    assert run_check(attn, path, files, *ARGS, "--factor", "1000").exit_code == 0


# ---------------------------------------------------------------- the core's rule


def test_the_baseline_rounds_every_step():
    low = [m.astype(np.float16) for m in (Q, K, V)]
    options = AttentionOptions(rope=Rope("neox"), window=(WINDOW, 0), sinks=SINKS)
    base = naive(*low, options, np.dtype(np.float16))
    assert base.dtype == np.float32 and np.array_equal(base, base.astype(np.float16).astype(np.float32))
    exact, _ = heads_attention(*(m.astype(np.float64) for m in low), **SETTINGS)
    error = np.abs(base - exact).max()
    assert 1e-4 < error < 1e-2  # the rounding noise of float16, not a bug


def test_ulp_of_each_dtype():
    assert ulp(1.0, np.dtype(np.float16)) == 2.0**-10
    assert ulp(3.0, np.dtype(np.float16)) == 2.0**-9
    assert ulp(1.0, np.dtype(ml_dtypes.bfloat16)) == 2.0**-7
    assert ulp(1.0, np.dtype(np.float32)) == 2.0**-23
    assert ulp(0.5, np.dtype(np.float64)) == 2.0**-53


def test_float64_and_float32_kernels_pass_against_their_baselines():
    from attncli import attention

    options = AttentionOptions(rope=Rope("gptj"), window=(3, 2), alibi=True, sinks=SINKS, softcap=5.0)
    for dtype in (np.float32, np.float64):
        out, _ = attention(Q.astype(dtype), K.astype(dtype), V.astype(dtype), options, need_weights=False)
        verdict = check(out, Q.astype(dtype), K.astype(dtype), V.astype(dtype), options)
        assert verdict.passed and verdict.max_baseline_error > 0, (dtype, verdict.max_error, verdict.tolerance)


def test_pytorch_outputs_pass_live():
    """PyTorch's scaled_dot_product_attention (enable_gqa) in each dtype, when torch is here."""
    torch = pytest.importorskip("torch")
    for dtype, torch_dtype in (
        (np.float16, torch.float16),
        (ml_dtypes.bfloat16, torch.bfloat16),
        (np.float32, torch.float32),
        (np.float64, torch.float64),
    ):
        low = [m.astype(dtype) for m in (Q, K, V)]
        tq, tk, tv = (torch.from_numpy(m.astype(np.float64)).to(torch_dtype) for m in low)
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
        out = out.to(torch.float64).numpy().astype(dtype)
        verdict = check(out, *low, AttentionOptions(causal="top-left"))
        assert verdict.passed, (dtype, verdict.max_error, verdict.tolerance)
