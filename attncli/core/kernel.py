"""The blocked kernel: the output of the reference without ever holding the
n_q × n_k matrices, on every core.

Queries go in blocks sized for the cache, spread over a thread pool (numpy's
matmul and ufuncs release the GIL); keys stream in blocks through an online
softmax, as FlashAttention does. It is an implementation choice, tested
against ``reference``: both build their logits with ``logits.combine``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.core.logits import Problem, check_output, combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import map_blocks

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
class _Rows:
    """One block of queries attended over every key: the running state of an
    online softmax."""

    acc: np.ndarray | None = None  # [..., r, d_v] Σ exp(logit - ref) · v
    total: np.ndarray | None = None  # [..., r, 1] Σ exp(logit - ref)
    peak: np.ndarray | None = None  # [..., r, 1] running max of the logits (-inf = none yet)


def _attend_rows(p: Problem, rows: slice, key_block: int) -> _Rows:
    """softmax(logits) V for one block of queries, streaming keys in blocks.

    Each key block updates a running max and sum: earlier partial sums are
    multiplied by exp(old max - new max), so no row of the n_q×n_k matrix is
    ever held whole. The weights are never normalised: the caller divides the
    output by the row sums, n_q·d_v divisions instead of n_q·n_k.
    """
    state = _Rows()
    for start in range(0, p.n_k, key_block):
        cols = slice(start, min(start + key_block, p.n_k))
        logits, _ = combine(scores(p, rows, cols, p.factor), p, rows, cols)  # [..., r, c]
        peak = logits.max(axis=-1, keepdims=True)
        if state.peak is not None:
            peak = np.maximum(peak, state.peak)
        elif p.sinks is not None:  # a sink is one more logit of every row: it joins the running max...
            peak = np.maximum(peak, p.sinks)
        ref = np.where(np.isfinite(peak), peak, 0)  # all -inf so far: exp(-inf - 0) = 0
        e = np.subtract(logits, ref, out=logits)
        np.exp(e, out=e)
        with np.errstate(over="ignore", invalid="ignore"):
            part = e @ p.v[..., cols, :]  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v]
        part_total = e.sum(axis=-1, keepdims=True)
        if state.acc is None or state.total is None or state.peak is None:
            if p.sinks is not None:  # ...and the running sum, with no value
                part_total = part_total + np.exp(p.sinks - ref)
            state.acc, state.total = part, part_total
        else:
            shrink = np.exp(state.peak - ref)  # old max -inf: 0, and acc is 0 anyway
            state.acc = state.acc * shrink + part
            state.total = state.total * shrink + part_total
        state.peak = peak
    return state


def _normalise(acc: np.ndarray, total: np.ndarray) -> np.ndarray:
    """acc / total, and 0 where a query could attend to nothing."""
    return np.divide(acc, total, out=np.zeros_like(acc), where=total > 0)


def blocked(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    options: AttentionOptions | None = None,
    *,
    query_block: int | None = None,
    key_block: int | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """The output of ``reference`` without ever holding n_q×n_k numbers.

    [..., H_q, n_q, d_k], [..., H_kv, n_k, d_k], [..., H_kv, n_k, d_v] -> [..., H_q, n_q, d_v].
    Memory is about workers · query_block · key_block numbers beyond the
    inputs, which may be memory-mapped. ``progress(done, total)`` is called
    after each query block, from the calling thread.
    """
    p = prepare(q, k, v, options or AttentionOptions())
    key_block = max(1, min(key_block or KEY_BLOCK, p.n_k))
    if query_block is None:
        batch = math.prod(p.logits_shape[:-2])
        fit = QUERY_BLOCK_BYTES // (key_block * p.q.dtype.itemsize * batch)
        query_block = min(max(fit, MIN_QUERY_BLOCK), MAX_QUERY_BLOCK)
    blocks = [slice(i, min(i + query_block, p.n_q)) for i in range(0, p.n_q, query_block)]
    output = np.empty(p.out_shape, dtype=p.q.dtype)  # [..., n_q, d_v] (grouped with GQA)

    def attend(rows: slice) -> None:
        state = _attend_rows(p, rows, key_block)
        if state.acc is None or state.total is None:  # no keys at all: nothing to attend to
            output[..., rows, :] = 0
        else:
            output[..., rows, :] = _normalise(state.acc, state.total)

    map_blocks(attend, blocks, workers, progress)
    check_output(output)
    return p.ungroup(output)
