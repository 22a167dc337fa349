"""Where tokens sit: rotary position embeddings (RoPE), ALiBi slopes, and
which keys a query may see (causal alignment, FlashAttention's windows).

Keys sit at positions 0 .. n_k − 1. Queries are the last n_q tokens, at
n_k − n_q + i ("bottom-right", as new tokens after cached ones), except for
top-left causal, which lines query i up with key i.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from attncli.core.options import UNBOUNDED, Rope


def rope_angles(positions: np.ndarray, dim: int, theta: float) -> np.ndarray:
    """[n] positions -> [n, dim / 2] angles: position · theta^(−2i/dim), in float64."""
    inv_freq = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)  # [dim / 2]
    return np.outer(positions.astype(np.float64), inv_freq)  # [n, dim / 2]


def rotate(x: np.ndarray, positions: np.ndarray, rope: Rope) -> np.ndarray:
    """x [..., n, d] rotated by the positions [n]: a new array in x's dtype.

    neox: x1 = x[:dim/2], x2 = x[dim/2:dim] -> (x1 cos − x2 sin, x2 cos + x1 sin),
    which is Hugging Face's ``x * cos + rotate_half(x) * sin``.
    gptj: the same on the pairs (x[2i], x[2i+1]), as multiplying x[2i] + i·x[2i+1]
    by e^(i·angle) (Meta's LLaMA ``apply_rotary_emb``). Features past ``dim`` stay.
    Angles, cos and sin are float64, then rounded to x's dtype.
    """
    dim = rope.dim or x.shape[-1]
    angles = rope_angles(positions, dim, rope.theta)  # [n, dim / 2]
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    out = np.array(x, dtype=x.dtype, copy=True)  # [..., n, d]
    if rope.style == "neox":
        x1, x2 = x[..., : dim // 2], x[..., dim // 2 : dim]  # [..., n, dim / 2] each
        out[..., : dim // 2] = x1 * cos - x2 * sin
        out[..., dim // 2 : dim] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., 0:dim:2], x[..., 1:dim:2]  # [..., n, dim / 2] each: the pairs (2i, 2i + 1)
        out[..., 0:dim:2] = x1 * cos - x2 * sin
        out[..., 1:dim:2] = x2 * cos + x1 * sin
    return out


def query_positions(n_q: int, n_k: int, rope: Rope) -> np.ndarray:
    """[n_q] the queries' positions: offset + i, the offset n_k − n_q unless given."""
    offset = n_k - n_q if rope.offset is None else rope.offset
    return np.arange(n_q) + offset


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


def band_allowed(rows: range, cols: range, n_q: int, n_k: int, causal: str | None,
                 window: tuple[int, int] | None) -> np.ndarray:
    """[r, c] bool, True where query i may see key j under causal and the window.

    Both are one band lo ≤ j − i ≤ hi. Causal: j ≤ i (top-left) or
    j ≤ i + n_k − n_q (bottom-right). FlashAttention's ``window_size=(left,
    right)`` exactly: i + n_k − n_q − left ≤ j ≤ i + n_k − n_q + right,
    inclusive; −1 leaves a side open. Like ``distance``, a block depends only
    on j − i: read-only, worked out once for each shape and offset."""
    return _band_block(rows, cols, n_q, n_k, causal, window, "bool", "band")


def band_weights(rows: range, cols: range, n_q: int, n_k: int, causal: str | None,
                 window: tuple[int, int] | None, dtype: np.dtype, keys_first: bool = False) -> np.ndarray:
    """``band_allowed`` as 1 and 0 in ``dtype``, to multiply exp(logits) by:
    read-only, kept like it. ``keys_first``: [r, c] seen on a [c, r] array,
    the layout of the kernel's keys-first logits, so that the product runs
    along memory in both."""
    return _band_block(rows, cols, n_q, n_k, causal, window, np.dtype(dtype).str,
                       "weights, keys first" if keys_first else "weights")


def _band_block(rows: range, cols: range, n_q: int, n_k: int, causal: str | None,
                window: tuple[int, int] | None, dtype: str, kind: str) -> np.ndarray:
    """The band lo ≤ j − i ≤ hi over a block, as ``kind``, in local indices."""
    lo, hi = band(n_q, n_k, causal, window)
    shift = cols.start - rows.start  # j − i = (local j − local i) + shift
    return _block(len(rows), len(cols), shift, dtype, kind,
                  None if lo is None else lo - shift, None if hi is None else hi - shift)


def band(n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None) -> tuple[int | None, int | None]:
    """The band lo ≤ j − i ≤ hi that causal and the window allow (None: open)."""
    lo, hi = None, None
    if causal is not None:
        hi = n_k - n_q if causal == "bottom-right" else 0
    if window is not None and window[0] != UNBOUNDED:
        lo = n_k - n_q - window[0]
    if window is not None and window[1] != UNBOUNDED:
        hi = n_k - n_q + window[1] if hi is None else min(hi, n_k - n_q + window[1])
    return lo, hi


def _block(r: int, c: int, shift: int, dtype: str, kind: str,
           lo: int | None = None, hi: int | None = None) -> np.ndarray:
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


def _bounds(rows: range, n_q: int, n_k: int, causal: str | None,
            window: tuple[int, int] | None) -> tuple[list[int], list[int]]:
    """For the first and last query of ``rows``, the lowest and highest key
    each may see (causal and window only; the ends of [0, n_k) otherwise)."""
    lo, hi = band(n_q, n_k, causal, window)
    ends = (rows.start, rows.stop - 1)
    return ([0 if lo is None else max(0, i + lo) for i in ends],
            [n_k - 1 if hi is None else min(n_k - 1, i + hi) for i in ends])


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
