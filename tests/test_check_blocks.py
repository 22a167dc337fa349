"""``attn check`` in blocks against the whole-matrix check it replaced
(tests/check_oracle.py, kept as it was): the same verdict and the same
figures on small inputs across the options, with parts of one head and
blocks of a few rows so that the cutting is exercised. The reference is now
the blocked kernel's, which sums in another order (about 1e-16 relative), so
the figures built on it agree to that.

The naive baseline's numbers are the same bit for bit where every query may
see every key. Under causal or a window its softmax's sum and its product
with V now run over the keys a block of rows may see, where the whole-matrix
baseline also added the exact zeros of the others: only the order of the
float32 sums changes (BLAS cuts a product's keys by their number), by a unit
in float32's last place, which moves a float16 or bfloat16 result by one of
its own units now and then. Measured on the cases below: no verdict and no
worst index changed; max |baseline − ref| and the tolerance did not move
(by 0.16 and 0.31 units in the last place of OUT's dtype at the output's
largest magnitude at most, float32, with other cuts of the blocks tried);
the baseline's per-row figures moved by at most 1.4 such units (float32, a
window); the 16-bit baselines not at all here, and in 105 of 89,600 cells
on 700 × 700 below (float16, by 1/16 of a unit at the largest magnitude)."""

import check_oracle
import numpy as np
import pytest

from attncli import AttentionOptions
from attncli.core import baseline as baseline_module
from attncli.core import check as check_module
from attncli.core.baseline import Rows, fused
from attncli.core.options import Rope
from attncli.core.parts import parts, validate

ml_dtypes = pytest.importorskip("ml_dtypes")

RNG = np.random.default_rng(27)
B, H, H_KV, N_Q, N_K, D = 2, 4, 2, 19, 23, 8
Q = RNG.standard_normal((B, H, N_Q, D))
K = RNG.standard_normal((B, H_KV, N_K, D))
V = RNG.standard_normal((B, H_KV, N_K, D))
SINKS = np.array([0.3, 1.0, -0.5, 2.0])
BIAS = RNG.standard_normal((H, N_Q, N_K))
MASK = RNG.random((N_Q, N_K)) > 0.3

CASES = {
    "plain": {},
    "causal top-left": {"causal": "top-left"},
    "causal bottom-right": {"causal": "bottom-right"},
    "window": {"window": (5, 2)},
    "window causal": {"window": (4, 0), "causal": "bottom-right"},
    "rope neox + sinks": {"rope": Rope("neox"), "sinks": SINKS},
    "rope gptj, half the features": {"rope": Rope("gptj", dim=4)},
    "soft-cap": {"softcap": 2.0},
    "bias per head": {"bias": BIAS},
    "bias + mask": {"bias": BIAS[0], "mask": MASK},
    "alibi": {"alibi": True, "causal": "top-left"},
    "alibi slopes": {"alibi_slopes": np.array([0.5, 0.25, 0.125, 0.0625])},
    "everything": {"rope": Rope("neox"), "window": (6, 0), "sinks": SINKS, "softcap": 5.0, "alibi": True},
}
DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


@pytest.fixture
def small_blocks(monkeypatch):
    """Parts of one K/V head and blocks of 3 rows; the fused baseline only (as before issue 26)."""
    monkeypatch.setattr(check_module, "PART_BYTES", 1)
    monkeypatch.setattr(check_module, "BLOCK_CELLS", 3 * N_K * H // H_KV)
    monkeypatch.setattr(check_module, "rounds_differently", lambda options, dtype: False)


def kernel_output(q, k, v, options, dtype, noise):
    """A correct kernel's output rounded to ``dtype``, nudged by ``noise`` ulps-ish in one cell."""
    ref = check_oracle.reference(*(m.astype(np.float64) for m in (q, k, v)), options).output
    out = ref.astype(dtype)
    out[1, 2, 7, 3] += np.asarray(noise, dtype=np.float64).astype(dtype)
    return out


@pytest.mark.parametrize("noise", [0.0, 0.05])
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_the_blocked_check_gives_the_whole_checks_verdict_and_figures(small_blocks, case, dtype_name, noise):
    dtype = DTYPES[dtype_name]
    options = AttentionOptions(**CASES[case])
    q, k, v = (m.astype(dtype) for m in (Q, K, V))
    out = kernel_output(q, k, v, options, dtype, noise)
    old = check_oracle.check(out, q, k, v, options)
    new = check_module.check(out, q, k, v, options, keep=True)
    assert new.passed == old.passed
    assert new.worst == old.worst
    close = dict(rtol=1e-9, atol=1e-13)
    assert new.max_error == pytest.approx(old.max_error, rel=1e-9, abs=1e-13)
    unit = check_module.ulp(old.scale, np.dtype(dtype))  # one unit in the last place of OUT's dtype at max|ref|
    assert new.max_baseline_error == pytest.approx(old.max_baseline_error, rel=1e-9, abs=unit)
    assert new.tolerance == pytest.approx(old.tolerance, rel=1e-9, abs=unit)
    assert new.scale == pytest.approx(old.scale, rel=1e-9, abs=1e-13)
    assert new.worst_out == old.out[old.worst] and new.worst_reference == pytest.approx(old.reference[old.worst])
    np.testing.assert_allclose(new.by_query, old.error.max(axis=-1), **close)
    np.testing.assert_allclose(new.baseline_by_query, old.baseline_error.max(axis=-1), rtol=1e-9, atol=2 * unit)
    np.testing.assert_allclose(new.error, old.error, **close)
    np.testing.assert_allclose(new.reference, old.reference, **close)


def assert_same_baseline(
    got: np.ndarray, whole: np.ndarray, options: AttentionOptions, dtype: np.dtype, scale: float
) -> None:
    """Bit for bit where every query may see every key; under causal or a window, within
    one unit in the last place of ``dtype`` at the output's largest magnitude ``scale``
    (two for float32, whose baseline is not rounded past its own sums' order: measured 2)."""
    if options.causal is None and options.window is None:
        assert np.array_equal(got, whole, equal_nan=True)
        return
    units = 2 if dtype == np.float32 else 1
    np.testing.assert_allclose(got, whole, rtol=0, atol=units * check_module.ulp(scale, dtype))


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case", CASES)
def test_the_baseline_in_blocks_is_the_whole_baseline(case, dtype_name):
    dtype = np.dtype(DTYPES[dtype_name])
    options = AttentionOptions(**CASES[case])
    q, k, v = (m.astype(dtype) for m in (Q, K, V))
    whole = check_oracle.naive(q, k, v, options, dtype)  # [B, H, N_Q, D]
    scale = float(np.abs(whole).max())
    layout = validate(q, k, v, options)
    for part in parts(q, k, v, options, layout, most_bytes=1):
        base = fused(part.q, part.k, part.v, part.options, dtype)
        for start in range(0, N_Q, 4):
            rows = Rows.span(start, min(start + 4, N_Q))
            assert_same_baseline(base.rows(rows), whole[part.where][..., rows.index, :], options, dtype, scale)
        chosen = np.array([0, 1, 5, 6, 7, 12, 18])
        assert_same_baseline(base.rows(Rows.chosen(chosen)), whole[part.where][..., chosen, :], options, dtype, scale)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
def test_blocks_of_a_longer_input_are_the_whole_baseline(dtype_name):
    """Blocks of 100 rows of 700 against the whole 700 × 700 (BLAS's gemm on both); d = 64, so
    the factor is 1/8 and a rounded score times it is rounded only where it is small. Causal:
    each block sums over the keys its rows may see; a 16-bit result moves by one of its units
    now and then (float16: 105 of 89,600 cells, by 1/16 of a unit at the largest magnitude)."""
    rng = np.random.default_rng(1)
    dtype = np.dtype(DTYPES[dtype_name])
    q, k, v = (rng.standard_normal((1, 2, 700, 64)).astype(dtype) for _ in range(3))
    options = AttentionOptions(causal="top-left", rope=Rope("neox"), softcap=30.0)
    whole = check_oracle.naive(q, k, v, options, dtype)
    base = fused(q, k, v, options, dtype)
    got = np.concatenate([base.rows(Rows.span(start, start + 100)) for start in range(0, 700, 100)], axis=-2)
    assert_same_baseline(got, whole, options, dtype, float(np.abs(whole).max()))
    if dtype != np.float32:
        assert np.mean(got != whole) < 0.01


def test_the_baseline_never_reads_the_keys_a_block_may_not_see():
    """Causal: a NaN in K and V at key 500 leaves the rows before it finite (the whole-matrix
    baseline multiplied its weight, 0, by NaN into every row)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 700, 64)).astype(np.float16) for _ in range(3))
    k[0, 500], v[0, 500] = np.nan, np.nan
    base = fused(q, k, v, AttentionOptions(causal="top-left"), np.dtype(np.float16))
    assert np.isfinite(base.rows(Rows.span(0, 100))).all()
    assert np.isfinite(base.rows(Rows.span(400, 500))).all()


def test_the_naive_baseline_is_still_the_whole_one():
    options = AttentionOptions(**CASES["everything"])
    q, k, v = (m.astype(np.float16) for m in (Q, K, V))
    dtype = np.dtype(np.float16)
    assert np.array_equal(check_module.naive(q, k, v, options, dtype), check_oracle.naive(q, k, v, options, dtype))


def test_step_by_step_rounding_only_widens_the_baseline(monkeypatch):
    """With RoPE and a soft-cap in bfloat16 the step-by-step kernel rounds differently: the
    baseline error is then the larger of the two, never less than the fused one's."""
    options = AttentionOptions(rope=Rope("neox"), softcap=5.0, causal="top-left")
    q, k, v = (m.astype(ml_dtypes.bfloat16) for m in (Q, K, V))
    out = kernel_output(q, k, v, options, ml_dtypes.bfloat16, 0.0)
    both = check_module.check(out, q, k, v, options)
    monkeypatch.setattr(check_module, "rounds_differently", lambda options, dtype: False)
    fused_only = check_module.check(out, q, k, v, options)
    assert both.max_baseline_error >= fused_only.max_baseline_error
    assert (both.baseline_by_query >= fused_only.baseline_by_query).all()
    assert (both.baseline_by_query > fused_only.baseline_by_query).mean() > 0.3
    assert baseline_module.rounds_differently(options, np.dtype(ml_dtypes.bfloat16))
    assert not baseline_module.rounds_differently(options, np.dtype(np.float32))


# ---------------------------------------------------------------- check --grad by parts

GRAD_CASES = {
    "gqa causal rope sinks soft-cap": (
        (2, 4, 12, 8),
        (2, 2, 15, 8),
        {"causal": "bottom-right", "rope": Rope("neox"), "sinks": SINKS, "softcap": 3.0},
    ),
    "bias per head, alibi": ((1, 4, 12, 8), (1, 4, 12, 8), {"bias": RNG.standard_normal((4, 12, 12)), "alibi": True}),
    "bias shared, window": ((2, 4, 12, 8), (2, 2, 12, 8), {"bias": RNG.standard_normal((12, 12)), "window": (3, 1)}),
    "Q shared by the batch": ((1, 4, 12, 8), (3, 2, 12, 8), {"causal": "top-left"}),
    "K and V shared by the heads": ((2, 4, 12, 8), (2, 1, 12, 8), {"sinks": SINKS}),
    "matrices": ((12, 8), (14, 8), {"causal": "top-left"}),
}


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("case", GRAD_CASES)
def test_check_grads_by_parts_gives_the_whole_checks_verdicts(monkeypatch, case, dtype_name):
    from attncli.core.check_grads import check_grads
    from attncli.core.grad import attention_grad

    monkeypatch.setattr(check_module, "PART_BYTES", 1)
    q_shape, kv_shape, settings = GRAD_CASES[case]
    rng = np.random.default_rng(3)
    dtype = DTYPES[dtype_name]
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in (q_shape, kv_shape, kv_shape))
    options = AttentionOptions(**settings)
    out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2][:-1] + (q.shape[-3],) if q.ndim > 2 else ())
    dout = rng.standard_normal((*out_shape, q.shape[-2], v.shape[-1])).astype(dtype)
    grads = attention_grad(q, k, v, dout, options).named()
    grads = {name: g.astype(dtype) for name, g in grads.items()}
    grads["dq"][(0,) * (grads["dq"].ndim - 2) + (3, 2)] += np.asarray(0.01).astype(dtype)  # one gradient off
    old = check_oracle.check_grads(grads, q, k, v, dout, options)
    new = check_grads(grads, q, k, v, dout, options, keep=True)
    assert sorted(new) == sorted(old)
    assert new["dq"].worst == old["dq"].worst == (*(0,) * (q.ndim - 2), 3, 2)  # the planted one
    for name in old:  # elsewhere the largest error is rounding noise: where it falls may move
        assert new[name].passed == old[name].passed, name
        assert new[name].max_error == pytest.approx(old[name].max_error, rel=1e-9, abs=1e-12), name
        assert new[name].max_baseline_error == pytest.approx(old[name].max_baseline_error, rel=1e-6, abs=1e-12), name
        assert new[name].atol == pytest.approx(old[name].atol), name
        assert new[name].worst_out == pytest.approx(old[name].out[new[name].worst]), name
        np.testing.assert_allclose(new[name].error, old[name].error, rtol=1e-9, atol=1e-12)


def test_rounding_to_float16_in_place_gives_numpys_numbers():
    """round_float16_in_place against numpy's conversion, as numbers (a negative number that
    rounds to zero may come back +0; every float32 was compared once, offline): random numbers
    at every scale, ties, both sides of float16's ranges and of 32768 (where numpy's
    conversion takes over), inf, NaN; in place."""
    from attncli.core.baseline import round_float16_in_place

    rng = np.random.default_rng(17)
    x = (rng.standard_normal(200_000) * np.exp2(rng.uniform(-30, 17, 200_000))).astype(np.float32)
    steps = np.exp2(np.arange(-24, 16)).astype(np.float32)
    ties = np.concatenate([steps * 1.5, steps * (1 + 2.0**-11), steps * (1 + 3 * 2.0**-11)]).astype(np.float32)
    edges = np.array(
        [0.0, -0.0, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14, 32767.9, 32768, 65504, 65519.99, 65520, 65536]
        + [np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal],
        dtype=np.float32,
    )
    far = np.array([1e38, -1e38, np.inf, -np.inf, np.nan], np.float32)
    for values in (x, x[np.abs(x) < 32768], ties, -ties, edges, -edges, far):
        with np.errstate(over="ignore"):
            expected = values.astype(np.float16).astype(np.float32)
        got = values.copy()
        assert round_float16_in_place(got) is got
        same = (got == expected) | (np.isnan(got) & np.isnan(expected))
        assert same.all(), values[~same][:5]


def test_float16_scores_times_a_power_of_two_are_rounded_again_as_numpy_would():
    """Every float16 number times 2^−m (m = 0..12, the factor of d_k up to 2^24), in float32:
    the baseline's second rounding (two passes for float16) gives numpy's conversion of the
    numbers below float16's smallest normal and leaves the others alone."""
    from attncli.core.baseline import _rounded_where_small, round_float16

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    for m in range(13):
        with np.errstate(invalid="ignore"):
            x = every * np.float32(2.0**-m)
        expected = x.copy()
        small = np.abs(x) < 2.0**-14
        expected[small] = x[small].astype(np.float16).astype(np.float32)
        got = _rounded_where_small(x.copy(), 2.0**-14, round_float16)
        same = (got == expected) | (np.isnan(got) & np.isnan(expected))
        assert same.all(), (m, x[~same][:5])


def test_rounding_to_float16_is_numpys_bit_for_bit():
    """round_float16 against numpy's conversion (every float32 was compared once, offline):
    random numbers at every scale, both sides of float16's ranges, ties, zeros, inf, NaN."""
    from attncli.core.baseline import round_float16

    rng = np.random.default_rng(16)
    scales = np.exp2(rng.uniform(-30, 20, 200_000))
    x = (rng.standard_normal(200_000) * scales).astype(np.float32)
    steps = np.exp2(np.arange(-24, 16)).astype(np.float32)
    ties = np.concatenate([steps * 1.5, steps * (1 + 2.0**-11), steps * (1 + 3 * 2.0**-11)]).astype(np.float32)
    special = np.array(
        [0.0, -0.0, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14, 65504, 65519.99, 65520, -65520, 1e38, np.inf, -np.inf]
        + [np.nan, np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal],
        dtype=np.float32,
    )
    for values in (x, ties, -ties, special):
        with np.errstate(over="ignore"):
            expected = values.astype(np.float16).astype(np.float32)
        got = round_float16(values)
        same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
        assert same.all(), values[~same][:5]
