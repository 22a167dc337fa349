"""From Q and K to logits: the inputs checked once, the scores of a block of
queries and keys, and ``combine``, the one function that applies the
options to them. The reference and the blocked kernel both go through here,
so every option means the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli.core.arrays import broadcasts_to, result_dtype, shape_text, unit_rows
from attncli.core.options import AttentionOptions
from attncli.errors import AttnError, ShapeError

EVERYTHING = slice(None)


@dataclass
class Problem:
    """Checked inputs of one attention call, ready to be cut into blocks."""

    q: np.ndarray  # [..., n_q, d_k]
    k: np.ndarray  # [..., n_k, d_k]
    v: np.ndarray  # [..., n_k, d_v]
    options: AttentionOptions
    scale: float  # the scale in force (options.scale_for(d_k))
    mask: np.ndarray | None  # [..., n_q or 1, n_k or 1] bool, at least 2-D
    bias: np.ndarray | None  # [..., n_q or 1, n_k or 1] in the inputs' dtype, at least 2-D
    logits_shape: tuple[int, ...]  # [..., n_q, n_k]
    cannot_overflow: bool  # a bound on |q·k| shows no block needs checking for inf/NaN

    @property
    def n_q(self) -> int:
        return self.logits_shape[-2]

    @property
    def n_k(self) -> int:
        return self.logits_shape[-1]

    @property
    def factor(self) -> float:
        """scale / temperature: what multiplies q·k (a python float keeps float32 in float32)."""
        return self.scale / self.options.temperature

    @property
    def out_shape(self) -> tuple[int, ...]:  # [..., n_q, d_v]
        return self.logits_shape[:-1] + self.v.shape[-1:]


def prepare(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions) -> Problem:
    """Check every input once, before any arithmetic, and gather them."""
    dtype = result_dtype(q, k, v)
    # np.asarray keeps a memory-mapped float array mapped when its dtype fits.
    q, k, v = (np.asarray(m, dtype=dtype) for m in (q, k, v))
    check_shapes(q, k, v)
    n_q, d_k, n_k = q.shape[-2], q.shape[-1], k.shape[-2]
    scale = options.scale_for(d_k)
    logits_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (n_q, n_k)
    for m in (options.mask, options.bias):
        if m is not None and not broadcasts_to(m.shape, logits_shape):
            raise ShapeError(
                f"the mask is {shape_text(m)} but the weights are {shape_text(logits_shape)} (queries × keys)",
                hint=f"give a {n_q}×{n_k} mask, or 1×{n_k} for every query",
            )
    mask = None if options.mask is None else np.atleast_2d(options.mask)
    bias = None if options.bias is None else np.atleast_2d(options.bias).astype(dtype)
    bound = _score_bound(q, k, options.similarity) * max(1.0, scale / options.temperature)
    return Problem(q, k, v, options, scale, mask, bias, logits_shape, bool(bound < float(np.finfo(dtype).max)))


def check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Q, K, V must chain: same d_k for Q and K, one value row per key."""
    for name, m in (("Q", q), ("K", k), ("V", v)):
        if m.ndim < 2:
            raise ShapeError(f"{name} must be a matrix (rows × columns), got shape {m.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"Q is {shape_text(q)} but K is {shape_text(k)}",
                         hint="Q and K need the same number of columns, d_k")
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"K is {shape_text(k)} but V is {shape_text(v)}",
                         hint="K and V need the same number of rows: one value per key")


def scores(p: Problem, rows: slice = EVERYTHING, cols: slice = EVERYTHING, factor: float = 1.0) -> np.ndarray:
    """factor · q·k for a block of queries and keys: [..., r, c] (cosine: of unit-length rows).

    A factor other than 1 is folded into the (small) query block, so that the
    big block is written once by the matrix product.
    """
    qb, kb = p.q[..., rows, :], p.k[..., cols, :]  # [..., r, d_k], [..., c, d_k]
    if p.options.similarity == "cosine":
        qb, kb = unit_rows(qb), unit_rows(kb)  # row by row: the same as on whole matrices
    if factor != 1.0:
        qb = qb * factor
    with np.errstate(over="ignore", invalid="ignore"):
        return qb @ np.swapaxes(kb, -1, -2)  # [..., r, d_k] @ [..., d_k, c] -> [..., r, c]


def combine(logits: np.ndarray, p: Problem, rows: slice = EVERYTHING,
            cols: slice = EVERYTHING) -> tuple[np.ndarray, np.ndarray | None]:
    """Apply the options to scaled scores (scale · q·k / temperature), in place.

    [..., r, c] -> logits [..., r, c] and allowed [..., r, c] bool (None when
    nothing is forbidden). In order: the bias is added; then causal and the
    mask set −∞ where a query may not attend. ``rows`` and ``cols`` say which
    block of the n_q × n_k matrix this is.
    """
    if not p.cannot_overflow:
        check_scores(logits)
    if p.bias is not None:
        logits += _cut(p.bias, rows, cols)
    allowed = None if p.mask is None else _cut(p.mask, rows, cols)
    if p.options.causal is not None:
        i = np.arange(p.n_q)[rows][:, None]  # [r, 1]
        j = np.arange(p.n_k)[cols]  # [c]
        offset = p.n_k - p.n_q if p.options.causal == "bottom-right" else 0
        causal = j <= i + offset  # [r, c], as causal_mask
        allowed = causal if allowed is None else causal & allowed
    if allowed is not None:
        allowed = np.broadcast_to(allowed, logits.shape)
        np.copyto(logits, -np.inf, where=~allowed)
    return logits, allowed


def causal_mask(n_q: int, n_k: int, align: str = "top-left") -> np.ndarray:
    """[n_q, n_k] bool, True where query i may attend to key j.

    top-left (PyTorch ``is_causal``, JAX, Keras): query i sees keys 0..i.
    bottom-right (the last query sees every key, as when n_q new tokens follow
    n_k - n_q cached ones): query i sees keys 0..i + n_k - n_q.
    """
    if align not in ("top-left", "bottom-right"):
        raise AttnError(f"unknown causal alignment {align!r}", hint="use top-left or bottom-right")
    return np.tri(n_q, n_k, k=n_k - n_q if align == "bottom-right" else 0, dtype=bool)


def check_scores(logits: np.ndarray) -> None:
    """Overflowing scores are an error, never silent infs or NaNs.

    One sum is cheaper than isfinite on every cell; only when the sum is not
    finite (an inf or NaN, or a sum too large) is every cell looked at.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(logits.sum()) or np.isfinite(logits).all():
            return
    raise AttnError(
        "attention scores overflow: Q and K hold numbers too large to multiply",
        hint="scale the inputs down, or pass float64 data",
    )


def check_output(output: np.ndarray) -> None:
    if not np.isfinite(output).all():
        raise AttnError("the output overflows: V holds numbers too large to add up",
                        hint="scale V down, or pass float64 data")


def _score_bound(q: np.ndarray, k: np.ndarray, similarity: str) -> float:
    """An upper bound on every |q·k| and partial sum of it: d_k · max|q| · max|k|
    (cosine: about 1). NaN when an input holds NaN, so the check then runs.
    max and min rather than abs, so that a memory-mapped K is not copied."""
    if similarity == "cosine":
        return 2.0
    if q.size == 0 or k.size == 0:
        return 0.0
    largest = [max(float(m.max()), -float(m.min())) for m in (q, k)]
    return q.shape[-1] * largest[0] * largest[1]


def _cut(m: np.ndarray, rows: slice, cols: slice) -> np.ndarray:
    """The [rows, cols] block of a mask or bias; an axis of length 1 broadcasts whole."""
    return m[..., rows if m.shape[-2] > 1 else EVERYTHING, cols if m.shape[-1] > 1 else EVERYTHING]
