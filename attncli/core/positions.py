"""Where tokens sit: rotary position embeddings (RoPE), ALiBi slopes, and
which keys a query may see (causal alignment, FlashAttention's windows).

Keys sit at positions 0 .. n_k − 1. Queries are the last n_q tokens, at
n_k − n_q + i ("bottom-right", as new tokens after cached ones), except for
top-left causal, which lines query i up with key i.
"""

from __future__ import annotations

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


def distance(rows: np.ndarray, cols: np.ndarray, n_q: int, n_k: int) -> np.ndarray:
    """[r], [c] -> [r, c] |i + n_k − n_q − j|: how far key j is from query i, bottom-right aligned."""
    return np.abs(rows[:, None] + (n_k - n_q) - cols[None, :]).astype(np.float64)


def causal_allowed(rows: np.ndarray, cols: np.ndarray, n_q: int, n_k: int, align: str) -> np.ndarray:
    """[r], [c] -> [r, c] bool: j ≤ i (top-left) or j ≤ i + n_k − n_q (bottom-right)."""
    offset = n_k - n_q if align == "bottom-right" else 0
    return cols[None, :] <= rows[:, None] + offset


def window_allowed(rows: np.ndarray, cols: np.ndarray, n_q: int, n_k: int, window: tuple[int, int]) -> np.ndarray:
    """[r], [c] -> [r, c] bool, FlashAttention's ``window_size=(left, right)`` exactly:
    i + n_k − n_q − left ≤ j ≤ i + n_k − n_q + right, inclusive; −1 leaves a side open."""
    left, right = window
    centre = rows[:, None] + (n_k - n_q)  # [r, 1] the key in line with each query
    allowed = np.ones((len(rows), len(cols)), dtype=bool)
    if left != UNBOUNDED:
        allowed &= cols[None, :] >= centre - left
    if right != UNBOUNDED:
        allowed &= cols[None, :] <= centre + right
    return allowed


def _bounds(rows: range, n_q: int, n_k: int, causal: str | None,
            window: tuple[int, int] | None) -> tuple[list[int], list[int]]:
    """For the first and last query of ``rows``, the lowest and highest key
    each may see (causal and window only; the ends of [0, n_k) otherwise)."""
    lows, highs = [], []
    for i in (rows.start, rows.stop - 1):
        centre = i + n_k - n_q  # the key in line with query i (bottom-right)
        low, high = 0, n_k - 1
        if causal is not None:
            high = min(high, i + (n_k - n_q if causal == "bottom-right" else 0))
        if window is not None and window[0] != UNBOUNDED:
            low = max(low, centre - window[0])
        if window is not None and window[1] != UNBOUNDED:
            high = min(high, centre + window[1])
        lows.append(low)
        highs.append(high)
    return lows, highs


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
