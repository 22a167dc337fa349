"""Where tokens sit: rotary position embeddings (RoPE, with its scalings'
frequencies), ALiBi slopes, and which keys a query may see (causal
alignment, FlashAttention's windows).

Keys sit at positions 0 .. n_k − 1. Queries are the last n_q tokens, at
n_k − n_q + i ("bottom-right", as new tokens after cached ones), except for
top-left causal, which lines query i up with key i.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from attncli.core.checks import UNBOUNDED
from attncli.core.rope import MAX_POSITION, POSITION_HINT, Rope, RopeScaling
from attncli.errors import ShapeError, UsageError


def rope_frequencies(rope: Rope, dim: int, length: int) -> tuple[np.ndarray, float]:
    """The [dim / 2] inverse frequencies (float64) and the attention factor of
    ``rope`` for ``dim`` rotated features and a sequence of ``length`` tokens.

    Plain RoPE: inv_freq[i] = theta^(−2i/dim) and a factor of 1. With
    ``rope.scaling``, its kind's function in ``SCALINGS``, each the same
    formula as transformers' ``ROPE_INIT_FUNCTIONS`` (``modeling_rope_utils``)
    on the same parameters. ``length`` (Hugging Face's ``seq_len``, the largest
    position + 1, ``rope_length``) matters only to dynamic and longrope.
    Hugging Face computes these in float32 (and its angles position · inv_freq
    too), attn in float64: they agree to about 1e-6 relative
    (tests/test_rope_scaling.py says how close for each kind).
    """
    exponents = np.arange(0, dim, 2, dtype=np.float64) / dim  # [dim / 2] the 2i / dim
    if rope.scaling is None:
        return rope.theta**-exponents, 1.0
    return SCALINGS[rope.scaling.kind](rope.theta, exponents, dim, rope.scaling, length)


def _linear(theta: float, exponents: np.ndarray, dim: int, s: RopeScaling, length: int) -> tuple[np.ndarray, float]:
    """Position interpolation: every frequency divided by the factor
    (``_compute_linear_scaling_rope_parameters``)."""
    return theta**-exponents / _given(s.factor), 1.0


def _dynamic(theta: float, exponents: np.ndarray, dim: int, s: RopeScaling, length: int) -> tuple[np.ndarray, float]:
    """NTK-aware scaling (``_compute_dynamic_ntk_parameters``): theta raised to
    theta · (factor · L / M − (factor − 1))^(dim / (dim − 2)), L the sequence
    length but at least M = original_max_position_embeddings (Hugging Face's
    ``config.max_position_embeddings``), so nothing changes up to M."""
    if dim < 4:
        raise ShapeError(
            f"dynamic rope scaling needs a rope dim of at least 4, got {dim}",
            hint="it raises theta to the power dim / (dim - 2)",
        )
    factor, m = _given(s.factor), _given(s.original_max_position_embeddings)
    base = theta * (factor * max(length, m) / m - (factor - 1)) ** (dim / (dim - 2))
    return base**-exponents, 1.0


def _llama3(theta: float, exponents: np.ndarray, dim: int, s: RopeScaling, length: int) -> tuple[np.ndarray, float]:
    """Llama 3.1 (``_compute_llama3_parameters``): wavelengths 2π / inv_freq above
    M / low_freq_factor divided by the factor, below M / high_freq_factor kept,
    and between, a mix that slides with M / wavelength."""
    factor, m = _given(s.factor), _given(s.original_max_position_embeddings)
    low, high = _given(s.low_freq_factor), _given(s.high_freq_factor)
    inv_freq = theta**-exponents  # [dim / 2]
    wavelength = 2 * math.pi / inv_freq
    scaled = np.where(wavelength > m / low, inv_freq / factor, inv_freq)
    smooth = (m / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < m / high) & ~(wavelength > m / low)
    return np.where(medium, smoothed, scaled), 1.0


def _yarn(theta: float, exponents: np.ndarray, dim: int, s: RopeScaling, length: int) -> tuple[np.ndarray, float]:
    """YaRN (``_compute_yarn_parameters``): each frequency a mix of the kept
    one and the interpolated one (divided by the factor), kept for pairs that
    turn more than beta_fast times over M positions, interpolated for those
    turning fewer than beta_slow times, a linear ramp between (its ends rounded
    out to whole pairs unless truncate is False, as gpt-oss sets). The attention
    factor: the one given; else with mscale and mscale_all_dim both non-zero,
    mscale(factor, mscale) / mscale(factor, mscale_all_dim); else
    mscale(factor) = 0.1 ln(factor) + 1 (1 for a factor ≤ 1)."""
    factor, m = _given(s.factor), _given(s.original_max_position_embeddings)

    def mscale(scale: float, weight: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    attention = s.attention_factor
    if attention is None:
        attention = (
            mscale(factor, s.mscale) / mscale(factor, s.mscale_all_dim)
            if s.mscale and s.mscale_all_dim
            else mscale(factor)
        )

    def pair_turning(rotations: float) -> float:  # the (fractional) pair that turns ``rotations`` times over M
        return dim * math.log(m / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = pair_turning(s.beta_fast or 32.0), pair_turning(s.beta_slow or 1.0)
    if s.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as Hugging Face: no division by zero
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)  # [dim / 2]: 0 kept … 1 scaled
    kept = theta**-exponents
    return kept / factor * ramp + kept * (1 - ramp), float(attention)


def _longrope(theta: float, exponents: np.ndarray, dim: int, s: RopeScaling, length: int) -> tuple[np.ndarray, float]:
    """LongRoPE (``_compute_longrope_parameters``, Phi-3): pair i's frequency
    divided by long_factor[i] when the sequence is longer than M, else by
    short_factor[i]. The attention factor: the one given; else
    √(1 + ln(factor) / ln M), 1 for a factor ≤ 1."""
    m = _given(s.original_max_position_embeddings)
    factors = s.long_factor if length > m else s.short_factor
    assert factors is not None
    if len(factors) != dim // 2:
        raise ShapeError(
            f"longrope rope scaling has {len(factors)} factors for a rope dim of {dim}",
            hint=f"give one per rotated pair: {dim // 2}",
        )
    attention = s.attention_factor
    if attention is None:
        factor = _given(s.factor)
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(m))
    return theta**-exponents / np.array(factors), float(attention)


def _given(value: float | None) -> float:
    """A field the kind needs: ``RopeScaling`` checked that it was given."""
    assert value is not None
    return float(value)


Scaling = Callable[[float, np.ndarray, int, RopeScaling, int], tuple[np.ndarray, float]]
SCALINGS: dict[str, Scaling] = {
    "linear": _linear,
    "dynamic": _dynamic,
    "llama3": _llama3,
    "yarn": _yarn,
    "longrope": _longrope,
}
LENGTH_DEPENDENT = frozenset({"dynamic", "longrope"})  # the scalings whose frequencies depend on the length


def rope_length(n_q: int, n_k: int, rope: Rope) -> int:
    """The sequence length RoPE scaling sees: the largest position of a query
    or key, + 1 (Hugging Face's ``seq_len = max(position_ids) + 1``, which
    picks dynamic's theta and longrope's factors). One length for Q and K: as
    Hugging Face's forward over a whole sequence; with a cache, its earlier
    keys were rotated with the frequencies of the step that made them."""
    offset = n_k - n_q if rope.offset is None else rope.offset
    return max(n_k, offset + n_q)


def rotate_qk(
    q: np.ndarray, k: np.ndarray, rope: Rope, rounded: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Q [..., n_q, d] and K [..., n_k, d] rotated by their positions (queries at
    offset + i, keys at j), both with the frequencies of one sequence length
    (``rope_length``); ``rounded``: see ``rotate``."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    length = rope_length(n_q, n_k, rope)
    return (
        rotate(q, query_positions(n_q, n_k, rope), rope, length, rounded),
        rotate(k, np.arange(n_k), rope, length, rounded),
    )


def rotate_back(dq: np.ndarray, dk: np.ndarray, rope: Rope) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of ``rotate_qk``'s rotated Q [..., n_q, d] and K [..., n_k, d]
    turned back into Q's and K's: the rotation by minus the same angles, with the
    same frequencies and attention factor (the transpose of a · R(angle) is
    a · R(−angle))."""
    n_q, n_k = dq.shape[-2], dk.shape[-2]
    length = rope_length(n_q, n_k, rope)
    return rotate(dq, -query_positions(n_q, n_k, rope), rope, length), rotate(dk, -np.arange(n_k), rope, length)


def rotate(
    x: np.ndarray,
    positions: np.ndarray,
    rope: Rope,
    length: int | None = None,
    rounded: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """x [..., n, d] rotated by the positions [n]: a new array in x's dtype.

    neox: x1 = x[:dim/2], x2 = x[dim/2:dim] -> (x1 cos − x2 sin, x2 cos + x1 sin),
    which is Hugging Face's ``x * cos + rotate_half(x) * sin``.
    gptj: the same on the pairs (x[2i], x[2i+1]), as multiplying x[2i] + i·x[2i+1]
    by e^(i·angle) (Meta's LLaMA ``apply_rotary_emb``). The ``dim`` features
    rotated are the first (or, ``rope.features == "last"``, the last); the
    others stay. Angles, cos and sin are float64, cos and sin multiplied by
    the scaling's attention factor (Hugging Face's ``attention_scaling``), then
    rounded to x's dtype. (Hugging Face computes the frequencies and the angles
    in float32 even for float64 models: up to about L · 2⁻²⁴ radians off at
    position L.)

    ``length``: the sequence length the frequencies are for (``rope_length``);
    it may be left out only when they do not depend on it (no scaling, or
    linear, llama3, yarn). Q and K are rotated together by ``rotate_qk`` and
    their gradients turned back by ``rotate_back``, which pass it.

    ``rounded``: cos, sin and every product and sum rounded by it, as Hugging
    Face's eager attention rounds them in a low-precision dtype (``attn
    check``'s step-by-step baseline).
    """
    d = x.shape[-1]
    dim = rope.dim or d
    if length is None:
        if rope.scaling is not None and rope.scaling.kind in LENGTH_DEPENDENT:
            raise ValueError(
                f"rotate needs the sequence length for {rope.scaling.kind} rope scaling: use rotate_qk and rotate_back"
            )
        length = 0
    inv_freq, factor = rope_frequencies(rope, dim, length)  # [dim / 2], a number
    angles = np.outer(positions.astype(np.float64), inv_freq)  # [n, dim / 2]
    cos, sin = (np.cos(angles) * factor).astype(x.dtype), (np.sin(angles) * factor).astype(x.dtype)
    out = np.array(x, dtype=x.dtype, copy=True)  # [..., n, d]
    start = 0 if rope.features == "first" else d - dim  # the rotated features are start .. start + dim − 1
    if rope.style == "neox":
        first, second = slice(start, start + dim // 2), slice(start + dim // 2, start + dim)
    else:
        first, second = slice(start, start + dim, 2), slice(start + 1, start + dim, 2)  # the pairs (2i, 2i + 1)
    x1, x2 = x[..., first], x[..., second]  # [..., n, dim / 2] each
    if rounded is not None:
        cos, sin = rounded(cos), rounded(sin)
        out[..., first] = rounded(rounded(x1 * cos) - rounded(x2 * sin))
        out[..., second] = rounded(rounded(x2 * cos) + rounded(x1 * sin))
        return out
    out[..., first] = x1 * cos - x2 * sin
    out[..., second] = x2 * cos + x1 * sin
    return out


def query_positions(n_q: int, n_k: int, rope: Rope) -> np.ndarray:
    """[n_q] the queries' positions: offset + i, the offset n_k − n_q unless given;
    the last of them at most 2^32 (``MAX_POSITION``: its angles are then within 1e-6)."""
    offset = n_k - n_q if rope.offset is None else rope.offset
    if offset + n_q - 1 > MAX_POSITION:
        raise UsageError(
            f"the last query's RoPE position, {offset:,} + {n_q - 1:,}, is past 2^32 ({MAX_POSITION:,})",
            hint=POSITION_HINT,
        )
    return np.arange(n_q, dtype=np.int64) + offset


def alibi_slopes(n_heads: int) -> np.ndarray:
    """[n_heads] the ALiBi slopes of Press et al.: 2^(−8(h+1)/H) for H a power of
    two; otherwise those of the power of two below H, then every other slope of
    twice that power (Hugging Face's ``get_alibi_slopes``, FlashAttention's tests)."""

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    if n_heads & (n_heads - 1) == 0:
        return np.array(power_of_two(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    return np.array(power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest])


def distance(rows: range, cols: range, n_q: int, n_k: int, dtype: np.dtype) -> np.ndarray:
    """[r, c] |i + n_k − n_q − j| in ``dtype``: how far key j is from query i,
    bottom-right aligned (whole numbers, exact in float32 below 2^24).

    It depends only on j − i, so the block is worked out once for each shape
    and offset (the kernel's blocks repeat them) and is read-only."""
    return _block(len(rows), len(cols), cols.start - rows.start - (n_k - n_q), np.dtype(dtype).str, "distance")


def band_allowed(
    rows: range, cols: range, n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None
) -> np.ndarray:
    """[r, c] bool, True where query i may see key j under causal and the window.

    Both are one band lo ≤ j − i ≤ hi. Causal: j ≤ i (top-left) or
    j ≤ i + n_k − n_q (bottom-right). FlashAttention's ``window_size=(left,
    right)`` exactly: i + n_k − n_q − left ≤ j ≤ i + n_k − n_q + right,
    inclusive; −1 leaves a side open. Like ``distance``, a block depends only
    on j − i: read-only, worked out once for each shape and offset."""
    return _band_block(rows, cols, n_q, n_k, causal, window, "bool", "band")


def band_weights(
    rows: range,
    cols: range,
    n_q: int,
    n_k: int,
    causal: str | None,
    window: tuple[int, int] | None,
    dtype: np.dtype,
    keys_first: bool = False,
) -> np.ndarray:
    """``band_allowed`` as 1 and 0 in ``dtype``, to multiply exp(logits) by:
    read-only, kept like it. ``keys_first``: [r, c] seen on a [c, r] array,
    the layout of the kernel's keys-first logits, so that the product runs
    along memory in both."""
    return _band_block(
        rows, cols, n_q, n_k, causal, window, np.dtype(dtype).str, "weights, keys first" if keys_first else "weights"
    )


def _band_block(
    rows: range,
    cols: range,
    n_q: int,
    n_k: int,
    causal: str | None,
    window: tuple[int, int] | None,
    dtype: str,
    kind: str,
) -> np.ndarray:
    """The band lo ≤ j − i ≤ hi over a block, as ``kind``, in local indices."""
    lo, hi = band(n_q, n_k, causal, window)
    shift = cols.start - rows.start  # j − i = (local j − local i) + shift
    return _block(
        len(rows), len(cols), shift, dtype, kind, None if lo is None else lo - shift, None if hi is None else hi - shift
    )


def band(n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None) -> tuple[int | None, int | None]:
    """The band lo ≤ j − i ≤ hi that causal and the window allow (None: open).

    A bound that every pair meets is open: j − i lies in [1 − n_q, n_k − 1],
    so lo ≤ 1 − n_q and hi ≥ n_k − 1 are None: a window side that excludes no
    key (left ≥ n_k − 1, right ≥ n_q − 1; any side ≥ n_k when n_q ≤ n_k + 1,
    which FlashAttention's kernels set to −1) is unbounded, as −1 is, however
    large. lo and hi stay within the sizes, so nothing made from them (blocks,
    ``np.tri``) can overflow a C long."""
    lo, hi = None, None
    if causal is not None:
        hi = n_k - n_q if causal == "bottom-right" else 0
    if window is not None and window[0] != UNBOUNDED:
        lo = n_k - n_q - window[0]
    if window is not None and window[1] != UNBOUNDED:
        hi = n_k - n_q + window[1] if hi is None else min(hi, n_k - n_q + window[1])
    return (None if lo is None or lo <= 1 - n_q else lo), (None if hi is None or hi >= n_k - 1 else hi)


def _block(
    r: int, c: int, shift: int, dtype: str, kind: str, lo: int | None = None, hi: int | None = None
) -> np.ndarray:
    """``distance`` (|local j − local i + shift|), ``band_allowed`` (lo ≤ local j − local i ≤ hi)
    or ``band_weights`` of an r × c block; kept when small (≤ 2^18 cells), as the kernel's blocks are."""
    if r * c <= _KEPT_CELLS:
        return _kept_block(r, c, shift if kind == "distance" else 0, dtype, kind, lo, hi)
    return _new_block(r, c, shift, dtype, kind, lo, hi)


_KEPT_CELLS = 1 << 18  # a kernel block, 256 × 1024: at most 32 of 2 MiB (float64) kept


def _new_block(r: int, c: int, shift: int, dtype: str, kind: str, lo: int | None, hi: int | None) -> np.ndarray:
    if kind == "distance":
        i, j = np.arange(r, dtype=dtype), np.arange(c, dtype=dtype) + shift  # [r], [c] exact whole numbers
        return np.abs(np.subtract.outer(i, j))  # [r, c] |i − j − shift|
    allowed = np.ones((r, c), dtype=bool) if hi is None else np.tri(r, c, k=hi, dtype=bool)  # j − i ≤ hi
    if lo is not None:
        allowed &= ~np.tri(r, c, k=lo - 1, dtype=bool)  # not j − i ≤ lo − 1
    if kind == "weights, keys first":
        return np.ascontiguousarray(allowed.T, dtype=dtype).T  # [r, c] on [c, r] memory
    return allowed.astype(dtype) if kind == "weights" else allowed


@functools.lru_cache(maxsize=32)
def _kept_block(r: int, c: int, shift: int, dtype: str, kind: str, lo: int | None, hi: int | None) -> np.ndarray:
    block = _new_block(r, c, shift, dtype, kind, lo, hi)
    block.flags.writeable = False
    return block


def _bounds(
    rows: range, n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None
) -> tuple[list[int], list[int]]:
    """For the first and last query of ``rows``, the lowest and highest key
    each may see (causal and window only; the ends of [0, n_k) otherwise)."""
    lo, hi = band(n_q, n_k, causal, window)
    ends = (rows.start, rows.stop - 1)
    return (
        [0 if lo is None else max(0, i + lo) for i in ends],
        [n_k - 1 if hi is None else min(n_k - 1, i + hi) for i in ends],
    )


def visible_keys(rows: range, n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None) -> range:
    """The keys that some query of ``rows`` may see under causal and the window:
    both bounds grow with i, so they are the first query's lowest key to the
    last query's highest (empty when none). Keys outside are never computed."""
    (low, _), (_, high) = _bounds(rows, n_q, n_k, causal, window)
    return range(low, max(low, high + 1))


def seen_by_all(rows: range, n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None) -> range:
    """The keys that every query of ``rows`` may see under causal and the window:
    the last query's lowest key to the first query's highest (empty when none).
    A block of keys within needs no masking."""
    (_, low), (high, _) = _bounds(rows, n_q, n_k, causal, window)
    return range(low, max(low, high + 1))
