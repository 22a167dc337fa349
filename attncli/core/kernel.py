"""Scaled dot-product attention in numpy: the maths only, no I/O.

Import from here or from the package: ``from attncli import attention``.

Row vectors throughout, as in the transformer paper and the seeds:
Q is [n_q, d_k], K is [n_k, d_k], V is [n_k, d_v]; weights are [n_q, n_k] and
the output [n_q, d_v]. Leading batch axes ([..., n, d]) broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Union

import numpy as np

from attncli.core.arrays import broadcasts_to, check_positive, result_dtype, shape_text, unit_rows
from attncli.core.parallel import map_blocks
from attncli.errors import AttnError, ShapeError, UsageError

Causal = Union[bool, Literal["top-left", "bottom-right"]]
Similarity = Literal["dot", "cosine"]


@dataclass
class Steps:
    """Every intermediate of one attention call, for explaining and for JSON."""

    scores: np.ndarray  # [n_q, n_k] q·k (or cosine) before scaling
    scale: float  # what the scores were multiplied by
    logits: np.ndarray  # [n_q, n_k] scores · scale / temperature + mask; -inf = masked
    allowed: np.ndarray | None  # [n_q, n_k] bool, None when nothing is masked
    weights: np.ndarray  # [n_q, n_k] softmax of the logits; each row sums to 1 (or 0)
    output: np.ndarray  # [n_q, d_v] weights @ V


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable softmax along ``axis``; a row that is all -inf gives all zeros."""
    # [..., n] -> [..., n]
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all -inf row: exp(-inf) = 0 below
    e = np.exp(x - peak)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def causal_mask(n_q: int, n_k: int, align: str = "top-left") -> np.ndarray:
    """[n_q, n_k] bool, True where query i may attend to key j.

    top-left (PyTorch ``is_causal``, JAX, Keras): query i sees keys 0..i.
    bottom-right (the last query sees every key, as when n_q new tokens follow
    n_k - n_q cached ones): query i sees keys 0..i + n_k - n_q.
    """
    return np.tri(n_q, n_k, k=_causal_offset(n_q, n_k, align), dtype=bool)


def _causal_offset(n_q: int, n_k: int, align: str) -> int:
    """Query i may attend to keys j <= i + offset."""
    if align not in ("top-left", "bottom-right"):
        raise AttnError(f"unknown causal alignment {align!r}", hint="use top-left or bottom-right")
    return n_k - n_q if align == "bottom-right" else 0


def split_mask(mask: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Read a user's mask as (allowed, bias).

    A boolean mask, or one whose cells are all 0 or 1, says where a query may
    attend (True/1 = may attend, as in PyTorch SDPA, JAX and Keras). Any other
    float mask is added to the scaled scores; -inf there forbids the pair.
    """
    if mask is None:
        return None, None
    mask = np.asarray(mask)
    if mask.dtype == bool:
        return mask, None
    if mask.dtype.kind not in "fiu":
        raise AttnError(f"a mask must hold numbers or booleans, not {mask.dtype}")
    if np.isnan(mask).any() or np.isposinf(mask).any():
        raise AttnError("a mask may hold -inf but not NaN or +inf")
    if np.isin(mask, (0, 1)).all():
        return mask.astype(bool), None
    finite = np.isfinite(mask)
    if finite.all():
        return None, mask
    return finite, np.where(finite, mask, 0.0)  # -inf forbids the pair, like False


def _check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Q, K, V must chain: same d_k for Q and K, one value row per key."""
    for name, m in (("Q", q), ("K", k), ("V", v)):
        if m.ndim < 2:
            raise ShapeError(f"{name} must be a matrix (rows × columns), got shape {m.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(
            f"Q is {shape_text(q)} but K is {shape_text(k)}",
            hint="Q and K need the same number of columns, d_k",
        )
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"K is {shape_text(k)} but V is {shape_text(v)}",
            hint="K and V need the same number of rows: one value per key",
        )






def default_scale(d_k: int, similarity: Similarity = "dot") -> float:
    """1/√d_k for dot products (keeps their spread independent of d_k); 1 for
    cosine similarity, which is already in [-1, 1]."""
    return 1.0 / math.sqrt(d_k) if similarity == "dot" else 1.0




# Block sizes of the kernel: a query block's logits ([rows, key block]) take
# about QUERY_BLOCK_BYTES, so that max, exp and sum re-read them from the
# shared cache rather than memory, while blocks stay large enough for Python's
# per-block overhead not to count (n=8192, d=64, 2 cores: 256 × 8192 float32
# was among the fastest of 32-1024 queries × 2048-16384 keys; see
# benchmarks/README.md). Keys stream in blocks of KEY_BLOCK, so extra memory
# is about QUERY_BLOCK_BYTES · workers, whatever n_q and n_k.
QUERY_BLOCK_BYTES = 8 << 20
KEY_BLOCK = 8192
MIN_QUERY_BLOCK, MAX_QUERY_BLOCK = 16, 512


@dataclass
class _Problem:
    """Checked inputs of one attention call, ready to be cut into blocks."""

    q: np.ndarray  # [..., n_q, d_k]
    k: np.ndarray  # [..., n_k, d_k]
    v: np.ndarray  # [..., n_k, d_v]
    scale: float  # multiplies QKᵀ
    temperature: float  # divides the scaled scores
    cosine: bool  # rows of Q and K are made unit length, block by block
    allowed: np.ndarray | None  # [..., n_q or 1, n_k or 1] bool, the user's mask
    bias: np.ndarray | None  # [..., n_q or 1, n_k or 1] added to the logits
    causal_offset: int | None  # query i sees keys j <= i + offset; None = not causal
    logits_shape: tuple[int, ...]  # [..., n_q, n_k]
    cannot_overflow: bool  # a bound on |q·k| shows no block needs checking for inf/NaN

    @property
    def out_shape(self) -> tuple[int, ...]:  # [..., n_q, d_v]
        return self.logits_shape[:-1] + self.v.shape[-1:]


def _prepare(q, k, v, scale, mask, causal, similarity, temperature) -> _Problem:
    """Check every input once, before any arithmetic, and gather them."""
    dtype = result_dtype(q, k, v)
    # np.asarray keeps a memory-mapped float array mapped when its dtype fits.
    q, k, v = (np.asarray(m, dtype=dtype) for m in (q, k, v))
    _check_shapes(q, k, v)
    check_positive("scale", scale)
    check_positive("temperature", temperature)
    n_q, d_k, n_k = q.shape[-2], q.shape[-1], k.shape[-2]
    if similarity not in ("dot", "cosine"):
        raise AttnError(f"unknown similarity {similarity!r}", hint="use dot or cosine")
    if scale is None:
        scale = default_scale(d_k, similarity)
    offset = _causal_offset(n_q, n_k, "top-left" if causal is True else causal) if causal else None
    logits_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (n_q, n_k)
    allowed, bias = split_mask(mask)
    for m in (allowed, bias):
        if m is not None and not broadcasts_to(m.shape, logits_shape):
            raise ShapeError(
                f"the mask is {shape_text(m)} but the weights are {shape_text(logits_shape)} (queries × keys)",
                hint=f"give a {n_q}×{n_k} mask, or 1×{n_k} for every query",
            )
    allowed, bias = (None if m is None else np.atleast_2d(m) for m in (allowed, bias))
    cannot_overflow = _score_bound(q, k, similarity) * max(1.0, scale / temperature) < float(np.finfo(dtype).max)
    return _Problem(q, k, v, float(scale), float(temperature), similarity == "cosine",
                    allowed, None if bias is None else bias.astype(dtype), offset, logits_shape,
                    bool(cannot_overflow))


def _score_bound(q: np.ndarray, k: np.ndarray, similarity: Similarity) -> float:
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
    """The [rows, cols] block of a mask; an axis of length 1 broadcasts whole."""
    return m[..., rows if m.shape[-2] > 1 else slice(None), cols if m.shape[-1] > 1 else slice(None)]


def _block_logits(p: _Problem, rows: slice, cols: slice, keep: bool):
    """Logits of one block of queries and keys, masked: -inf = may not attend.

    -> logits [..., r, c], scores [..., r, c] (None unless ``keep``),
       allowed [..., r, c] bool (None when nothing is masked).
    With ``keep`` the unscaled scores are kept for ``Steps``; without, the
    scale is folded into the (small) query block so that the big block is
    written once by the matrix product and then only updated in place.
    """
    qb, kb = p.q[..., rows, :], p.k[..., cols, :]  # [..., r, d_k], [..., c, d_k]
    if p.cosine:
        qb, kb = unit_rows(qb), unit_rows(kb)  # row by row: the same as on whole matrices
    factor = p.scale / p.temperature  # a python float keeps float32 in float32
    kt = np.swapaxes(kb, -1, -2)  # [..., d_k, c]
    with np.errstate(over="ignore", invalid="ignore"):
        if keep:
            scores = qb @ kt
            logits = scores * factor
        else:
            scores, logits = None, (qb * factor) @ kt
    if not p.cannot_overflow:
        _check_scores(logits)
    allowed = None if p.allowed is None else _cut(p.allowed, rows, cols)
    if p.causal_offset is not None:
        i = np.arange(rows.start, rows.stop)[:, None]  # [r, 1]
        j = np.arange(cols.start, cols.stop)  # [c]
        causal = j <= i + p.causal_offset  # [r, c], as causal_mask
        allowed = causal if allowed is None else causal & allowed
    if p.bias is not None:
        logits += _cut(p.bias, rows, cols)
    if allowed is not None:
        allowed = np.broadcast_to(allowed, logits.shape)
        np.copyto(logits, -np.inf, where=~allowed)
    return logits, scores, allowed


def _check_scores(logits: np.ndarray) -> None:
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


@dataclass
class _Rows:
    """One block of queries attended over every key: the running state of an
    online softmax (as FlashAttention), and with ``keep`` the full steps."""

    acc: np.ndarray | None = None  # [..., r, d_v] Σ exp(logit - ref) · v
    total: np.ndarray | None = None  # [..., r, 1] Σ exp(logit - ref)
    peak: np.ndarray | None = None  # [..., r, 1] running max of the logits (-inf = none yet)
    steps: tuple | None = None  # (scores, logits, allowed, e) of a single key block


def _attend_rows(p: _Problem, rows: slice, key_block: int, keep: bool = False) -> _Rows:
    """softmax(logits) V for one block of queries, streaming keys in blocks.

    Each key block updates a running max and sum: earlier partial sums are
    multiplied by exp(old max - new max), so no row of the n_q×n_k matrix is
    ever held whole unless ``keep`` asks for it (one key block, for Steps).
    The weights are never normalised: the caller divides the output by the
    row sums, n_q·d_v divisions instead of n_q·n_k.
    """
    n_k = p.k.shape[-2]
    state = _Rows()
    for start in range(0, n_k, key_block):
        cols = slice(start, min(start + key_block, n_k))
        logits, scores, allowed = _block_logits(p, rows, cols, keep)
        peak = logits.max(axis=-1, keepdims=True)
        if state.peak is not None:
            peak = np.maximum(peak, state.peak)
        ref = np.where(np.isfinite(peak), peak, 0)  # all -inf so far: exp(-inf - 0) = 0
        e = np.subtract(logits, ref, out=None if keep else logits)
        np.exp(e, out=e)
        with np.errstate(over="ignore", invalid="ignore"):
            part = e @ p.v[..., cols, :]  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v]
        part_total = e.sum(axis=-1, keepdims=True)
        if state.acc is None:
            state.acc, state.total = part, part_total
        else:
            shrink = np.exp(state.peak - ref)  # old max -inf: 0, and acc is 0 anyway
            state.acc = state.acc * shrink + part
            state.total = state.total * shrink + part_total
        state.peak = peak
        if keep:
            state.steps = (scores, logits, allowed, e)
    return state


def _normalise(acc: np.ndarray, total: np.ndarray) -> np.ndarray:
    """acc / total, and 0 where a query could attend to nothing."""
    return np.divide(acc, total, out=np.zeros_like(acc), where=total > 0)


def _check_output(output: np.ndarray) -> None:
    if not np.isfinite(output).all():
        raise AttnError("the output overflows: V holds numbers too large to add up",
                        hint="scale V down, or pass float64 data")


def attention_steps(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: np.ndarray | None = None,
    causal: Causal = False,
    similarity: Similarity = "dot",
    temperature: float = 1.0,
) -> Steps:
    """softmax(QKᵀ · scale / temperature + mask) V, keeping every step.

    ``mask`` is [n_q, n_k] or [1, n_k] (one row for every query): boolean or
    0/1 = may attend, any other float = added to the logits. ``causal`` is
    False, True (= "top-left") or "bottom-right". A query that may attend to
    nothing gets zero weights and a zero output, never NaN.

    This is the kernel of ``attention_blocked`` run as a single block, so
    both give the same numbers; it holds every n_q×n_k step in memory.
    """
    p = _prepare(q, k, v, scale, mask, causal, similarity, temperature)
    n_q, n_k = p.logits_shape[-2:]
    state = _attend_rows(p, slice(0, n_q), max(n_k, 1), keep=True)
    scores, logits, allowed, e = state.steps
    output = _normalise(state.acc, state.total)
    _check_output(output)
    weights = _normalise(e, state.total)
    return Steps(scores, p.scale, logits, allowed, weights, output)


def attention_blocked(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: np.ndarray | None = None,
    causal: Causal = False,
    similarity: Similarity = "dot",
    temperature: float = 1.0,
    query_block: int | None = None,
    key_block: int | None = None,
    workers: int | None = None,
    progress=None,
) -> np.ndarray:
    """The output of ``attention_steps`` without ever holding n_q×n_k numbers.

    [..., n_q, d_k], [..., n_k, d_k], [..., n_k, d_v] -> [..., n_q, d_v].
    Queries go in blocks sized for the cache, spread over ``workers`` threads
    (numpy's matmul and ufuncs release the GIL, so exp runs on every core);
    keys stream in blocks of ``key_block`` through an online softmax. Memory is
    about workers · query_block · key_block numbers beyond the inputs, which
    may be memory-mapped. ``progress(done, total)`` is called after each
    query block, from the calling thread.
    """
    p = _prepare(q, k, v, scale, mask, causal, similarity, temperature)
    n_q, n_k = p.logits_shape[-2:]
    key_block = max(1, min(key_block or KEY_BLOCK, n_k))
    if query_block is None:
        batch = math.prod(p.logits_shape[:-2])
        fit = QUERY_BLOCK_BYTES // (key_block * p.q.dtype.itemsize * batch)
        query_block = min(max(fit, MIN_QUERY_BLOCK), MAX_QUERY_BLOCK)
    blocks = [slice(i, min(i + query_block, n_q)) for i in range(0, n_q, query_block)]
    output = np.empty(p.out_shape, dtype=p.q.dtype)  # [..., n_q, d_v]

    def attend(rows: slice) -> None:
        state = _attend_rows(p, rows, key_block)
        output[..., rows, :] = _normalise(state.acc, state.total)

    map_blocks(attend, blocks, workers, progress)
    _check_output(output)
    return output


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: np.ndarray | None = None,
    causal: Causal = False,
    need_weights: bool = True,
    similarity: Similarity = "dot",
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """softmax(QKᵀ/√d_k)V -> (output, weights); weights None if not needed.

    [n_q, d_k], [n_k, d_k], [n_k, d_v] -> [n_q, d_v], [n_q, n_k].
    As in seed 000, a single query [d_k] gives [d_v] and [n_k] weights, and
    scalar values [n_k] give one number per query.
    See ``attention_steps`` for the mask, causal and similarity options.
    With ``need_weights=False`` the blocked kernel runs (``attention_blocked``):
    the weights are never held whole, and every core is used.
    """
    q, v = np.asarray(q), np.asarray(v)
    one_query, scalar_values = q.ndim == 1, v.ndim == 1
    args = (q[None] if one_query else q, k, v[:, None] if scalar_values else v)
    options = dict(scale=scale, mask=mask, causal=causal, similarity=similarity, temperature=temperature)
    if need_weights:
        steps = attention_steps(*args, **options)
        output, weights = steps.output, steps.weights
    else:
        output, weights = attention_blocked(*args, **options), None
    if scalar_values:
        output = output[..., 0]
    if one_query:
        output = output[0]
        weights = None if weights is None else weights[0]
    return output, weights



