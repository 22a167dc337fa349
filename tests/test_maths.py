"""The attention maths: the seeds' worked examples, properties, and an
independent float64 reference for scales, masks and causal alignment."""

import math

import numpy as np
import pytest

from attncli import attention, attention_steps, causal_mask, softmax
from attncli.errors import AttnError, ShapeError, UsageError

from reference import attention as reference

# Seed 003: RGB colours, warm or cool (the post's code: Q = #8517dc).
RGB_Q = np.array([[133, 23, 220]]) / 255.0
RGB_K = (
    np.array(
        [
            [254, 240, 217],
            [253, 204, 138],
            [252, 141, 89],
            [215, 48, 31],
            [246, 239, 247],
            [189, 201, 225],
            [103, 169, 207],
            [2, 129, 138],
        ]
    )
    / 255.0
)
RGB_V = np.array([[1, 0]] * 4 + [[0, 1]] * 4, dtype=float)


def test_softmax_of_seed_000():
    assert np.round(softmax(np.array([4.0, -1.0, 2.1])), 4).tolist() == [0.8648, 0.0058, 0.1294]


def test_softmax_is_stable_for_large_scores():
    # seed 000: softmax([30, 20, 10]) = [9.99954600e-01, 4.53978686e-05, 2.06106005e-09]
    w = softmax(np.array([30.0, 20.0, 10.0]) * 100)
    assert np.isfinite(w).all() and w[0] == 1.0
    np.testing.assert_allclose(
        softmax(np.array([30.0, 20.0, 10.0])), [9.99954600e-01, 4.53978686e-05, 2.06106005e-09], rtol=1e-6
    )


def test_seed_003_colours():
    out, w = attention(RGB_Q, RGB_K, RGB_V)
    assert np.round(w, 3).tolist() == [[0.150, 0.128, 0.114, 0.096, 0.158, 0.140, 0.121, 0.093]]
    assert np.round(out, 3).tolist() == [[0.488, 0.512]]


def test_seed_000_footnote_scores():
    q = np.array([[2.0, 1.0, 3.0]])
    k = np.array([[-1, 2, -1], [1.5, 0, -1], [4, -2, -1]])
    steps = attention_steps(q, k, np.eye(3))
    assert steps.scores.tolist() == [[-3.0, 0.0, 3.0]]
    assert steps.scale == pytest.approx(1 / math.sqrt(3))


def test_single_query_and_scalar_values_as_in_seed_000():
    q = np.array([2.0, 1.0, 3.0])
    k = np.array([[-1, 2, -1], [1.5, 0, -1], [4, -2, -1]])
    out, w = attention(q, k, np.array([10.0, 5.0, 2.0]), scale=1.0)
    expected = softmax(np.array([-3.0, 0.0, 3.0]))
    np.testing.assert_allclose(w, expected)
    assert out == pytest.approx(expected @ [10, 5, 2])


@pytest.fixture
def qkv():
    rng = np.random.default_rng(7)
    return rng.normal(size=(5, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))


def test_rows_sum_to_one_and_weights_in_range(qkv):
    _, w = attention(*qkv)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert ((w >= 0) & (w <= 1)).all()


def test_permuting_keys_and_values_permutes_weights_only(qkv):
    q, k, v = qkv
    perm = np.array([3, 0, 5, 1, 4, 2])
    out, w = attention(q, k, v)
    out_p, w_p = attention(q, k[perm], v[perm])
    np.testing.assert_allclose(w_p, w[:, perm])
    np.testing.assert_allclose(out_p, out)


def test_permuting_queries_permutes_outputs(qkv):
    q, k, v = qkv
    perm = np.array([4, 2, 0, 1, 3])
    out, w = attention(q, k, v)
    out_p, w_p = attention(q[perm], k, v)
    np.testing.assert_allclose(out_p, out[perm])
    np.testing.assert_allclose(w_p, w[perm])


def test_adding_a_constant_to_every_score_changes_nothing(qkv):
    q, k, v = qkv
    out, w = attention(q, k, v)
    out_c, w_c = attention(q, k, v, mask=np.full((5, 6), 123.25))  # additive: every score + c
    np.testing.assert_allclose(w_c, w)
    np.testing.assert_allclose(out_c, out)


@pytest.mark.parametrize("scale", [None, 0.5, 3.0])
def test_matches_reference_for_scales(qkv, scale):
    out, w = attention(*qkv, scale=scale)
    ref_out, ref_w = reference(*qkv, scale=scale)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)


def test_temperature_divides_the_scaled_scores(qkv):
    out, w = attention(*qkv, scale=0.5, temperature=4.0)
    ref_out, ref_w = reference(*qkv, scale=0.125)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)


def test_boolean_and_01_masks_match_reference(qkv):
    allowed = np.random.default_rng(1).random((5, 6)) > 0.4
    allowed[:, 0] = True
    ref_out, ref_w = reference(*qkv, allowed=allowed)
    for mask in (allowed, allowed.astype(float)):
        out, w = attention(*qkv, mask=mask)
        np.testing.assert_allclose(w, ref_w, atol=1e-12)
        np.testing.assert_allclose(out, ref_out, atol=1e-12)


def test_additive_mask_with_minus_infinity(qkv):
    bias = np.random.default_rng(2).normal(size=(5, 6))
    bias[1, 2] = -np.inf
    allowed = np.isfinite(bias)
    out, w = attention(*qkv, mask=bias)
    ref_out, ref_w = reference(*qkv, allowed=allowed, bias=np.where(allowed, bias, 0))
    assert w[1, 2] == 0
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)


def test_one_mask_row_applies_to_every_query(qkv):
    row = np.array([[1, 1, 0, 1, 0, 1]], dtype=bool)
    _, w = attention(*qkv, mask=row)
    assert (w[:, [2, 4]] == 0).all()


def test_fully_masked_row_gives_zero_weights_and_output(qkv):
    mask = np.ones((5, 6), dtype=bool)
    mask[3] = False
    out, w = attention(*qkv, mask=mask)
    assert (w[3] == 0).all() and (out[3] == 0).all()
    assert not np.isnan(out).any()
    np.testing.assert_allclose(np.delete(w, 3, axis=0).sum(axis=1), 1.0)


def test_causal_top_left_and_bottom_right():
    assert causal_mask(2, 4).astype(int).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0]]
    assert causal_mask(2, 4, "bottom-right").astype(int).tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert causal_mask(4, 2, "bottom-right").astype(int).tolist() == [[0, 0], [0, 0], [1, 0], [1, 1]]


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_causal_attention_matches_reference(qkv, align):
    q, k, v = qkv
    out, w = attention(q, k, v, causal=True if align == "top-left" else align)
    ref_out, ref_w = reference(q, k, v, allowed=causal_mask(5, 6, align))
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)


def test_causal_and_mask_combine(qkv):
    mask = np.ones((5, 6), dtype=bool)
    mask[:, 0] = False
    _, w = attention(*qkv, mask=mask, causal=True)
    assert (w[0] == 0).all()  # query 0 could only see key 0, which the mask forbids
    assert (w[:, 0] == 0).all()


def test_cosine_similarity_ignores_length():
    # seed 000's footnote: a=[1,1,1] points the same way as b=[1000,0,0]? No: as c=[2,2,2].
    q = np.array([[1.0, 1.0, 1.0]])
    k = np.array([[1000.0, 0, 0], [2.0, 2.0, 2.0]])
    steps = attention_steps(q, k, np.eye(2), similarity="cosine")
    np.testing.assert_allclose(steps.scores, [[1 / math.sqrt(3), 1.0]])
    assert steps.scale == 1.0
    dot = attention_steps(q, k, np.eye(2))
    assert dot.weights[0, 0] > dot.weights[0, 1]
    assert steps.weights[0, 1] > steps.weights[0, 0]


def test_cosine_with_a_zero_row_scores_zero():
    steps = attention_steps(np.zeros((1, 2)), np.ones((2, 2)), np.eye(2), similarity="cosine")
    assert steps.scores.tolist() == [[0.0, 0.0]]


def test_float32_stays_float32():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(4, 8)).astype(np.float32) for _ in range(3))
    out, w = attention(q, k, v, causal=True, mask=np.ones((4, 4)), temperature=2.0)
    assert out.dtype == np.float32 and w.dtype == np.float32
    ref_out, _ = reference(q, k, v, scale=1 / math.sqrt(8) / 2, allowed=causal_mask(4, 4))
    np.testing.assert_allclose(out, ref_out, atol=1e-5, rtol=1.3e-6)


def test_mixed_precision_promotes_to_float64():
    out, _ = attention(np.ones((1, 2), np.float32), np.ones((2, 2)), np.ones((2, 2), np.float32))
    assert out.dtype == np.float64


def test_need_weights_false_returns_none(qkv):
    out, w = attention(*qkv, need_weights=False)
    assert w is None
    np.testing.assert_allclose(out, attention(*qkv)[0])


def test_batched_inputs_broadcast():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    out, w = attention(q, k, v, causal=True)
    for b in range(2):
        ref_out, ref_w = reference(q[b], k[b], v[b], allowed=causal_mask(3, 5))
        np.testing.assert_allclose(out[b], ref_out, atol=1e-12)
        np.testing.assert_allclose(w[b], ref_w, atol=1e-12)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((1, 3), (8, 4), (8, 2)), "Q is 1×3 but K is 8×4 (Q and K need the same number of columns, d_k)"),
        (((1, 3), (8, 3), (7, 2)), "K is 8×3 but V is 7×2 (K and V need the same number of rows: one value per key)"),
    ],
)
def test_shape_errors_name_both_shapes(shapes, message):
    q, k, v = (np.ones(s) for s in shapes)
    with pytest.raises(ShapeError) as e:
        attention(q, k, v)
    assert str(e.value) == message


def test_wrong_mask_shape():
    with pytest.raises(ShapeError) as e:
        attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 1)), mask=np.ones((3, 4), dtype=bool))
    assert str(e.value) == (
        "the mask is 3×4 but the weights are 2×4 (queries × keys) (give a 2×4 mask, or 1×4 for every query)"
    )


@pytest.mark.parametrize("option", ["scale", "temperature"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_scale_or_temperature(option, value):
    with pytest.raises(UsageError, match=f"{option} must be a positive finite number"):
        attention(np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 2)), **{option: value})


def test_mask_with_nan_is_refused():
    with pytest.raises(AttnError, match="a mask may hold -inf but not NaN or \\+inf"):
        attention(np.ones((1, 2)), np.ones((2, 2)), np.ones((2, 2)), mask=np.array([[0.5, np.nan]]))


def test_overflowing_scores_are_an_error_not_nan():
    big = np.full((1, 2), 1e30, dtype=np.float32)
    with pytest.raises(AttnError, match="attention scores overflow"):
        attention(big, big, np.ones((1, 2), np.float32))
