"""The backward pass (core/grad.py) against central finite differences of the
forward reference in float64, for every variant and their combinations, and
against PyTorch autograd: pinned numbers (scripts/make_grad_refs.py), and
live when torch is importable."""

import json
from pathlib import Path

import numpy as np
import pytest

from attncli import AttentionOptions, attention, attention_grad
from attncli.core.options import Rope

DATA = Path(__file__).parent / "data" / "grad_refs.npz"
STEP = 1e-6


def loss(q, k, v, dout, options):
    """Σ O ∘ dO: its gradient with respect to the inputs is what attention_grad gives."""
    out, _ = attention(q, k, v, options, implementation="reference")
    return float(np.sum(out * dout))


def numeric(f, x):
    """Central differences of f at x, one cell at a time: [x's shape]."""
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + STEP
        up = f()
        x[idx] = old - STEP
        down = f()
        x[idx] = old
        grad[idx] = (up - down) / (2 * STEP)
    return grad


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def problem(seed, h_q=2, h_kv=2, n_q=3, n_k=4, d_k=4, d_v=3):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(h_q, n_q, d_k))
    k = rng.normal(size=(h_kv, n_k, d_k))
    v = rng.normal(size=(h_kv, n_k, d_v))
    dout = rng.normal(size=(h_q, n_q, d_v))
    return q, k, v, dout


EMPTY_ROW = np.array([[True, True, False, True], [False, False, False, False], [True, False, True, True]])

VARIANTS = {
    "plain": {},
    "scale and temperature": {"scale": 0.7, "temperature": 1.6},
    "causal top-left": {"causal": "top-left"},
    "causal bottom-right": {"causal": "bottom-right"},
    "window": {"window": (1, 0)},
    "mask with an empty row": {"mask": EMPTY_ROW},
    "softcap": {"softcap": 0.8},
    "alibi": {"alibi": True},
    "rope neox": {"rope": Rope("neox")},
    "rope gptj, partial": {"rope": Rope("gptj", theta=100.0, dim=2, offset=3)},
    "cosine": {"similarity": "cosine", "scale": 3.0},
    "sinks": {"sinks": np.array([0.3, -0.5])},
    "sinks and an empty row": {"sinks": np.array([0.3, -0.5]), "mask": EMPTY_ROW},
    "everything": {
        "softcap": 1.5,
        "alibi": True,
        "rope": Rope("neox"),
        "sinks": np.array([0.2, 1.0]),
        "causal": "bottom-right",
        "window": (2, -1),
        "temperature": 0.8,
    },
}


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)], ids=["mha", "gqa"])
def test_gradients_match_finite_differences(name, heads):
    q, k, v, dout = problem(len(name), *heads)
    settings = dict(VARIANTS[name])
    if "sinks" in settings and heads[0] == 4:
        settings["sinks"] = np.array([0.3, -0.5, 1.2, 0.0])
    options = AttentionOptions(**settings)
    grads = attention_grad(q, k, v, dout, options)
    for x, got in ((q, grads.dq), (k, grads.dk), (v, grads.dv)):
        assert got.shape == x.shape
        want = numeric(lambda: loss(q, k, v, dout, options), x)
        assert relative_error(got, want) <= 1e-6
    if options.sinks is not None:
        sinks = np.array(options.sinks, dtype=np.float64)
        want = numeric(lambda: loss(q, k, v, dout, options.but(sinks=sinks)), sinks)
        assert grads.dsinks is not None and relative_error(grads.dsinks, want) <= 1e-6


def test_bias_gradient_is_ds_summed_over_what_it_broadcast_along():
    q, k, v, dout = problem(7, 4, 2)
    bias = np.random.default_rng(8).normal(size=(3, 4))  # one [n_q, n_k] bias for every head
    bias[1, 2] = -np.inf  # a forbidden pair: no gradient
    grads = attention_grad(q, k, v, dout, AttentionOptions(bias=bias, softcap=2.0))
    finite = bias.copy()
    finite[1, 2] = 0.0

    def f():
        return loss(q, k, v, dout, AttentionOptions(bias=np.where(np.isinf(bias), -np.inf, finite), softcap=2.0))

    want = numeric(f, finite)
    assert grads.dbias is not None and grads.dbias.shape == (3, 4)
    assert grads.dbias[1, 2] == 0.0
    assert relative_error(grads.dbias, want) <= 1e-6


def test_fully_masked_rows_get_zero_gradients():
    q, k, v, dout = problem(3)
    grads = attention_grad(q, k, v, dout, AttentionOptions(mask=EMPTY_ROW))
    assert not grads.dq[:, 1].any()
    assert np.isfinite(grads.dk).all() and np.isfinite(grads.dv).all()


def test_broadcast_query_and_a_dout_of_the_wrong_shape():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    dout = rng.normal(size=(2, 3, 2))
    grads = attention_grad(q, k, v, dout)
    assert grads.dq.shape == (3, 4)
    want = numeric(lambda: loss(q, k, v, dout, AttentionOptions()), q)
    assert relative_error(grads.dq, want) <= 1e-6
    from attncli.errors import ShapeError

    with pytest.raises(ShapeError, match="dO is 3×2 but the output is 2×3×2"):
        attention_grad(q, k, v, dout[0])


def pinned_cases():
    if not DATA.exists():
        return []
    with np.load(DATA) as data:
        return sorted({key.split(".")[0] for key in data.files})


def options_of(data, name):
    settings = json.loads(str(data[f"{name}.options"]))
    if "rope" in settings:
        settings["rope"] = Rope(*settings["rope"])
    if "window" in settings:
        settings["window"] = tuple(settings["window"])
    for array in ("mask", "bias", "sinks"):
        if f"{name}.{array}" in data.files:
            settings[array] = data[f"{name}.{array}"]
    return AttentionOptions(**settings)


@pytest.mark.parametrize("name", pinned_cases())
def test_pinned_pytorch_autograd(name):
    with np.load(DATA) as data:
        options = options_of(data, name)
        grads = attention_grad(data[f"{name}.q"], data[f"{name}.k"], data[f"{name}.v"], data[f"{name}.dout"], options)
        for key, got in grads.named().items():
            want = data[f"{name}.{key}"]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=f"{name} {key}")


def test_pinned_numbers_are_what_torch_gives_now():
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_grad_refs", DATA.parents[2] / "scripts" / "make_grad_refs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports numpy only; torch is imported by the functions that need it
    with np.load(DATA) as data:
        for name in pinned_cases():
            inputs = {x: data[f"{name}.{x}"] for x in ("q", "k", "v", "dout")}
            arrays = {x: data[f"{name}.{x}"] for x in ("mask", "bias", "sinks") if f"{name}.{x}" in data.files}
            live = module.torch_grads(name, inputs, arrays)
            ours = attention_grad(*inputs.values(), options_of(data, name)).named()
            assert sorted(live) == sorted(ours)
            for key, g in live.items():
                np.testing.assert_allclose(ours[key], g, rtol=1e-10, atol=1e-10, err_msg=f"{name} {key}")


def test_the_pins_cover_the_variants():
    names = pinned_cases()
    assert len(names) >= 8


def test_live_sdpa_with_enable_gqa():
    torch = pytest.importorskip("torch")
    q, k, v, dout = problem(11, 4, 2, 5, 6, 8, 3)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
    out.backward(torch.tensor(dout))
    grads = attention_grad(q, k, v, dout, AttentionOptions(causal="top-left"))
    for got, want in ((grads.dq, tq.grad), (grads.dk, tk.grad), (grads.dv, tv.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- attn grad


def test_attn_grad_writes_every_gradient_in_one_npz(attn, tmp_path):
    q, k, v, dout = problem(5, 4, 2)
    sinks = np.array([0.1, 0.2, -0.3, 0.4])
    for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout), ("sinks", sinks)):
        np.save(tmp_path / f"{name}.npy", x)
    files = [tmp_path / f"{name}.npy" for name in "qkv"]
    result = attn(
        "grad",
        *files,
        "--dout",
        tmp_path / "dout.npy",
        "--sinks",
        tmp_path / "sinks.npy",
        "--causal",
        "--softcap",
        "2",
        "-f",
        "npz",
    )
    assert result.exit_code == 0, result.output
    import io

    written = np.load(io.BytesIO(result.stdout_bytes))
    want = attention_grad(q, k, v, dout, AttentionOptions(causal="top-left", softcap=2.0, sinks=sinks))
    assert sorted(written.files) == ["dk", "dq", "dsinks", "dv"]
    for name, g in want.named().items():
        np.testing.assert_array_equal(written[name], g)


def test_attn_grad_reads_dout_from_a_bundle_and_writes_json(attn, tmp_path):
    q, k, v, dout = problem(6, 2, 2)
    np.savez(tmp_path / "case.npz", q=q, k=k, v=v, dout=dout)
    data, notes = attn.json_and_notes("grad", tmp_path / "case.npz", "--window", "1,0")
    want = attention_grad(q, k, v, dout, AttentionOptions(window=(1, 0)))
    assert notes == []
    for name in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(np.array(data[name]), want.named()[name])
    assert data["shapes"] == {"dq": [2, 3, 4], "dk": [2, 4, 4], "dv": [2, 4, 3]}


def test_attn_grad_bshd_layout_and_a_table(attn, tmp_path):
    q, k, v, dout = problem(9, 2, 2)
    for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        np.save(tmp_path / f"{name}.npy", np.swapaxes(x, 0, 1))  # [seq, heads, dim]
    files = [tmp_path / f"{name}.npy" for name in "qkv"]
    result = attn("grad", *files, "--dout", tmp_path / "dout.npy", "--layout", "bshd", "-f", "npy", "--emit", "dk")
    assert result.exit_code == 0, result.output
    import io

    dk = np.load(io.BytesIO(result.stdout_bytes))
    np.testing.assert_array_equal(dk, np.swapaxes(attention_grad(q, k, v, dout).dk, 0, 1))
    table = attn("grad", *files, "--dout", tmp_path / "dout.npy", "--layout", "bshd", "-f", "table")
    assert table.exit_code == 0 and "head 1: dv" in table.stdout


# ---------------------------------------------------------------- check_grads: the rule on each gradient


def low_precision_case(seed=21):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(1, 4, 16, 16)), rng.normal(size=(1, 2, 24, 16)), rng.normal(size=(1, 2, 24, 8))
    dout = rng.normal(size=(1, 4, 16, 8))
    options = AttentionOptions(
        causal="bottom-right", softcap=3.0, sinks=np.array([0.5, -1.0, 0.0, 1.5]), rope=Rope("neox")
    )
    return q, k, v, dout, options


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_check_grads_passes_correct_low_precision_gradients(dtype):
    import ml_dtypes

    from attncli.core.check_grads import check_grads

    real = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    q, k, v, dout, options = low_precision_case()
    grads = {name: g.astype(real) for name, g in attention_grad(q, k, v, dout, options).named().items()}
    verdicts = check_grads(grads, *(x.astype(real) for x in (q, k, v, dout)), options)
    assert sorted(verdicts) == ["dk", "dq", "dsinks", "dv"]
    assert all(verdict.passed for verdict in verdicts.values()), {
        n: (v.max_error, v.tolerance) for n, v in verdicts.items()
    }


def planted(name, q, k, v, dout, options, dtype=np.float16):
    """Gradients in ``dtype`` with one known bug."""
    grads = attention_grad(q, k, v, dout, options).named()
    if name == "dK not summed over the GQA group":  # one query head's share of each K/V head
        per_query_head = attention_grad(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), dout, options)
        grads["dk"] = per_query_head.dk[:, ::2]
    elif name == "sink gradient dropped":
        grads["dsinks"] = np.zeros_like(grads["dsinks"])
    elif name == "softcap derivative missing":  # dQ = dS K · scale, without (1 − tanh²(Z / cap))
        from attncli.core.positions import query_positions, rotate

        n_q, n_k = q.shape[-2], k.shape[-2]
        zero_bias = np.zeros((1, 4, n_q, n_k))  # one per head, so that dbias = dS per head
        ds = attention_grad(q, k, v, dout, options.but(bias=zero_bias)).dbias
        k_rotated = np.repeat(rotate(k, np.arange(n_k), options.rope), 2, axis=1)  # [1, 4, n_k, d_k]
        dq_rotated = ds @ k_rotated / np.sqrt(q.shape[-1])
        grads["dq"] = rotate(dq_rotated, -query_positions(n_q, n_k, options.rope), options.rope)
    return {name: np.asarray(g).astype(dtype) for name, g in grads.items()}


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize(
    "bug, gradient",
    [
        ("dK not summed over the GQA group", "dk"),
        ("sink gradient dropped", "dsinks"),
        ("softcap derivative missing", "dq"),
    ],
)
def test_check_grads_fails_planted_bugs(bug, gradient, dtype):
    from attncli.core.check_grads import check_grads

    q, k, v, dout, options = low_precision_case()
    verdicts = check_grads(
        planted(bug, q, k, v, dout, options, dtype), *(x.astype(dtype) for x in (q, k, v, dout)), options
    )
    failed = sorted(name for name, verdict in verdicts.items() if not verdict.passed)
    assert failed == [gradient]
    assert verdicts[gradient].max_error > (5 if dtype == np.float16 else 10) * verdicts[gradient].tolerance


def test_float64_baseline_is_the_backward_summed_in_another_order():
    from attncli.core.check import ulp
    from attncli.core.check_grads import FLOAT64_GRAD_ULPS, check_grads

    q, k, v, dout, options = low_precision_case()
    verdicts = check_grads(attention_grad(q, k, v, dout, options).named(), q, k, v, dout, options)
    for name in ("dq", "dk", "dsinks"):  # the blocks' sums differ from the whole matrices' in the last bits
        unit = ulp(verdicts[name].scale, np.dtype(np.float64))
        assert 0 < verdicts[name].max_baseline_error <= 8 * unit
        assert verdicts[name].tolerance == 2 * verdicts[name].max_baseline_error + FLOAT64_GRAD_ULPS * unit


@pytest.mark.parametrize("name", pinned_cases())
def test_check_grads_passes_pinned_pytorch_float64_gradients_with_margin(name):
    from attncli.core.check_grads import check_grads

    with np.load(DATA) as data:
        grads = {
            key: data[f"{name}.{key}"] for key in ("dq", "dk", "dv", "dsinks", "dbias") if f"{name}.{key}" in data.files
        }
        verdicts = check_grads(grads, *(data[f"{name}.{x}"] for x in ("q", "k", "v", "dout")), options_of(data, name))
    assert sorted(verdicts) == sorted(grads)
    assert all(v.max_error < 0.5 * v.tolerance for v in verdicts.values()), {
        key: (v.max_error, v.tolerance) for key, v in verdicts.items()
    }


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_check_grads_passes_pytorch_sdpa_backward_live(dtype):
    torch = pytest.importorskip("torch")
    from attncli.core.check_grads import check_grads

    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(1, 4, 16, 16)), rng.normal(size=(1, 2, 24, 16)), rng.normal(size=(1, 2, 24, 8))
    dout = rng.normal(size=(1, 4, 16, 8))
    cast = getattr(torch, dtype)
    tq, tk, tv = (torch.tensor(x).to(cast).requires_grad_() for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
    out.backward(torch.tensor(dout).to(cast))

    def as_numpy(t):
        return t.detach().double().numpy().astype(ml_dtypes_of(dtype))

    grads = {"dq": as_numpy(tq.grad), "dk": as_numpy(tk.grad), "dv": as_numpy(tv.grad)}
    inputs = [as_numpy(torch.tensor(x).to(cast)) for x in (q, k, v, dout)]
    verdicts = check_grads(grads, *inputs, AttentionOptions(causal="top-left"))
    assert all(verdict.passed for verdict in verdicts.values()), {
        n: (v.max_error, v.tolerance) for n, v in verdicts.items()
    }


def ml_dtypes_of(name):
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


# ---------------------------------------------------------------- attn check --grad


def test_attn_check_grad_passes_attn_grad_and_names_a_planted_bug(attn, tmp_path):
    import io

    q, k, v, dout, options = low_precision_case()
    for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        np.save(tmp_path / f"{name}.npy", x.astype(np.float16))
    np.save(tmp_path / "sinks.npy", options.sinks)
    inputs = [tmp_path / f"{name}.npy" for name in "qkv"]
    flags = [
        "--dout",
        tmp_path / "dout.npy",
        "--sinks",
        tmp_path / "sinks.npy",
        "--causal-align",
        "bottom-right",
        "--softcap",
        "3",
        "--rope",
        "neox",
    ]
    written = attn("grad", *inputs, *flags, "-f", "npz")
    assert written.exit_code == 0, written.output
    grads = dict(np.load(io.BytesIO(written.stdout_bytes)))
    np.savez(tmp_path / "good.npz", **{name: g.astype(np.float16) for name, g in grads.items()})
    data = attn.json("check", "--grad", tmp_path / "good.npz", *inputs, *flags)
    assert data["passed"] and sorted(data["gradients"]) == ["dk", "dq", "dsinks", "dv"]
    np.savez(tmp_path / "bad.npz", **planted("dK not summed over the GQA group", q, k, v, dout, options))
    result = attn("check", "--grad", tmp_path / "bad.npz", *inputs, *flags, "-f", "json")
    assert result.exit_code == 3
    assert result.stderr.startswith(f"attn: error: {tmp_path}/bad.npz: dk disagrees with the reference")
    assert " at batch 0, head " in result.stderr and ", key " in result.stderr
    assert json.loads(result.stdout)["gradients"]["dk"]["passed"] is False
    loose = attn("check", "--grad", tmp_path / "bad.npz", *inputs, *flags, "--grad-factor", "dk=1000", "-f", "json")
    assert loose.exit_code == 0, loose.output


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)], ids=["mha", "gqa"])
def test_blocked_backward_is_the_whole_one(name, heads):
    q, k, v, dout = problem(len(name) + 1, *heads, n_q=5, n_k=7)
    settings = dict(VARIANTS[name])
    settings.pop("mask", None)  # EMPTY_ROW is 3 × 4: here an empty row of its own
    settings["mask"] = np.ones((5, 7), dtype=bool)
    settings["mask"][2] = False
    if "sinks" in settings:
        settings["sinks"] = np.linspace(-1, 1, heads[0])
    settings["bias"] = np.random.default_rng(3).normal(size=(5, 7))
    options = AttentionOptions(**settings)
    whole = attention_grad(q, k, v, dout, options).named()
    for block in (1, 2, 3):
        blocked = attention_grad(q, k, v, dout, options, block=block).named()
        assert sorted(blocked) == sorted(whole)
        for key, g in whole.items():
            np.testing.assert_allclose(blocked[key], g, rtol=1e-12, atol=1e-13, err_msg=f"{key} block {block}")


BIASES = {  # q is [2 batches, H_q heads, 5 queries, d]; keys 7
    "shared by batches and heads": lambda h: (5, 7),
    "[1, 1, n_q, n_k]": lambda h: (1, 1, 5, 7),
    "one per head": lambda h: (h, 5, 7),
    "one per batch and head": lambda h: (2, h, 5, 7),
    "one per key, per head": lambda h: (2, h, 1, 7),
    "one per query": lambda h: (5, 1),
}


@pytest.mark.parametrize("bias", list(BIASES))
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)], ids=["mha", "gqa"])
def test_blocked_dbias_is_summed_to_the_bias_shape_block_by_block(bias, heads, monkeypatch):
    import attncli.core.grad as grad

    rng = np.random.default_rng(11)
    h_q, h_kv = heads
    q, k, v = rng.normal(size=(2, h_q, 5, 4)), rng.normal(size=(2, h_kv, 7, 4)), rng.normal(size=(2, h_kv, 7, 3))
    dout = rng.normal(size=(2, h_q, 5, 3))
    options = AttentionOptions(bias=rng.normal(size=BIASES[bias](h_q)), causal="bottom-right", softcap=2.0)
    whole = attention_grad(q, k, v, dout, options).dbias
    held = []
    original = grad._blocked
    monkeypatch.setattr(grad, "_blocked", lambda *a: held.append(original(*a)[3]) or original(*a))
    for block in (2, 3):
        blocked = attention_grad(q, k, v, dout, options, block=block).dbias
        assert blocked.shape == options.bias.shape
        np.testing.assert_allclose(blocked, whole, rtol=1e-12, atol=1e-13, err_msg=f"block {block}")
    assert all(ds.size == options.bias.size for ds in held)  # never every head's n_q × n_k


def test_blocked_backward_runs_batch_and_kv_heads_on_the_thread_pool(monkeypatch):
    import attncli.core.grad_blocks as grad

    rng = np.random.default_rng(12)
    q, k, v = rng.normal(size=(2, 6, 9, 4)), rng.normal(size=(2, 3, 11, 4)), rng.normal(size=(2, 3, 11, 3))
    dout = rng.normal(size=(2, 6, 9, 3))
    options = AttentionOptions(bias=rng.normal(size=(9, 11)), sinks=np.linspace(-1, 1, 6), causal="bottom-right")
    parts = []
    original = grad.map_blocks
    monkeypatch.setattr(
        grad,
        "map_blocks",
        lambda fn, blocks, workers, progress: parts.append(len(blocks)) or original(fn, blocks, workers, progress),
    )
    one = attention_grad(q, k, v, dout, options, block=4, workers=1).named()
    two = attention_grad(q, k, v, dout, options, block=4, workers=2).named()
    assert parts == [2 * 3, 2 * 3]  # batch × K/V heads, each K/V head with its group of query heads
    whole = attention_grad(q, k, v, dout, options).named()
    for key in whole:
        if key != "dbias":  # each part's own sums, in the same order whatever thread runs it
            np.testing.assert_array_equal(two[key], one[key])
        np.testing.assert_allclose(two[key], whole[key], rtol=1e-12, atol=1e-13, err_msg=key)


def test_long_inputs_go_in_blocks(monkeypatch):
    """Past WHOLE_CELLS: fused by blocks of queries (grad_fused) when a block of them
    holds every key, else the two passes in blocks of BLOCK (grad_blocks)."""
    import attncli.core.grad as grad
    import attncli.core.grad_fused as grad_fused

    seen, fused = [], []
    original, original_fused = grad._blocked, grad.fused
    monkeypatch.setattr(grad, "WHOLE_CELLS", 10)
    monkeypatch.setattr(grad, "BLOCK", 2)
    monkeypatch.setattr(grad, "_blocked", lambda *a: seen.append(a[4]) or original(*a))  # its block
    monkeypatch.setattr(grad, "fused", lambda *a: fused.append(1) or original_fused(*a))
    monkeypatch.setattr(grad_fused, "SMALLEST_ROWS", 1)
    q, k, v, dout = problem(1)
    whole = grad.backward(q, k, v, dout, AttentionOptions())
    for cells, path in ((1 << 19, fused), (1, seen)):  # a block of one query against every key no longer fits
        monkeypatch.setattr(grad_fused, "CELLS", cells)
        got = attention_grad(q, k, v, dout)
        assert path == ([1] if path is fused else [2])
        for key, g in whole.named().items():
            np.testing.assert_allclose(got.named()[key], g, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("band", ["causal", "window", "decode"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_rounded_closed_form_goes_by_rows_past_rows_cells(monkeypatch, dtype, band):
    """check --grad's baseline (every step rounded to the gradients' dtype) at the lengths kernels
    run at: by blocks of query rows past ROWS_CELLS logits, never n_q × n_k. The same steps:
    dQ row for row, dK and dV summed in another order before their one rounding (within one
    unit of the dtype at their largest magnitude), the same verdicts."""
    import attncli.core.grad as grad
    from attncli.core.baseline import rounding
    from attncli.core.check_grads import check_grads

    ml_dtypes = pytest.importorskip("ml_dtypes")
    low = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    rng = np.random.default_rng(5)
    n_k = 30 if band == "decode" else 24  # decode: 24 queries after 6 cached keys, causal bottom-right
    q, dout = rng.standard_normal((1, 4, 24, 8)), rng.standard_normal((1, 4, 24, 8))
    k, v = rng.standard_normal((1, 2, n_k, 8)), rng.standard_normal((1, 2, n_k, 8))
    settings = {
        "causal": {"causal": "top-left"},
        "window": {"window": (3, 2), "alibi": True},
        "decode": {"causal": "bottom-right", "mask": rng.random((24, n_k)) < 0.9},
    }[band]
    options = AttentionOptions(
        softcap=5.0, sinks=rng.standard_normal(4), bias=rng.standard_normal((24, n_k)) * 0.1, **settings
    )
    r = rounding(low)
    whole = grad.backward(r(q), r(k), r(v), r(dout), options, r)
    calls = []
    original = grad.scores
    monkeypatch.setattr(
        grad,
        "scores",
        lambda p, rows=slice(None), cols=slice(None), **kw: calls.append((rows, cols)) or original(p, rows, cols, **kw),
    )
    monkeypatch.setattr(grad, "ROWS_CELLS", 4 * n_k * 5)  # blocks of 5 query rows
    rows = grad.backward(r(q), r(k), r(v), r(dout), options, r)
    assert [r.start for r, _ in calls] == [0, 5, 10, 15, 20] and rows.steps is None and whole.steps is not None
    seen = [(c.start, c.stop) for _, c in calls]  # the keys some row of each block may see, no others
    assert (
        seen
        == {
            "causal": [(0, 5), (0, 10), (0, 15), (0, 20), (0, 24)],
            "window": [(0, 7), (2, 12), (7, 17), (12, 22), (17, 24)],
            "decode": [(0, 11), (0, 16), (0, 21), (0, 26), (0, 30)],
        }[band]
    )
    unit = 2.0 ** -(7 if dtype == "bfloat16" else 10)
    for key, g in whole.named().items():
        got = rows.named()[key]
        assert np.abs(got - g).max() <= unit * np.abs(g).max(), key
    grads = {key: g.astype(low) for key, g in attention_grad(q, k, v, dout, options).named().items() if key != "out"}
    monkeypatch.setattr(grad, "ROWS_CELLS", 1 << 22)
    before = check_grads(grads, q, k, v, dout, options)
    monkeypatch.setattr(grad, "ROWS_CELLS", 4 * n_k * 5)
    after = check_grads(grads, q, k, v, dout, options)
    assert {n: v.passed for n, v in before.items()} == {n: v.passed for n, v in after.items()}
    assert {n: v.worst for n, v in before.items()} == {n: v.worst for n, v in after.items()}


# ---------------------------------------------------------------- attn explain --grad


def test_attn_explain_grad_shows_the_backward_steps_with_the_numbers(attn, tmp_path):
    q, k, v, dout = problem(12, 4, 2)
    for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout)):
        np.save(tmp_path / f"{name}.npy", x)
    inputs = [tmp_path / f"{name}.npy" for name in "qkv"]
    flags = ["--grad", "--dout", tmp_path / "dout.npy", "--head", "3", "--softcap", "2", "--rope", "neox"]
    data = attn.json("explain", *inputs, *flags)
    want = attention_grad(q, k, v, dout, AttentionOptions(softcap=2.0, rope=Rope("neox")))
    np.testing.assert_allclose(np.array(data["backward"]["dq"]), want.dq[3], rtol=1e-12)
    np.testing.assert_allclose(np.array(data["backward"]["dk"]), want.dk[1], rtol=1e-12)
    np.testing.assert_allclose(np.array(data["backward"]["ds"]), want.steps.ds[3], rtol=1e-12)
    view = attn("explain", *inputs, *flags, "--query", "1", "-f", "table")
    assert view.exit_code == 0, view.output
    for words in (
        "Backward: dP = dO · Vᵀ",
        "The softmax's Jacobian",
        "dS = P ∘ (dP − δ)",
        "Through the soft-cap",
        "dQ for q1: dZ · K · scale",
        "turned back",
    ):
        assert words in view.stdout, words


def test_attn_check_grad_takes_three_gradient_files(attn, tmp_path):
    q, k, v, dout = problem(13, 4, 2)
    grads = attention_grad(q, k, v, dout)
    for name, x in (
        ("q", q),
        ("k", k),
        ("v", v),
        ("dout", dout),
        ("dq", grads.dq),
        ("dk", grads.dk),
        ("dv", grads.dv * 1.01),
    ):
        np.save(tmp_path / f"{name}.npy", x.astype(np.float32))
    files = [tmp_path / f"{name}.npy" for name in ("dq", "dk", "dv", "q", "k", "v")]
    result = attn("check", "--grad", *files, "--dout", tmp_path / "dout.npy", "-f", "json")
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"attn: error: {tmp_path}/dv.npy: dv disagrees with the reference")
    data = json.loads(result.stdout)
    assert data["gradients"]["dq"]["passed"] and data["gradients"]["dk"]["passed"]


def test_attn_grad_writes_dsinks_as_one_csv_row(attn, tmp_path):
    q, k, v, dout = problem(14, 2, 2)
    sinks = np.array([0.5, -0.5])
    for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout), ("sinks", sinks)):
        np.save(tmp_path / f"{name}.npy", x)
    files = [tmp_path / f"{name}.npy" for name in "qkv"]
    result = attn(
        "grad",
        *files,
        "--dout",
        tmp_path / "dout.npy",
        "--sinks",
        tmp_path / "sinks.npy",
        "-f",
        "csv",
        "--emit",
        "dsinks",
    )
    assert result.exit_code == 0, result.output
    want = attention_grad(q, k, v, dout, AttentionOptions(sinks=sinks)).dsinks
    np.testing.assert_array_equal([float(x) for x in result.stdout.strip().split(",")], want)
