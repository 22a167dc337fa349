"""RoPE scaling (``Rope(scaling=RopeScaling(...))``) and rotary features at the
end of a head (``Rope(features="last")``), against Hugging Face transformers.

``tests/data/rope_refs.npz`` (``scripts/make_rope_refs.py``) holds, for each
case and sequence length L, transformers' ``ROPE_INIT_FUNCTIONS`` output and
its models' rotary modules applied to a small Q and K. Tolerances:

- inverse frequencies against transformers' formula run in float64: 1e-12
  relative (measured: 3.3e-16); against transformers as it runs, in float32:
  1e-6 relative (measured: 3.3e-7, Llama 3.1): float32 rounds the exponent
  2i/dim to 2⁻²⁴ of itself, and the power multiplies that by ln θ (13 for
  θ = 500000);
- the attention factor: 1e-15 relative (both are Python floats; measured 0);
- rotated Q and K against the float64 run: 4 · L · 2⁻⁵³ · max|x| · max(1, a),
  the float64 rounding of angles up to L radians (measured: 3.2e-12 at
  L = 40000); against transformers as it runs: L · (δ + 2⁻²⁴) · 2 · max|x|
  · max(1, a), its float32 angles, with δ the case's measured relative
  difference of the float32 frequencies (measured: up to 3.4e-3 at L = 40000).

When transformers and torch are importable, the pins are also compared with
what they compute now. Attention and its gradient are checked against an
independent float64 computation written here (rotation matrices built from
the pinned frequencies, then ``tests/reference.py``).
"""

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from attncli import AttentionOptions, Rope, RopeScaling, attention, attention_grad, attention_steps
from attncli.core.positions import rope_frequencies, rotate, rotate_back
from attncli.errors import ShapeError, UsageError

from reference import attention as reference_attention

ROOT = Path(__file__).resolve().parent.parent
PINNED = np.load(ROOT / "tests" / "data" / "rope_refs.npz")


def _script():
    spec = importlib.util.spec_from_file_location("make_rope_refs", ROOT / "scripts" / "make_rope_refs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # imports numpy only; torch and transformers are imported where used
    return module


REFS = _script()
CASES = REFS.CASES
AT = [(name, length) for name, case in CASES.items() for length in case.lengths]
IDS = [f"{name}@{length}" for name, length in AT]


def rope_of(case, offset=None) -> Rope:
    """attn's spelling of the case."""
    return Rope(case.style, case.theta, case.rope_dim, offset, RopeScaling(REFS.kind(case), **case.attn), case.features)


def pinned(name, length, what):
    return PINNED[f"{name}@{length}.{what}"]


def test_every_case_is_pinned():
    keys = {key.rsplit(".", 1)[0] for key in PINNED.files if "." in key}
    assert keys == set(CASES) | set(IDS)
    assert str(PINNED["transformers_version"]) and str(PINNED["torch_version"]).startswith("2.")


def test_the_cases_cover_every_kind_and_both_sides_of_the_lengths():
    assert {REFS.kind(case) for case in CASES.values()} == {"linear", "dynamic", "llama3", "yarn", "longrope"}
    for name in ("dynamic", "phi-3.5 longrope", "longrope partial"):
        original = CASES[name].attn["original_max_position_embeddings"]
        assert min(CASES[name].lengths) <= original < max(CASES[name].lengths)
    assert CASES["gpt-oss"].attn["truncate"] is False
    assert {"mscale", "mscale_all_dim"} <= set(CASES["deepseek-v3"].attn)


@pytest.mark.parametrize(("name", "length"), AT, ids=IDS)
def test_frequencies_are_transformers_formulas(name, length):
    case = CASES[name]
    inv_freq, factor = rope_frequencies(rope_of(case), case.rope_dim, length)
    np.testing.assert_allclose(inv_freq, pinned(name, length, "inv_freq64"), rtol=1e-12, atol=0)
    np.testing.assert_allclose(factor, float(pinned(name, length, "attention_factor")), rtol=1e-15, atol=0)


@pytest.mark.parametrize(("name", "length"), AT, ids=IDS)
def test_frequencies_within_float32_of_transformers_as_it_runs(name, length):
    case = CASES[name]
    inv_freq, _ = rope_frequencies(rope_of(case), case.rope_dim, length)
    np.testing.assert_allclose(inv_freq, pinned(name, length, "inv_freq32"), rtol=1e-6, atol=0)


def _rotated(name, length):
    """attn's Q and K rotated, keys at 0..2 and queries at L − 3..L − 1, through the Python API."""
    q, k = PINNED[f"{name}.q"], PINNED[f"{name}.k"]
    steps = attention_steps(q, k, k, rope=rope_of(CASES[name], offset=length - REFS.TOKENS))
    return (q, k), steps.rotated


@pytest.mark.parametrize(("name", "length"), AT, ids=IDS)
def test_rotated_q_and_k_are_transformers_in_float64(name, length):
    (q, k), (q_rot, k_rot) = _rotated(name, length)
    factor = max(1.0, float(pinned(name, length, "attention_factor")))
    atol = 4 * length * 2.0**-53 * max(np.abs(q).max(), np.abs(k).max()) * factor
    np.testing.assert_allclose(q_rot, pinned(name, length, "q_rot64"), rtol=0, atol=atol)
    np.testing.assert_allclose(k_rot, pinned(name, length, "k_rot64"), rtol=0, atol=atol)


@pytest.mark.parametrize(("name", "length"), AT, ids=IDS)
def test_rotated_q_and_k_within_transformers_float32_angles(name, length):
    (q, k), (q_rot, k_rot) = _rotated(name, length)
    factor = max(1.0, float(pinned(name, length, "attention_factor")))
    inv64, inv32 = pinned(name, length, "inv_freq64"), pinned(name, length, "inv_freq32")
    delta = float(np.abs(inv32 / inv64 - 1).max())
    atol = length * (delta + 2.0**-24) * 2 * max(np.abs(q).max(), np.abs(k).max()) * factor
    np.testing.assert_allclose(q_rot, pinned(name, length, "q_rot32"), rtol=0, atol=atol)
    np.testing.assert_allclose(k_rot, pinned(name, length, "k_rot32"), rtol=0, atol=atol)


@pytest.mark.parametrize(("name", "length"), AT, ids=IDS)
def test_the_pins_are_what_transformers_computes_now(name, length):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    case = CASES[name]
    for bits, float64 in ((32, False), (64, True)):
        inv_freq, factor = REFS.frequencies(case, length, float64)
        np.testing.assert_array_equal(inv_freq, pinned(name, length, f"inv_freq{bits}"))
        assert factor == float(pinned(name, length, "attention_factor"))
        q_rot, k_rot = REFS.rotated(case, length, PINNED[f"{name}.q"], PINNED[f"{name}.k"], float64)
        np.testing.assert_allclose(q_rot, pinned(name, length, f"q_rot{bits}"), rtol=0, atol=1e-14)
        np.testing.assert_allclose(k_rot, pinned(name, length, f"k_rot{bits}"), rtol=0, atol=1e-14)
    (_, _), (q_rot, k_rot) = _rotated(name, length)
    q_hf, k_hf = REFS.rotated(case, length, PINNED[f"{name}.q"], PINNED[f"{name}.k"], True)
    np.testing.assert_allclose(q_rot, q_hf, rtol=0, atol=1e-10)
    np.testing.assert_allclose(k_rot, k_hf, rtol=0, atol=1e-10)


# The independent computation: each position's rotation as a d × d matrix.


def rotation(positions, inv_freq, factor, style, features, d):
    """[n, d, d] a · R(position · inv_freq) acting on a row's features, written
    out pair by pair from the pinned frequencies (no code shared with attncli)."""
    dim = 2 * len(inv_freq)
    start = 0 if features == "first" else d - dim
    out = np.zeros((len(positions), d, d))
    for n, position in enumerate(positions):
        out[n] = np.eye(d)
        for i, w in enumerate(inv_freq):
            a, b = (start + i, start + i + dim // 2) if style == "neox" else (start + 2 * i, start + 2 * i + 1)
            c, s = math.cos(position * w), math.sin(position * w)
            out[n][a, a], out[n][a, b], out[n][b, a], out[n][b, b] = factor * c, -factor * s, factor * s, factor * c
    return out  # x_rot = out[n] @ x


def turn(x, matrices):
    """[..., n, d] each row n turned by its matrix: [n, d, d] -> [..., n, d]."""
    return np.einsum("nij,...nj->...ni", matrices, x)


def float64_atol(name, *arrays):
    """4 · L · 2⁻⁵³ · max|x| · max(1, a): the float64 rounding of angles up to L
    radians (L the case's longest length), on numbers up to max|x| (at least 1)."""
    length = max(CASES[name].lengths)
    factor = max(1.0, float(pinned(name, length, "attention_factor")))
    return 4 * length * 2.0**-53 * max(1.0, *(float(np.abs(a).max()) for a in arrays)) * factor


def problem(name, n_q=3, n_k=5, heads=2, seed=0):
    """q, k, v, dO for a case, the queries at its longest length: L − n_q .. L − 1."""
    case, length = CASES[name], max(CASES[name].lengths)
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((heads, n_q, case.head_dim)), rng.standard_normal((heads, n_k, case.head_dim))
    v, dout = rng.standard_normal((heads, n_k, 4)), rng.standard_normal((heads, n_q, 4))
    inv_freq, factor = pinned(name, length, "inv_freq64"), float(pinned(name, length, "attention_factor"))
    turn_q = rotation(np.arange(length - n_q, length), inv_freq, factor, case.style, case.features, case.head_dim)
    turn_k = rotation(np.arange(n_k), inv_freq, factor, case.style, case.features, case.head_dim)
    return (q, k, v, dout), (turn_q, turn_k), rope_of(case, offset=length - n_q)


@pytest.mark.parametrize("causal", [None, "bottom-right"])
@pytest.mark.parametrize("implementation", ["reference", "blocked"])
@pytest.mark.parametrize("name", list(CASES))
def test_attention_against_independent_float64(name, implementation, causal):
    (q, k, v, _), (turn_q, turn_k), rope = problem(name)
    out, _ = attention(q, k, v, AttentionOptions(rope=rope, causal=causal), implementation=implementation)
    q_rot, k_rot = turn(q, turn_q), turn(k, turn_k)
    for h in range(q.shape[0]):
        want, _ = reference_attention(q_rot[h], k_rot[h], v[h], causal=causal)
        np.testing.assert_allclose(out[h], want, rtol=0, atol=float64_atol(name, q, k, v))


def _independent_grads(q, k, v, dout, turn_q, turn_k, causal):
    """dQ, dK, dV: attention's gradient at the rotated Q and K (no RoPE), taken back
    through x_rot = M x by Mᵀ."""
    grads = attention_grad(turn(q, turn_q), turn(k, turn_k), v, dout, AttentionOptions(causal=causal))
    back = np.swapaxes
    return turn(grads.dq, back(turn_q, -1, -2)), turn(grads.dk, back(turn_k, -1, -2)), grads.dv


GRAD_CASES = list(CASES)  # grad.py turns RoPE back through positions.rotate_back, every scaling included


@pytest.mark.parametrize("name", GRAD_CASES)
def test_grad_against_independent_float64(name):
    (q, k, v, dout), (turn_q, turn_k), rope = problem(name, heads=1)
    grads = attention_grad(q, k, v, dout, AttentionOptions(rope=rope, causal="bottom-right"))
    for got, want in zip(
        (grads.dq, grads.dk, grads.dv), _independent_grads(q, k, v, dout, turn_q, turn_k, "bottom-right"), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=0, atol=float64_atol(name, q, k, v, dout, want))


@pytest.mark.parametrize("name", list(CASES))
def test_rotate_back_is_the_transpose(name):
    """``rotate_back``, the entry point for the backward pass: Mᵀ of the rotation,
    with one sequence length for Q and K even where the keys' own positions are short."""
    (q, k, _, _), (turn_q, turn_k), rope = problem(name)
    dq, dk = rotate_back(q, k, rope)
    atol = float64_atol(name, q, k)
    np.testing.assert_allclose(dq, turn(q, np.swapaxes(turn_q, -1, -2)), rtol=0, atol=atol)
    np.testing.assert_allclose(dk, turn(k, np.swapaxes(turn_k, -1, -2)), rtol=0, atol=atol)


def test_rotate_without_a_length_refuses_the_scalings_that_need_one():
    x = np.ones((3, 64))
    with pytest.raises(ValueError, match="rotate needs the sequence length for dynamic rope scaling"):
        rotate(x, np.arange(3), rope_of(CASES["dynamic"]))
    np.testing.assert_array_equal(
        rotate(x, np.arange(3), rope_of(CASES["gpt-oss"])), rotate(x, np.arange(3), rope_of(CASES["gpt-oss"]), 100_000)
    )


def test_dynamic_and_longrope_follow_the_longest_position():
    """One length for Q and K: the largest position + 1, wherever it is."""
    dynamic = rope_of(CASES["dynamic"])
    short, _ = rope_frequencies(dynamic, 64, 2048)
    long, _ = rope_frequencies(dynamic, 64, 5000)
    assert np.array_equal(short, rope_frequencies(Rope("neox", 10000.0, 64), 64, 2048)[0])
    assert (long[1:] < short[1:]).all()
    q, k = np.ones((2, 64)), np.ones((3, 64))
    for offset, length in ((None, 3), (4998, 5000)):
        steps = attention_steps(q, k, k, rope=replace(dynamic, offset=offset))
        inv_freq, _ = rope_frequencies(dynamic, 64, length)
        want = k.copy()
        want[2, :32], want[2, 32:] = (
            np.cos(2 * inv_freq) - np.sin(2 * inv_freq),
            np.cos(2 * inv_freq) + np.sin(2 * inv_freq),
        )
        np.testing.assert_allclose(steps.rotated[1][2], want[2], rtol=0, atol=1e-15)


def test_the_attention_factor_scales_the_score_bound():
    """The kernel skips its running max when ‖q‖‖k‖ bounds every logit small:
    the bound must be of Q and K as rotated, attention factor included. Here the
    unrotated bound (40) is below float32's safe exp (44.4) and the scaled one
    (40 · 2²) is not: exp(160) would overflow without the running max."""
    q = np.full((2, 8), math.sqrt(40 / 8), dtype=np.float32)  # ‖q‖ = √40, q·q = 40 at the same position
    yarn = RopeScaling("yarn", factor=2.0, original_max_position_embeddings=16, attention_factor=2.0)
    options = AttentionOptions(scale=1.0, rope=Rope("neox", offset=0, scaling=yarn))
    out, _ = attention(q, q, q, options, implementation="blocked")
    want, _ = attention(q.astype(np.float64), q.astype(np.float64), q.astype(np.float64), options)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_features_last_rotates_the_trailing_features():
    """DeepSeek's MLA: the last qk_rope_head_dim features turn; the first stay."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 10))
    for style in ("neox", "gptj"):
        last = rotate(x, np.arange(4), Rope(style, dim=4, features="last"))
        np.testing.assert_array_equal(last[:, :6], x[:, :6])
        assert not np.allclose(last[:, 6:], x[:, 6:])
        np.testing.assert_array_equal(last[:, 6:], rotate(x[:, 6:], np.arange(4), Rope(style)))
        first = rotate(x, np.arange(4), Rope(style, dim=4))
        np.testing.assert_array_equal(first[:, 4:], x[:, 4:])  # features="first": the rest stay


def test_no_scaling_is_unchanged():
    """A scaling's attention factor of 1 and plain RoPE leave the numbers bit for bit."""
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((3, 5, 8)), rng.standard_normal((3, 7, 8)), rng.standard_normal((3, 7, 2))
    plain, _ = attention(q, k, v, rope=Rope("neox", theta=500.0))
    linear1, _ = attention(q, k, v, rope=Rope("neox", theta=500.0, scaling=RopeScaling("linear", factor=1)))
    np.testing.assert_array_equal(plain, linear1)


# Bad input: one line each, the field named.

LLAMA3 = dict(factor=8, original_max_position_embeddings=8192, low_freq_factor=1, high_freq_factor=4)
ERRORS = [
    (dict(kind="ntk"), "unknown rope scaling kind 'ntk' (use linear, dynamic, llama3, yarn or longrope)"),
    (
        dict(kind="linear"),
        "linear rope scaling needs factor "
        "(how many times the context is stretched, e.g. 8 for Llama 3.1, 32 for gpt-oss)",
    ),
    (
        dict(kind="yarn", factor=32),
        "yarn rope scaling needs original_max_position_embeddings "
        "(the context length the model was trained at, e.g. 8192 for Llama 3.1)",
    ),
    (
        dict(kind="llama3", factor=8, original_max_position_embeddings=8192, high_freq_factor=4),
        "llama3 rope scaling needs low_freq_factor (Llama 3.1 uses 1)",
    ),
    (
        dict(kind="longrope", original_max_position_embeddings=4096, long_factor=[1.0]),
        "longrope rope scaling needs short_factor (one number per rotated pair, as in the config's rope_scaling)",
    ),
    (
        dict(kind="linear", factor=2, beta_fast=16),
        "beta_fast does not apply to linear rope scaling (linear takes factor)",
    ),
    (
        dict(kind="dynamic", factor=2, original_max_position_embeddings=2048, attention_factor=1.1),
        "attention_factor does not apply to dynamic rope scaling "
        "(dynamic takes factor, original_max_position_embeddings)",
    ),
    (dict(kind="linear", factor=0), "rope scaling's factor must be a positive finite number, got 0"),
    (dict(kind="linear", factor="8"), "rope scaling's factor must be a positive finite number, got '8'"),
    (dict(kind="linear", factor=math.inf), "rope scaling's factor must be a positive finite number, got inf"),
    (
        dict(kind="yarn", factor=4, original_max_position_embeddings=4096, beta_fast=-1),
        "rope scaling's beta_fast must be a positive finite number, got -1",
    ),
    (
        dict(kind="yarn", factor=4, original_max_position_embeddings=4096, attention_factor=0.0),
        "rope scaling's attention_factor must be a positive finite number, got 0.0",
    ),
    (
        dict(kind="yarn", factor=4, original_max_position_embeddings=4096.5),
        "rope scaling's original_max_position_embeddings must be a positive whole number, got 4096.5",
    ),
    (
        dict(kind="dynamic", factor=2, original_max_position_embeddings=0),
        "rope scaling's original_max_position_embeddings must be a positive whole number, got 0",
    ),
    (
        dict(kind="yarn", factor=40, original_max_position_embeddings=4096, mscale=-0.5, mscale_all_dim=1.0),
        "rope scaling's mscale must be a finite number ≥ 0, got -0.5",
    ),
    (
        dict(kind="yarn", factor=40, original_max_position_embeddings=4096, truncate="no"),
        "rope scaling's truncate must be true or false, got 'no'",
    ),
    (
        dict(kind="longrope", original_max_position_embeddings=4096, factor=32, short_factor=2.0, long_factor=[1.0]),
        "rope scaling's short_factor must be a list of numbers, got 2.0 "
        "(one number per rotated pair, as in the config's rope_scaling)",
    ),
    (
        dict(kind="longrope", original_max_position_embeddings=4096, factor=32, short_factor=[1.0], long_factor=[0.0]),
        "rope scaling's long_factor must be a list of positive finite numbers "
        "(one number per rotated pair, as in the config's rope_scaling)",
    ),
    (
        dict(kind="llama3", **{**LLAMA3, "high_freq_factor": 1}),
        "llama3 rope scaling's high_freq_factor (1) must be greater than its low_freq_factor (1) "
        "(Llama 3.1 uses 4 and 1)",
    ),
    (
        dict(kind="yarn", factor=4, original_max_position_embeddings=4096, beta_fast=0.5),
        "yarn rope scaling's beta_fast (0.5) must be at least its beta_slow (1) (the defaults are 32 and 1)",
    ),
    (
        dict(kind="longrope", original_max_position_embeddings=4096, short_factor=[1.0], long_factor=[1.0]),
        "longrope rope scaling needs factor or attention_factor (factor is max_position_embeddings / "
        "original_max_position_embeddings, e.g. 131072 / 4096 = 32 for Phi-3)",
    ),
    (
        dict(kind="longrope", original_max_position_embeddings=1, factor=4, short_factor=[1.0], long_factor=[1.0]),
        "longrope rope scaling's original_max_position_embeddings must be at least 2 for its attention factor, "
        "√(1 + ln factor / ln original_max_position_embeddings) (or give attention_factor)",
    ),
    (
        dict(
            kind="longrope",
            original_max_position_embeddings=4096,
            factor=32,
            short_factor=[1.0, 1.0],
            long_factor=[1.0],
        ),
        "longrope rope scaling's short_factor has 2 numbers but its long_factor has 1 (one of each per rotated pair)",
    ),
]


@pytest.mark.parametrize(("settings", "message"), ERRORS, ids=[m[:40] for _, m in ERRORS])
def test_rope_scaling_errors(settings, message):
    q = np.ones((2, 8))
    with pytest.raises(UsageError) as caught:
        attention(q, q, q, rope=Rope(scaling=RopeScaling(**settings)))
    assert str(caught.value) == message


ROPE_ERRORS = [
    (
        lambda: Rope(scaling={"rope_type": "linear", "factor": 2}),
        UsageError,
        "rope scaling must be a RopeScaling, not dict (Rope(scaling=RopeScaling('linear', factor=2)))",
    ),
    (
        lambda: Rope(dim=4, features="middle"),
        UsageError,
        "unknown rope features 'middle' (use first or last (DeepSeek rotates the last qk_rope_head_dim))",
    ),
    (
        lambda: Rope(theta=1.0, scaling=RopeScaling("yarn", factor=4, original_max_position_embeddings=64)),
        UsageError,
        "yarn rope scaling needs a rope theta other than 1 (it divides by ln theta to find the pairs to interpolate)",
    ),
]


@pytest.mark.parametrize(("make", "error", "message"), ROPE_ERRORS, ids=[m[:40] for _, _, m in ROPE_ERRORS])
def test_rope_errors(make, error, message):
    with pytest.raises(error) as caught:
        make()
    assert str(caught.value) == message


def test_errors_that_depend_on_the_inputs():
    q = np.ones((3, 8))
    longrope = RopeScaling(
        "longrope", original_max_position_embeddings=4, factor=8, short_factor=[1.0] * 3, long_factor=[2.0] * 3
    )
    with pytest.raises(ShapeError) as caught:
        attention(q, q, q, rope=Rope(scaling=longrope))
    assert str(caught.value) == "longrope rope scaling has 3 factors for a rope dim of 8 (give one per rotated pair: 4)"
    dynamic = RopeScaling("dynamic", factor=2, original_max_position_embeddings=4)
    with pytest.raises(ShapeError) as caught:
        attention(q, q, q, rope=Rope(dim=2, scaling=dynamic))
    assert str(caught.value) == (
        "dynamic rope scaling needs a rope dim of at least 4, got 2 (it raises theta to the power dim / (dim - 2))"
    )
