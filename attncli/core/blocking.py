"""How the kernel cuts its work into blocks: block sizes, heads several to
a block, window stacks, and the order the thread pool gets them in (``plan``).

Work is cut over batch × K/V heads × blocks of queries, each attended over
its keys in blocks; the blocks go to the pool costliest first, so that the
last ones handed out are small and no core waits long for the other.

Window stacks, one of the kernel's tuned choices: under a window each query
sees a narrow band of keys, lo ≤ j − i ≤ hi, so a block of queries needs few
keys, and a product per block would cost more in Python than in arithmetic.
Whole blocks of ``size`` queries whose keys i0 + lo .. i0 + size − 1 + hi
all lie in [0, n_k) see the same keys relative to themselves: ``count`` of
them are stacked on a new first axis against overlapping views of K and V
(``views``) and go through one product. The kernel makes their logits with
``combine`` told the first block's rows and keys, which is right for every
block only when the logits depend on j − i alone: ``stack_band`` checks
that before any block is stacked. The queries no stack takes (a window's
first W) go as ordinary blocks (``unstacked``, ``edge_rows``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from attncli.core.logits import Problem
from attncli.core.positions import band, visible_keys

# Block sizes. Small heads go several to a part, so that a block's logits
# ([heads, group, QUERY_BLOCK, KEY_BLOCK]) hold about BLOCK_NUMBERS numbers:
# each matrix product is large enough to run near the BLAS rate, and
# Python's cost per block is paid once for them all. Extra memory is about
# workers · BLOCK_NUMBERS numbers, whatever B, H, n_q and n_k are. Blocks of
# 256 × 1024 keep the work that causal attention cannot skip (the
# diagonal's partly masked blocks) small. Under a window, query blocks are
# smaller (``window_query_block``) and whole ones go many to a stack of up
# to STACK_NUMBERS logits.
QUERY_BLOCK = 256
KEY_BLOCK = 1024
BLOCK_NUMBERS = 1 << 20
STACK_NUMBERS = 1 << 19


@dataclass(frozen=True)
class Stack:
    """``count`` query blocks of ``size`` queries from ``start`` on, each of
    which sees the same band of keys relative to itself, wholly inside
    [0, n_k)."""

    start: int
    count: int
    size: int

    @property
    def rows(self) -> slice:
        """Every query of the stack."""
        return slice(self.start, self.start + self.count * self.size)

    def view(self, m: np.ndarray, where: tuple[slice, ...]) -> np.ndarray:
        """The stack's rows of m [..., n_q, m] (at ``where`` on the leading
        axes) as the stack lays them out: a view [count, ..., size, m]."""
        span = m[where + (..., self.rows, slice(None))]  # [..., count · size, m]
        return np.moveaxis(span.reshape(*span.shape[:-2], self.count, self.size, span.shape[-1]), -3, 0)


def stack_band(p: Problem, query_block: int, key_block: int) -> tuple[int, int] | None:
    """The band (lo, hi) of j − i that stacked blocks see, or None when
    blocks of ``query_block`` queries may not be stacked."""
    lo, hi = band(p.n_q, p.n_k, p.options.causal, p.options.window)
    if lo is None or hi is None:  # no window: a block's keys are not a narrow band
        return None
    if not p.logits_are_band_functions:  # combine is told only the first block's rows and keys
        return None
    if query_block + hi - lo > key_block:  # a block's keys at once, no more than a key block
        return None
    return lo, hi


def window_query_block(span: int, key_block: int, most: int) -> int:
    """Queries a block under a window of ``span`` keys: span / 8 (32 to
    ``most``) when its keys, size + span − 1, fit in a key block, so that
    the blocks can be stacked; each query then computes span + span / 8
    keys for the span it sees. Else span / 4, as a block then goes key block
    by key block."""
    eighth = min(most, max(32, span // 8))
    return eighth if eighth + span - 1 <= key_block else min(most, max(32, span // 4))


def inner_blocks(p: Problem, size: int, lo: int, hi: int) -> range:
    """The starts of the whole query blocks (multiples of ``size``) whose keys,
    i0 + lo .. i0 + size − 1 + hi, all lie in [0, n_k): those can be stacked
    (none when the band is empty)."""
    if hi < lo:
        return range(0)
    first = -(-max(0, -lo) // size) * size  # i0 + lo ≥ 0
    last = min(p.n_k - size - hi, p.n_q - size)  # i0 + size − 1 + hi ≤ n_k − 1, and a whole block
    return range(first, last + 1, size) if last >= first else range(0)


def stacks(inner: range, size: int, most: int, share: int = 1) -> list[Stack]:
    """The inner blocks in stacks of about equal counts, at most ``most`` blocks
    each, as many stacks as a multiple of ``share`` (the workers) when there
    are blocks enough, so that every worker gets as many."""
    n = len(inner)
    if n == 0:
        return []
    count = -(-n // max(1, most))  # ⌈n / most⌉ stacks
    count = min(n, -(-count // share) * share)
    counts = [n // count + (s < n % count) for s in range(count)]  # n split evenly: counts differ by 1 at most
    starts = accumulate(counts[:-1], initial=0)  # 0, c0, c0 + c1, ...
    return [Stack(inner[b], c, size) for b, c in zip(starts, counts, strict=True)]


def unstacked(n_q: int, inner: range, size: int, edge: int) -> list[slice]:
    """The query blocks no stack takes: blocks of ``size`` when nothing is
    stacked; else the rows before and after the stacks, in blocks of up to
    ``edge`` rows (``edge_rows``)."""
    if not inner:
        return [slice(i, min(i + size, n_q)) for i in range(0, n_q, size)]
    runs = ((0, inner.start), (inner[-1] + size, n_q))
    return [slice(i, min(i + edge, stop)) for start, stop in runs for i in range(start, stop, edge)]


def edge_rows(heads: int, size: int, width: int, key_block: int, most_rows: int, most_numbers: int) -> int:
    """Rows of a query block at the ends of a window (those no stack takes):
    ``size`` doubled up to ``most_rows`` while a part's block of logits,
    ``heads`` × rows × its keys (at most rows − size + ``width``,
    ``key_block`` at a time), stays within ``most_numbers``. The ends are a
    few blocks, each of which costs Python far more than its arithmetic
    (the 2-D window 256 at n = 4096: its first 256 queries as one block
    rather than 8 of 32)."""
    rows = size
    while 2 * rows <= most_rows and heads * 2 * rows * min(key_block, 2 * rows - size + width) <= most_numbers:
        rows *= 2
    return rows


def views(p: Problem, stack: Stack, lo_hi: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, slice, slice]:
    """The stack's queries [count, ..., size, d_k], their keys [count, ..., c, d_k]
    and values [count, ..., c, d_v], c = size + hi − lo (read-only views of
    Q, K and V; the keys and values overlap), and the first block's rows and
    keys, what ``combine`` is told."""
    lo, hi = lo_hi
    width = stack.size + hi - lo  # keys of one block: i0 + lo .. i0 + size − 1 + hi
    q = _stacked(p.q, stack.start, stack, stack.size)
    k, v = (_stacked(m, stack.start + lo, stack, width) for m in (p.k, p.v))
    rows, cols = slice(stack.start, stack.start + stack.size), slice(stack.start + lo, stack.start + lo + width)
    return q, k, v, rows, cols


def _stacked(m: np.ndarray, start: int, stack: Stack, length: int) -> np.ndarray:
    """[..., n, d] -> [count, ..., length, d]: rows start + b · size .. + length of m
    for each block b of the stack, as a read-only view (overlapping when length > size)."""
    m = m[..., start:, :]
    return np.lib.stride_tricks.as_strided(
        m,
        shape=(stack.count, *m.shape[:-2], length, m.shape[-1]),
        strides=(stack.size * m.strides[-2], *m.strides),
        writeable=False,
    )


Block = tuple[tuple[slice, ...], Problem, slice | Stack]  # where its output goes, its part, its queries


@dataclass
class Plan:
    """The blocks of work of one call, costliest first."""

    blocks: list[Block]
    key_block: int  # keys at a time
    stacked: tuple[int, int] | None  # the band (lo, hi) of j − i that stacked blocks see; None: no stacks


def plan(p: Problem, query_block: int | None, key_block: int | None, share: int) -> Plan:
    """``p`` cut into blocks of work for ``share`` workers: batch × K/V heads
    (several to a part when small) × query blocks, or stacks of them."""
    key_block = max(1, key_block or KEY_BLOCK)
    # Causal and the window: the keys j of query i are i + lo <= j <= i + hi (None: open).
    lo, hi = band(p.n_q, p.n_k, p.options.causal, p.options.window)
    span = None if lo is None or hi is None else max(1, hi - lo + 1)  # keys a query sees under a window
    fitting = QUERY_BLOCK if span is None else window_query_block(span, key_block, QUERY_BLOCK)
    query_block = max(1, query_block or fitting)
    keys = min(key_block, p.n_k, p.n_k if span is None else query_block + span)  # a query block's widest key block
    each = p.group * min(query_block, p.n_q) * keys  # logits of one head's block
    together = max(1, BLOCK_NUMBERS // max(1, each))
    stacked = stack_band(p, query_block, key_block)
    inner = range(0) if stacked is None else inner_blocks(p, query_block, *stacked)  # the stacked blocks' starts
    blocks: list[Block] = []
    for where, part in p.heads(together):
        heads = math.prod(part.logits_shape[:-2])
        edge = edge_rows(heads, query_block, keys, key_block, QUERY_BLOCK, BLOCK_NUMBERS)  # rows no stack takes
        blocks += [(where, part, rows) for rows in unstacked(p.n_q, inner, query_block, edge)]
        most = STACK_NUMBERS // max(1, heads * query_block * keys)  # query blocks a stack
        blocks += [(where, part, stack) for stack in stacks(inner, query_block, most, share)]
    blocks.sort(key=lambda block: _cost(block[1], block[2], stacked), reverse=True)  # causal: the bottom rows first
    return Plan(blocks, key_block, stacked)


def _cost(part: Problem, rows: slice | Stack, lo_hi: tuple[int, int] | None) -> int:
    """The logits a block of work computes, about: heads × queries × the keys they see."""
    heads = math.prod(part.logits_shape[:-2])
    if isinstance(rows, Stack):
        assert lo_hi is not None
        return heads * rows.count * rows.size * (rows.size + lo_hi[1] - lo_hi[0])
    queries = range(part.n_q)[rows]
    keys = visible_keys(queries, part.n_q, part.n_k, part.options.causal, part.options.window)
    return heads * len(queries) * len(keys)
