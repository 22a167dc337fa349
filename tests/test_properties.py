"""Properties of the attention maths, searched for counter-examples by Hypothesis.

Tolerances. Against a float64 reference written one query at a time, float64
results agree to 1e-9: both compute the same dot products, only summed in a
different order (relative error ~1e-16 per term, scores here stay below 1e3).
float32 is held to PyTorch's own float32 tolerance (atol 1e-5, rtol 1.3e-6):
with |values| ≤ 3 and d ≤ 8 a score is at most 72/√d_k·|scale| before
rounding, so its float32 error (~2⁻²⁴ relative per term) stays near 1e-6,
and a softmax weight moves by at most about the same amount.
"""

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attncli import attention, attention_steps, causal_mask
from attncli.errors import AttnError

from reference import attention as reference
from reference import split_mask

DTYPES = st.sampled_from([np.float32, np.float64])


@st.composite
def problems(draw, magnitude=3.0, dtypes=DTYPES):
    """(q, k, v) of random shapes and dtype, values in [-magnitude, magnitude]."""
    n_q, n_k = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    dtype = draw(dtypes)
    width = 32 if dtype == np.float32 else 64
    m = float(np.float32(magnitude)) if width == 32 else magnitude
    elements = st.floats(-m, m, width=width)
    q, k, v = (draw(arrays(dtype, shape, elements=elements)) for shape in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))
    return q, k, v


@st.composite
def masks(draw, n_q, n_k):
    """A boolean mask, a 0/1 float mask, an additive mask with -inf, or none."""
    kind = draw(st.sampled_from(["none", "bool", "01", "additive"]))
    if kind == "none":
        return None
    allowed = draw(arrays(bool, (n_q, n_k)))
    if kind == "bool":
        return allowed
    if kind == "01":
        return allowed.astype(np.float64)
    bias = draw(arrays(np.float64, (n_q, n_k), elements=st.floats(-5, 5)))
    return np.where(allowed, bias, -np.inf)


def tolerance(dtype):
    return dict(atol=1e-5, rtol=1.3e-6) if dtype == np.float32 else dict(atol=1e-9, rtol=1e-9)


@given(problems(), st.data())
def test_agrees_with_float64_reference(problem, data):
    q, k, v = problem
    mask = data.draw(masks(len(q), len(k)))
    causal = data.draw(st.sampled_from([False, True, "bottom-right"]))
    scale = data.draw(st.sampled_from([None, 0.25, 2.0]))
    temperature = data.draw(st.sampled_from([1.0, 0.5, 3.0]))
    out, w = attention(q, k, v, mask=mask, causal=causal, scale=scale, temperature=temperature)
    allowed, bias = split_mask(mask)
    if causal:
        c = causal_mask(len(q), len(k), "top-left" if causal is True else causal)
        allowed = c if allowed is None else allowed & c
    effective = (1 / math.sqrt(q.shape[1]) if scale is None else scale) / temperature
    ref_out, ref_w = reference(q, k, v, effective, allowed, bias)  # the mask is added after scaling
    assert out.dtype == q.dtype and w.dtype == q.dtype
    np.testing.assert_allclose(w, ref_w, **tolerance(q.dtype))
    np.testing.assert_allclose(out, ref_out, **tolerance(q.dtype))


@given(problems(magnitude=1e30, dtypes=st.just(np.float64)), st.data())
def test_rows_are_distributions_even_at_extreme_magnitudes(problem, data):
    q, k, v = problem
    mask = data.draw(masks(len(q), len(k)))
    try:
        out, w = attention(q, k, v, mask=mask)
    except AttnError as e:  # |q·k| past float64's range is refused, never NaN
        assert "overflow" in str(e)
        return
    assert np.isfinite(w).all() and np.isfinite(out).all()
    assert ((w >= 0) & (w <= 1)).all()
    sums = w.sum(axis=1)
    allowed, _ = split_mask(mask)
    for i, total in enumerate(sums):
        if allowed is not None and not allowed[i].any():
            assert total == 0 and (out[i] == 0).all()
        else:
            assert total == pytest.approx(1.0, abs=1e-12)


@given(problems(magnitude=1e30, dtypes=st.just(np.float32)))
def test_float32_overflow_is_an_error_or_a_distribution(problem):
    q, k, v = problem
    try:
        out, w = attention(q, k, v)
    except AttnError as e:
        assert "overflow" in str(e)
        return
    assert np.isfinite(w).all() and np.isfinite(out).all()
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-5)


@given(problems(), st.randoms(use_true_random=False))
def test_permuting_keys_and_values_permutes_weights(problem, rnd):
    q, k, v = problem
    perm = np.array(rnd.sample(range(len(k)), len(k)))
    out, w = attention(q, k, v)
    out_p, w_p = attention(q, k[perm], v[perm])
    np.testing.assert_allclose(w_p, w[:, perm], **tolerance(q.dtype))
    np.testing.assert_allclose(out_p, out, **tolerance(q.dtype))


@given(problems(), st.randoms(use_true_random=False))
def test_permuting_queries_permutes_outputs(problem, rnd):
    q, k, v = problem
    perm = np.array(rnd.sample(range(len(q)), len(q)))
    out, w = attention(q, k, v)
    out_p, w_p = attention(q[perm], k, v)
    np.testing.assert_allclose(w_p, w[perm], **tolerance(q.dtype))
    np.testing.assert_allclose(out_p, out[perm], **tolerance(q.dtype))


@given(problems(dtypes=st.just(np.float64)), st.data())
def test_adding_a_constant_to_a_row_of_scores_changes_nothing(problem, data):
    q, k, v = problem
    # A shift of ±0.5 would make a mask cell 0 or 1; a mask of only 0s and 1s is
    # read as a 0/1 mask (may attend / may not), not added to the scores.
    shifts = data.draw(
        arrays(np.float64, (len(q), 1), elements=st.floats(-50, 50).filter(lambda s: s + 0.5 not in (0.0, 1.0)))
    )
    out, w = attention(q, k, v)
    out_s, w_s = attention(q, k, v, mask=np.broadcast_to(shifts, (len(q), len(k))) + 0.5)
    np.testing.assert_allclose(w_s, w, atol=1e-12)
    np.testing.assert_allclose(out_s, out, atol=1e-9)


@given(problems(), st.data())
def test_steps_are_consistent(problem, data):
    q, k, v = problem
    mask = data.draw(masks(len(q), len(k)))
    steps = attention_steps(q, k, v, mask=mask)
    np.testing.assert_allclose(steps.scores, q.astype(np.float64) @ k.T.astype(np.float64), **tolerance(q.dtype))
    assume(steps.allowed is None or steps.allowed.any(axis=1).all())
    np.testing.assert_allclose(steps.weights.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(steps.output, steps.weights @ v, **tolerance(q.dtype))
