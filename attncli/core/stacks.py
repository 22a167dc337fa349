"""Window stacks, one of the kernel's tuned choices: under a window, many
small query blocks go through one matrix product.

Under a window each query sees a narrow band of keys, lo ≤ j − i ≤ hi, so a
block of queries needs few keys, and a product per block would cost more in
Python than in arithmetic. Whole blocks of ``size`` queries whose keys
i0 + lo .. i0 + size − 1 + hi all lie in [0, n_k) see the same keys relative
to themselves: ``count`` of them are stacked on a new first axis against
overlapping views of K and V (``views``) and go through one product. The
kernel makes their logits with ``combine`` told the first block's rows and
keys, which is right for every block only when the logits depend on j − i
alone: ``stack_band`` checks that before any block is stacked. The queries
no stack takes (a window's first W) go as ordinary blocks (``unstacked``,
``edge_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from attncli.core.logits import Problem
from attncli.core.positions import band


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
