"""Modern attention in the core: tensors [batch, heads, n, d], grouped-query
heads, windows, soft-cap, ALiBi, RoPE and sinks, each alone and together,
in the reference and the blocked kernel, against ``tests/reference.py``
(one query at a time, sharing no code with ``attncli.core``)."""

import math

import numpy as np
import pytest

from attncli import AttentionOptions, attention, attention_steps
from attncli.core.api import attention_blocked
from attncli.core.options import Rope
from attncli.core.positions import alibi_slopes
from attncli.errors import AttnError, ShapeError, UsageError

import reference
from reference import heads_attention

B, H_Q, H_KV, N_Q, N_K, D, D_V = 2, 4, 2, 5, 7, 8, 3


def tensors(h_q=H_Q, h_kv=H_KV, n_q=N_Q, n_k=N_K, d=D, d_v=D_V, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((B, h_q, n_q, d)).astype(dtype),
        rng.standard_normal((B, h_kv, n_k, d)).astype(dtype),
        rng.standard_normal((B, h_kv, n_k, d_v)).astype(dtype),
    )


SINKS = np.array([0.5, -1.0, 2.0, 0.0])
SLOPES = np.array([0.5, 0.25, 0.3, 1.5])

# (name, core options, the test reference's settings)
CASES = [
    ("plain", {}, {}),
    ("window 2,0", dict(window=(2, 0)), dict(window=(2, 0))),
    ("window 1,2", dict(window=(1, 2)), dict(window=(1, 2))),
    ("window -1,1", dict(window=(-1, 1)), dict(window=(-1, 1))),
    ("window 0,-1", dict(window=(0, -1)), dict(window=(0, -1))),
    ("window 0,0", dict(window=(0, 0)), dict(window=(0, 0))),
    ("softcap", dict(softcap=0.7), dict(softcap=0.7)),
    ("alibi", dict(alibi=True), dict(slopes=alibi_slopes(H_Q))),
    ("alibi slopes", dict(alibi_slopes=SLOPES), dict(slopes=SLOPES)),
    ("rope neox", dict(rope=Rope("neox")), dict(rope=("neox", 10000.0, None, None))),
    ("rope gptj", dict(rope=Rope("gptj")), dict(rope=("gptj", 10000.0, None, None))),
    ("rope neox dim 4 theta 500", dict(rope=Rope("neox", 500.0, 4)), dict(rope=("neox", 500.0, 4, None))),
    ("rope gptj dim 6 offset 3", dict(rope=Rope("gptj", dim=6, offset=3)), dict(rope=("gptj", 10000.0, 6, 3))),
    ("sinks", dict(sinks=SINKS), dict(sinks=SINKS)),
    ("causal top-left", dict(causal="top-left"), dict(causal="top-left")),
    (
        "everything",
        dict(
            causal="bottom-right",
            window=(3, 0),
            softcap=1.5,
            alibi=True,
            rope=Rope("gptj", dim=4),
            sinks=SINKS,
            temperature=1.3,
        ),
        dict(
            causal="bottom-right",
            window=(3, 0),
            softcap=1.5,
            slopes=alibi_slopes(H_Q),
            rope=("gptj", 10000.0, 4, None),
            sinks=SINKS,
            temperature=1.3,
        ),
    ),
]


@pytest.mark.parametrize("h_kv", [H_Q, H_KV, 1])
@pytest.mark.parametrize("name, options, settings", CASES, ids=[c[0] for c in CASES])
def test_every_variant_matches_the_loop(name, options, settings, h_kv):
    q, k, v = tensors(h_kv=h_kv)
    expected_out, expected_weights = heads_attention(q, k, v, **settings)
    steps = attention_steps(q, k, v, AttentionOptions(**options))
    assert steps.weights.shape == (B, H_Q, N_Q, N_K) and steps.output.shape == (B, H_Q, N_Q, D_V)
    np.testing.assert_allclose(steps.weights, expected_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(steps.output, expected_out, rtol=0, atol=1e-12)
    for key_block in (2, 3, N_K):
        out = attention_blocked(q, k, v, AttentionOptions(**options), query_block=2, key_block=key_block, workers=1)
        np.testing.assert_allclose(out, expected_out, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name, options, settings", CASES, ids=[c[0] for c in CASES])
def test_the_kernels_plain_online_softmax_alone_matches_the_loop(monkeypatch, name, options, settings, dtype):
    """The blocked kernel with every tuned choice turned off (the running max
    always, no window stacks): the plain algorithm gives every variant."""
    from attncli.core import blocking, kernel

    monkeypatch.setattr(kernel, "_choose", lambda p: kernel.Softmax.RUNNING_MAX)
    monkeypatch.setattr(blocking, "stack_band", lambda *args: None)
    q, k, v = tensors(h_kv=H_KV, dtype=dtype)
    expected, _ = heads_attention(q, k, v, **settings)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for key_block in (2, 3, N_K):
        out = attention_blocked(q, k, v, AttentionOptions(**options), query_block=2, key_block=key_block, workers=2)
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("name, options, settings", CASES, ids=[c[0] for c in CASES])
def test_float32_stays_float32_within_pytorch_tolerance(name, options, settings):
    q, k, v = tensors(dtype=np.float32)
    expected, _ = heads_attention(q, k, v, **settings)
    for implementation in ("reference", "blocked"):
        out, _ = attention(q, k, v, AttentionOptions(**options), implementation=implementation)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, expected, rtol=1.3e-6, atol=1e-5)  # torch.testing's float32 tolerance


def test_one_shape_for_n_q_different_from_n_k():
    for n_q, n_k in ((1, 9), (9, 4), (6, 6)):
        q, k, v = tensors(n_q=n_q, n_k=n_k)
        settings = dict(window=(2, 1), causal="bottom-right", softcap=2.0)
        expected, _ = heads_attention(q, k, v, slopes=SLOPES, rope=("neox", 10000.0, None, 2), **settings)
        out, _ = attention(q, k, v, AttentionOptions(alibi_slopes=SLOPES, rope=Rope(offset=2), **settings))
        np.testing.assert_allclose(out, expected, atol=1e-12)


# ---------------------------------------------------------------- grouped-query attention


def test_gqa_is_repeating_each_kv_head_for_its_group():
    q, k, v = tensors(h_q=6, h_kv=2)
    grouped, _ = attention(q, k, v)
    repeated, _ = attention(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1))  # torch.repeat_interleave
    np.testing.assert_allclose(grouped, repeated, atol=1e-15)


def test_gqa_with_mask_and_bias_per_query_head():
    q, k, v = tensors()
    rng = np.random.default_rng(3)
    allowed = rng.random((B, H_Q, N_Q, N_K)) < 0.7
    bias = rng.standard_normal((1, H_Q, N_Q, N_K))
    expected, weights = heads_attention(q, k, v, allowed=allowed, bias=np.broadcast_to(bias, allowed.shape))
    steps = attention_steps(q, k, v, AttentionOptions(mask=allowed, bias=bias))
    np.testing.assert_allclose(steps.output, expected, atol=1e-12)
    np.testing.assert_allclose(steps.weights, weights, atol=1e-12)
    assert steps.allowed.shape == (B, H_Q, N_Q, N_K)
    out = attention_blocked(q, k, v, AttentionOptions(mask=allowed, bias=bias), key_block=3)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_leading_axes_broadcast_as_in_pytorch():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 1, 4, 5, 8))
    k, v = rng.standard_normal((3, 2, 6, 8)), rng.standard_normal((1, 6, 3))
    out, weights = attention(q, k, v)
    assert out.shape == (2, 3, 4, 5, 3) and weights.shape == (2, 3, 4, 5, 6)
    expected, _ = heads_attention(
        np.broadcast_to(q, (2, 3, 4, 5, 8)).reshape(6, 4, 5, 8),
        np.broadcast_to(k[None], (2, 3, 2, 6, 8)).reshape(6, 2, 6, 8),
        np.broadcast_to(v, (2, 3, 2, 6, 3)).reshape(6, 2, 6, 3),
    )
    np.testing.assert_allclose(out.reshape(6, 4, 5, 3), expected, atol=1e-12)


@pytest.mark.parametrize("k_heads, v_heads", [(1, 2), (2, 1)])
def test_k_shared_by_v_heads_or_v_by_k_heads_with_per_head_variants(k_heads, v_heads):
    """K [1, 1, n, d] with V [1, 2, n, d] (or the other way) broadcast as PyTorch does; per-head
    ALiBi and sinks then meet two heads of logits (this was exit 70: an in-place add of the wrong shape)."""
    from attncli.core.grad import attention_grad

    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 1, 3, 4))
    k, v = rng.standard_normal((1, k_heads, 5, 4)), rng.standard_normal((1, v_heads, 5, 4))
    dout = rng.standard_normal((1, 2, 3, 4))
    options = AttentionOptions(alibi=True, sinks=np.array([0.5, -1.0]), causal="bottom-right")
    whole = [np.broadcast_to(m, (1, 2) + m.shape[-2:]).copy() for m in (q, k, v)]
    expected = attention(*whole, options, need_weights=False)[0]
    for implementation in ("reference", "blocked"):
        got = attention(q, k, v, options, implementation=implementation, need_weights=False)[0]
        np.testing.assert_allclose(got, expected, atol=1e-13)
    grads, grads_whole = attention_grad(q, k, v, dout, options), attention_grad(*whole, dout, options)
    for got, want in ((grads.dq, grads_whole.dq), (grads.dk, grads_whole.dk), (grads.dv, grads_whole.dv)):
        np.testing.assert_allclose(got, want.sum(axis=1, keepdims=True) if got.shape[1] == 1 else want, atol=1e-13)


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape, message",
    [
        (
            (1, 6, 3, 4),
            (1, 4, 5, 4),
            (1, 4, 5, 2),
            "Q has 6 heads but K and V have 4 (for grouped-query attention the K/V heads must divide the query heads)",
        ),
        (
            (2, 4, 3, 4),
            (3, 2, 5, 4),
            (3, 2, 5, 2),
            "Q is 2×4×3×4 but K is 3×2×5×4 (their leading axes [batch, heads] must be equal or 1)",
        ),
        (
            (1, 4, 3, 4),
            (1, 2, 5, 4),
            (1, 4, 5, 2),
            "K is 1×2×5×4 but V is 1×4×5×2 (K and V need the same batch and head axes)",
        ),
    ],
)
def test_heads_that_do_not_fit(q_shape, k_shape, v_shape, message):
    with pytest.raises(ShapeError) as e:
        attention(np.ones(q_shape), np.ones(k_shape), np.ones(v_shape))
    assert str(e.value) == message


# ---------------------------------------------------------------- each variant's definition


def test_alibi_slopes_of_press_et_al():
    assert alibi_slopes(8).tolist() == [1 / 2 ** (h + 1) for h in range(8)]  # 2^(−8(h+1)/8)
    for n in (1, 2, 3, 5, 6, 12, 16, 40):
        np.testing.assert_allclose(alibi_slopes(n), reference.alibi_slopes(n), rtol=1e-14)  # their product rounds
    # 12 heads: the 8 of 8, then every other of the 16 of 16 (BLOOM, MPT)
    np.testing.assert_allclose(alibi_slopes(12)[8:], [2 ** (-0.5 * k) for k in (1, 3, 5, 7)])


def test_window_counts_as_flash_attention_says():
    """Query i sees keys i + n_k − n_q − left .. i + n_k − n_q + right: left + right + 1
    keys away from the edges. FlashAttention's construct_local_mask, written its way."""
    n_q, n_k = 6, 9
    for left, right in ((2, 0), (0, 0), (3, 1), (-1, 0), (1, -1)):
        steps = attention_steps(np.ones((n_q, 4)), np.ones((n_k, 4)), np.ones((n_k, 1)), window=(left, right))
        row, col = np.arange(n_q)[:, None], np.arange(n_k)
        if left < 0:
            masked = col > row + n_k - n_q + right
        elif right < 0:
            masked = col < row + n_k - n_q - left
        else:
            masked = (col > np.minimum(row + n_k - n_q + right, n_k)) | (col < row + n_k - n_q - left)
        np.testing.assert_array_equal(steps.allowed, ~masked)
    steps = attention_steps(np.ones((20, 2)), np.ones((20, 2)), np.ones((20, 1)), window=(3, 0))
    assert steps.allowed.sum(axis=1).tolist() == [1, 2, 3] + [4] * 17  # sliding window W = 4 sees 4 keys


def test_softcap_bounds_the_logits_before_the_bias():
    q, k, v = tensors()
    steps = attention_steps(q * 10, k, v, softcap=2.0, bias=np.full((1, N_K), 5.0))
    assert np.abs(steps.logits - 5.0).max() <= 2.0
    scaled = steps.scores * steps.scale
    np.testing.assert_allclose(steps.logits, 2.0 * np.tanh(scaled / 2.0) + 5.0, atol=1e-13)


def test_sinks_take_a_share_of_each_row():
    q, k, v = tensors()
    plain = attention_steps(q, k, v)
    sunk = attention_steps(q, k, v, sinks=SINKS)
    sums = sunk.weights.sum(axis=-1)  # [B, H, n_q]
    assert (sums < 1).all()
    # the sink's share: e^s / (Σ e^logits + e^s); the keys keep their proportions
    total = np.exp(plain.logits).sum(axis=-1)
    np.testing.assert_allclose(sums, total / (total + np.exp(SINKS)[None, :, None]), atol=1e-14)
    np.testing.assert_allclose(sunk.weights / sums[..., None], plain.weights, atol=1e-14)


def test_a_query_that_sees_nothing_gets_zeros_with_sinks_too():
    q, k, v = tensors(n_q=3, n_k=3)
    mask = np.array([[False, False, False], [True, True, False], [True, True, True]])
    for implementation in ("reference", "blocked"):
        out, _ = attention(q, k, v, AttentionOptions(mask=mask, sinks=SINKS), implementation=implementation)
        assert (out[..., 0, :] == 0).all() and np.isfinite(out).all()


def test_rope_keeps_lengths_and_depends_on_relative_positions_only():
    from attncli.core.positions import rotate

    x = np.random.default_rng(0).standard_normal((5, 8))
    for style in ("neox", "gptj"):
        rope = Rope(style)
        turned = rotate(x, np.arange(5) * 7.0, rope)
        np.testing.assert_allclose(np.linalg.norm(turned, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-14)
        # q_m · k_n depends on m − n only: moving every position on by 11 changes nothing
        near = rotate(x[:1], np.array([3.0]), rope) @ rotate(x[1:], np.arange(4.0), rope).T
        far = rotate(x[:1], np.array([14.0]), rope) @ rotate(x[1:], np.arange(4.0) + 11, rope).T
        np.testing.assert_allclose(near, far, atol=1e-12)


def test_neox_and_gptj_differ_unless_pairs_coincide():
    q, k, v = tensors()
    neox, _ = attention(q, k, v, rope="neox")
    gptj, _ = attention(q, k, v, rope="gptj")
    assert np.abs(neox - gptj).max() > 1e-2
    # with d = 2 the one pair is the same in both conventions
    q2, k2, v2 = tensors(d=2)
    np.testing.assert_allclose(attention(q2, k2, v2, rope="neox")[0], attention(q2, k2, v2, rope="gptj")[0], atol=1e-15)


# ---------------------------------------------------------------- dtypes


def test_float16_and_bfloat16_compute_in_float32():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, v = tensors()
    for dtype in (np.float16, ml_dtypes.bfloat16):
        low = [m.astype(dtype) for m in (q, k, v)]
        out, weights = attention(*low, window=(2, 0), sinks=SINKS)
        assert out.dtype == np.float32 and weights.dtype == np.float32
        expected, _ = heads_attention(*(m.astype(np.float64) for m in low), window=(2, 0), sinks=SINKS)
        np.testing.assert_allclose(out, expected, rtol=1.3e-6, atol=1e-5)


# ---------------------------------------------------------------- bad settings


@pytest.mark.parametrize(
    "settings, error, message",
    [
        (dict(window=(-2, 0)), UsageError, "the window's left side must be a whole number ≥ -1, got -2"),
        (dict(window=(1.5, 0)), UsageError, "the window's left side must be a whole number ≥ -1, got 1.5"),
        (dict(window=3), UsageError, "a window is (left, right), got 3"),
        (dict(softcap=0.0), UsageError, "softcap must be a positive finite number, got 0.0"),
        (dict(sinks=np.array([np.nan])), AttnError, "sinks must be finite numbers"),
    ],
)
def test_bad_variant_settings(settings, error, message):
    with pytest.raises(error) as e:
        AttentionOptions(**settings)
    assert str(e.value).startswith(message)


def test_unknown_rope_style_and_keyword():
    with pytest.raises(UsageError, match="unknown rope style 'llama'"):
        Rope("llama")
    with pytest.raises(UsageError, match="rope dim must be a positive even number, got 3"):
        Rope("neox", dim=3)
    with pytest.raises(UsageError, match="unknown attention keyword 'sliding_window'"):
        attention(*tensors(), sliding_window=4)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(sinks=np.ones(3)), "sinks: 3 given for 4 query heads (give one per query head, or one for all)"),
        (dict(alibi_slopes=np.ones(2)), "ALiBi slopes: 2 given for 4 query heads"),
        (dict(rope=Rope(dim=10)), "rope dim is 10 but Q and K have d_k = 8 (rotate at most every feature of a head)"),
    ],
)
def test_settings_that_do_not_fit_the_shapes(settings, message):
    with pytest.raises(ShapeError) as e:
        attention(*tensors(), **settings)
    assert str(e.value).startswith(message)


def test_odd_d_k_needs_a_rope_dim():
    q, k, v = tensors(d=5)
    with pytest.raises(ShapeError, match="RoPE rotates features in pairs, but d_k = 5 is odd"):
        attention(q, k, v, rope="neox")
    out, _ = attention(q, k, v, rope=Rope(dim=4))
    expected, _ = heads_attention(q, k, v, rope=("neox", 10000.0, 4, None))
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_one_sink_and_one_slope_for_a_plain_matrix():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    out, _ = attention(q, k, v, sinks=np.array([0.3]), alibi=True)
    expected, _ = reference.attention(q, k, v, sink=0.3, slope=2.0**-8)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    assert math.isclose(alibi_slopes(1)[0], 2.0**-8)
