"""The blocked kernel: the output of the reference without ever holding the
n_q × n_k matrices, on every core.

Queries go in blocks sized for the cache, spread over a thread pool (numpy's
matmul and ufuncs release the GIL); keys stream in blocks through an online
softmax, as FlashAttention does. It is an implementation choice, tested
against ``reference``: both build their logits with ``logits.combine``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.core.logits import EVERYTHING, Problem, check_output, combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import map_blocks
from attncli.core.positions import all_visible, visible_keys

# Block sizes of the kernel. Work is cut over batch × K/V heads × blocks of
# QUERY_BLOCK queries, each attended over keys in blocks of KEY_BLOCK; small
# heads go several to a part, so that a block's logits ([heads, group,
# QUERY_BLOCK, KEY_BLOCK]) hold about BLOCK_NUMBERS numbers: each matrix
# product is large enough to run near the BLAS rate and Python's per-block
# cost is paid once for them all (see benchmarks/README.md). Extra memory is
# about workers · BLOCK_NUMBERS numbers, whatever B, H, n_q and n_k are.
# Blocks of 256 × 1024 keep the work that causal and windowed attention
# cannot skip (the diagonal's partly masked blocks) small.
QUERY_BLOCK = 256
KEY_BLOCK = 1024
BLOCK_NUMBERS = 1 << 20


@dataclass
class _Rows:
    """One block of queries attended over every key: the running state of an
    online softmax."""

    acc: np.ndarray | None = None  # [..., r, d_v] Σ exp(logit - ref) · v
    total: np.ndarray | None = None  # [..., r, 1] Σ exp(logit - ref)
    peak: np.ndarray | None = None  # [..., r, 1] running max of the logits (-inf = none yet)


def _attend_rows(p: Problem, rows: slice, key_block: int) -> _Rows:
    """softmax(logits) V for one block of queries, streaming keys in blocks.

    Only the keys some query of the block may see under causal and the window
    are computed; a key block every query may see wholly skips the masking.

    Each key block updates a running max and sum: earlier partial sums are
    multiplied by exp(old max - new max), so no row of the n_q×n_k matrix is
    ever held whole. The weights are never normalised: the caller divides the
    output by the row sums, n_q·d_v divisions instead of n_q·n_k.
    """
    state = _Rows()
    causal, window = p.options.causal, p.options.window
    queries = range(rows.start, rows.stop)
    keys = visible_keys(queries, p.n_q, p.n_k, causal, window)
    for start in range(keys.start, keys.stop, key_block):
        cols = slice(start, min(start + key_block, keys.stop))
        inside = all_visible(queries, range(cols.start, cols.stop), p.n_q, p.n_k, causal, window)
        logits, _ = combine(scores(p, rows, cols, p.factor), p, rows, cols, inside)  # [..., r, c]
        peak = logits.max(axis=-1, keepdims=True)
        if state.peak is not None:
            peak = np.maximum(peak, state.peak)
        elif p.sinks is not None:  # a sink is one more logit of every row: it joins the running max...
            peak = np.maximum(peak, p.sinks)
        ref = np.where(np.isfinite(peak), peak, 0)  # all -inf so far: exp(-inf - 0) = 0
        with np.errstate(over="ignore", invalid="ignore"):  # −1e308 − 1e308 = −inf: weight 0, as it should be
            e = np.subtract(logits, ref, out=logits)
            np.exp(e, out=e)
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
    key_block = max(1, key_block or KEY_BLOCK)
    query_block = max(1, query_block or QUERY_BLOCK)
    # The work: every batch × K/V head × block of queries, on one pool.
    # The work: batch × K/V heads (several to a part when small) × query blocks, on one pool.
    each = p.group * min(query_block, p.n_q) * min(key_block, p.n_k)  # logits of one head's block
    together = max(1, BLOCK_NUMBERS // max(1, each))
    blocks = [(where, part, slice(i, min(i + query_block, p.n_q)))
              for where, part in p.heads(together) for i in range(0, p.n_q, query_block)]
    output = np.empty(p.out_shape, dtype=p.q.dtype)  # [..., n_q, d_v] (grouped with GQA)

    def attend(block: tuple[tuple[slice, ...], Problem, slice]) -> None:
        where, part, rows = block
        state = _attend_rows(part, rows, key_block)
        if state.acc is None or state.total is None:  # no keys to see: nothing to attend to
            output[where + (..., rows, EVERYTHING)] = 0
        else:
            output[where + (..., rows, EVERYTHING)] = _normalise(state.acc, state.total)

    map_blocks(attend, blocks, workers, progress)
    check_output(output)
    return p.ungroup(output)
