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
from itertools import accumulate

import numpy as np

from attncli.core.logits import EVERYTHING, Problem, check_output, combine, prepare, product, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import map_blocks, worker_count
from attncli.core.positions import band, band_weights, seen_by_all, visible_keys

# Block sizes of the kernel. Work is cut over batch × K/V heads × blocks of
# QUERY_BLOCK queries, each attended over keys in blocks of KEY_BLOCK; small
# heads go several to a part, so that a block's logits ([heads, group,
# QUERY_BLOCK, KEY_BLOCK]) hold about BLOCK_NUMBERS numbers: each matrix
# product is large enough to run near the BLAS rate and Python's per-block
# cost is paid once for them all (see benchmarks/README.md). Extra memory is
# about workers · BLOCK_NUMBERS numbers, whatever B, H, n_q and n_k are.
# Blocks of 256 × 1024 keep the work that causal attention cannot skip (the
# diagonal's partly masked blocks) small. Under a window of W keys, query
# blocks are W / 8 (32 to 256; _window_query_block): a block computes its
# W + W / 8 keys, little more than the W each query sees, and the blocks
# whose keys all exist go many to one product (_Stack), so that small blocks
# cost no Python each: up to STACK_NUMBERS logits a stack (half a block's),
# and as many stacks as a multiple of the workers, so that each gets as
# many. The queries no stack takes (a window's first W) go in blocks of up
# to QUERY_BLOCK (_edge_rows). The 2-D window 256 at n = 4096 was 3 stacks
# and 4 blocks of 64 queries; it is now 4 stacks and 1 block of 256
# (0.87–0.92× the time), in query blocks of 32 rather than 64 (0.92×, and
# 0.80× on [1, 16, 4096, 64]; benchmarks/README.md, fifth round).
QUERY_BLOCK = 256
KEY_BLOCK = 1024
BLOCK_NUMBERS = 1 << 20
STACK_NUMBERS = 1 << 19
LOG2E = math.log2(math.e)  # exp(x) = exp2(x · log2 e)


# exp(logit) neither overflows nor leaves the normal numbers while
# |logit| ≤ this (e^±44 in float32, e^±354 in float64; n_k · e^44 is still
# far from float32's 3.4e38): below it the kernel needs no running max.
def _exp_safe(dtype: np.dtype) -> float:
    return float(np.log(np.finfo(dtype).max)) / 2


@dataclass
class _Rows:
    """One block of queries attended over every key: the running state of an
    online softmax."""

    acc: np.ndarray | None = None  # [..., r, d_v] Σ exp(logit - ref) · v
    total: np.ndarray | None = None  # [..., r, 1] Σ exp(logit - ref)
    peak: np.ndarray | None = None  # [..., r, 1] running max of the logits (-inf = none yet); None with ref = 0


def _key_blocks(p: Problem, queries: range, key_block: int) -> list[tuple[slice, bool]]:
    """The keys some query of ``queries`` may see under causal and the window,
    in blocks of at most ``key_block``: [(cols, inside)], inside when every
    query sees every key of the block (no masking). A block that is mostly
    inside is cut at the edges of the keys every query sees, so that only
    its edges are masked."""
    causal, window = p.options.causal, p.options.window
    keys = visible_keys(queries, p.n_q, p.n_k, causal, window)
    every = seen_by_all(queries, p.n_q, p.n_k, causal, window)
    blocks = []
    for start in range(keys.start, keys.stop, key_block):
        stop = min(start + key_block, keys.stop)
        low, high = max(start, every.start), min(stop, every.stop)  # the part every query sees
        if high - low >= stop - start:
            blocks.append((slice(start, stop), True))
        elif 2 * (high - low) >= stop - start:
            cuts = [(start, low, False), (low, high, True), (high, stop, False)]
            blocks.extend((slice(a, b), inside) for a, b, inside in cuts if b > a)
        else:
            blocks.append((slice(start, stop), False))
    return blocks


def _attend_rows(p: Problem, rows: slice, key_block: int, bounded: bool, base2: bool) -> _Rows:
    """softmax(logits) V for one block of queries, streaming keys in blocks.

    Only the keys some query of the block may see under causal and the window
    are computed; a key block every query may see wholly skips the masking.

    softmax(x) = exp(x − ref) / Σ exp(x − ref) for any ref. When every logit is
    known to be small (``bounded``: |logit| ≤ ``_exp_safe``), ref = 0: each key
    block just adds its exp(logits) · V and row sums, with no max taken.
    Otherwise ref is the running max, as FlashAttention's: each key block
    updates it, and earlier partial sums are multiplied by exp(old max − new
    max). No row of the n_q × n_k matrix is ever held whole. The weights are
    never normalised: the caller divides the output by the row sums, n_q·d_v
    divisions instead of n_q·n_k.

    ``base2`` (``_attend_block``): logits in base 2 through exp2, the band
    as 0/1 weights.
    """
    state = _Rows()
    for cols, inside in _key_blocks(p, range(rows.start, rows.stop), key_block):
        halves = None if inside or not bounded else _halves(p, rows, cols)
        if halves is None:
            _attend_block(state, p, rows, cols, inside, bounded, base2)
            continue
        _start(state, p, rows)  # the diagonal: each half of the queries against the keys it may see
        assert state.acc is not None and state.total is not None
        for half, keys in halves:
            local = slice(half.start - rows.start, half.stop - rows.start)
            sums = _Rows(state.acc[..., local, :], state.total[..., local, :])  # views: the half's rows of the block
            _attend_block(sums, p, half, keys, False, bounded, base2)
    return state


def _attend_block(state: _Rows, p: Problem, rows: slice, cols: slice, inside: bool, bounded: bool, base2: bool) -> None:
    """One block of queries against one block of keys, added to ``state``;
    ``inside``: every query of the block sees every key of it.

    ``base2`` (``_base2``) and no mask: the logits are made in base 2, log2(e)
    folded into the factor, and taken through exp2, which numpy runs about
    twice as fast as exp in float32: exp2(x · log2 e) = exp(x). A block the
    band cuts (causal's diagonal, a window's edges) is then multiplied by the
    band's 0/1 weights rather than set to −inf first: numpy's exp2 takes a
    slow path on −inf (1.2 ms against exp's 0.46 ms on a 1 M block, a part
    masked). Otherwise ``combine`` applies every option in base e.

    The keys-first layout (``logits.product``) only when bounded: a running
    max taken along its strided axis and ALiBi's distances (row-major) cost
    more than its product saves (ALiBi causal [1, 16, 4096, 64]: 1.5× the
    CPU time).
    """
    if base2 and p.mask is None:
        banded = not inside and (p.options.causal is not None or p.options.window is not None)
        _add_base2(state, p.q[..., rows, :], p.k[..., cols, :], p.v[..., cols, :], p, rows, cols, banded)
        return
    logits, _ = combine(scores(p, rows, cols, p.factor, keys_first=bounded), p, rows, cols, inside)  # [..., r, c]
    _add(state, logits, p.v[..., cols, :], p, bounded, sure=inside and p.mask is None and p.bias is None)


def _add_base2(
    state: _Rows, qb: np.ndarray, kb: np.ndarray, vb: np.ndarray, p: Problem, rows: slice, cols: slice, banded: bool
) -> None:
    """``_add`` of a block made in base 2 and keys first (``_attend_block``):
    queries [..., r, d_k] against keys [..., c, d_k] and values [..., c, d_v],
    the band's 0/1 weights of ``rows`` × ``cols`` multiplied in when ``banded``."""
    logits, _ = combine(
        product(qb, kb, p.options.similarity, p.factor * LOG2E, keys_first=True), p, rows, cols, inside=True
    )  # [..., r, c] in base 2, laid out keys first
    keep = (
        None
        if not banded
        else band_weights(
            range(p.n_q)[rows],
            range(p.n_k)[cols],
            p.n_q,
            p.n_k,
            p.options.causal,
            p.options.window,
            logits.dtype,
            keys_first=True,
        )
    )  # [r, c] 1 or 0, laid out as the logits are
    _add(state, logits, vb, p, True, sure=False, base2=True, keep=keep)


def _halves(p: Problem, rows: slice, cols: slice) -> list[tuple[slice, slice]] | None:
    """A partly masked key block cut by halves of the queries, each against
    the keys some query of it may see, when that spares at least a fifth of
    the block's logits (causal's diagonal: a quarter); else None."""
    r = rows.stop - rows.start
    if r < 64:
        return None
    middle = rows.start + r // 2
    halves = []
    for half in (slice(rows.start, middle), slice(middle, rows.stop)):
        seen = visible_keys(range(half.start, half.stop), p.n_q, p.n_k, p.options.causal, p.options.window)
        keys = slice(max(cols.start, seen.start), min(cols.stop, seen.stop))
        if keys.stop > keys.start:
            halves.append((half, keys))
    kept = sum((h.stop - h.start) * (k.stop - k.start) for h, k in halves)
    return halves if 5 * kept <= 4 * r * (cols.stop - cols.start) else None


def _start(state: _Rows, p: Problem, rows: slice) -> None:
    """Bounded only: the sums of a block of queries, 0 (and a sink's exp(sink)), to add to in parts."""
    if state.acc is None or state.total is None:
        r = rows.stop - rows.start
        lead = p.logits_shape[:-2]
        state.acc = np.zeros((*lead, r, p.v.shape[-1]), dtype=p.q.dtype)
        state.total = np.zeros((*lead, r, 1), dtype=p.q.dtype)
        if p.sinks is not None:
            state.total += np.exp(p.sinks)


def _add(
    state: _Rows,
    logits: np.ndarray,
    values: np.ndarray,
    p: Problem,
    bounded: bool,
    sure: bool,
    base2: bool = False,
    keep: np.ndarray | None = None,
) -> None:
    """One key block's share of the online softmax: logits [..., r, c] (used
    up), values [..., c, d_v]. ``sure``: no row of the block is all −inf.
    ``base2``: the logits are in base 2 (bounded only), taken through exp2.
    ``keep``: [r, c] 1 or 0, multiplied into exp(logits) (bounded only)."""
    shrink: np.ndarray | None = None  # [..., r, 1] exp(old ref − new ref), for the sums so far
    ref: np.ndarray | float = 0.0  # [..., r, 1] what each row's logits are taken from
    if not bounded:
        peak = logits.max(axis=-1, keepdims=True)  # [..., r, 1]
        if state.peak is not None:
            peak = np.maximum(peak, state.peak)
        elif p.sinks is not None:  # a sink is one more logit of every row: it joins the running max...
            peak = np.maximum(peak, p.sinks)
        ref = peak if sure else np.where(np.isfinite(peak), peak, 0)  # a row of -inf so far: exp(-inf - 0) = 0
        if state.peak is not None:
            shrink = np.exp(state.peak - ref)  # old max -inf: 0, and acc is 0 anyway
        state.peak = peak
    with np.errstate(over="ignore", invalid="ignore"):  # −1e308 − 1e308 = −inf: weight 0, as it should be
        if base2:
            e = np.exp2(logits, out=logits)
        else:
            e = np.exp(logits if bounded else np.subtract(logits, ref, out=logits), out=logits)
        if keep is not None:
            e *= keep
        part = e @ values  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v]
    # The row sums as a matrix-vector product: BLAS's gemv takes 0.07 ms on a
    # 1 M float32 block where e.sum takes 0.16 ms (and along the kernel's
    # keys-first layout, numpy's sum adds row after row, 1.6e-6 from the
    # float64 sum where gemv is 5e-7).
    part_total = np.matmul(e, np.ones(e.shape[-1], dtype=e.dtype))[..., None]  # [..., r, 1]
    if state.acc is None or state.total is None:
        if p.sinks is not None:  # ...and the sum, with no value
            part_total = part_total + np.exp(p.sinks - ref)
        state.acc, state.total = part, part_total
    else:
        if shrink is not None:
            state.acc *= shrink
            state.total *= shrink
        state.acc += part
        state.total += part_total


@dataclass(frozen=True)
class _Stack:
    """``count`` query blocks of ``size`` queries from ``start`` on, each of
    which sees the same band of keys relative to itself (lo ≤ j − i ≤ hi,
    ``positions.band``), wholly inside [0, n_k): they go through one product,
    stacked on a new first axis, rather than one small product each."""

    start: int
    count: int
    size: int


def _attend_stack(p: Problem, stack: _Stack, lo_hi: tuple[int, int], bounded: bool, base2: bool) -> _Rows:
    """softmax(logits) V for a stack of query blocks under a window: queries
    [count, ..., size, d_k] against their keys [count, ..., c, d_k], views of
    K and V that overlap, c = size + hi − lo.

    ``combine`` is told the first block's rows and keys; the others lie
    further along the band by whole blocks, and what it applies there (the
    window and causal, ALiBi, the soft-cap, sinks) depends only on j − i, so
    it is the same for each (no mask or bias here: those depend on i and j).

    ``base2``: in base 2 through exp2, the band as 0/1 weights, keys first,
    as in ``_attend_block``. On one thread, 2-D window 256 at n = 4096:
    5.6–5.7 ms of CPU against 5.9–6.2 ms with the band as −inf and exp;
    window 256 on [1, 16, 4096, 64]: 85–89 ms keys first against 94–101 ms
    row-major (the stacked products are small: then 64 queries × 320 keys ×
    d = 64 a block; 32 × 288 since).
    """
    lo, hi = lo_hi
    width = stack.size + hi - lo  # keys of one block: i0 + lo .. i0 + size − 1 + hi
    q = _stacked(p.q, stack.start, stack, stack.size)  # [count, ..., size, d_k]
    k, v = (_stacked(m, stack.start + lo, stack, width) for m in (p.k, p.v))  # [count, ..., c, d]
    rows, cols = slice(stack.start, stack.start + stack.size), slice(stack.start + lo, stack.start + lo + width)
    state = _Rows()
    if base2:
        _add_base2(state, q, k, v, p, rows, cols, banded=True)
        return state
    logits, _ = combine(product(q, k, p.options.similarity, p.factor), p, rows, cols)  # [count, ..., size, c]
    _add(state, logits, v, p, bounded, sure=False)  # the band's edges are −inf here: exp, not exp2
    return state


def _stacked(m: np.ndarray, start: int, stack: _Stack, length: int) -> np.ndarray:
    """[..., n, d] -> [count, ..., length, d]: rows start + b · size .. + length of m
    for each block b of the stack, as a read-only view (overlapping when length > size)."""
    m = m[..., start:, :]
    return np.lib.stride_tricks.as_strided(
        m,
        shape=(stack.count, *m.shape[:-2], length, m.shape[-1]),
        strides=(stack.size * m.strides[-2], *m.strides),
        writeable=False,
    )


def _inner_blocks(p: Problem, size: int, lo: int, hi: int) -> range:
    """The starts of the whole query blocks (multiples of ``size``) whose keys,
    i0 + lo .. i0 + size − 1 + hi, all lie in [0, n_k): those can be stacked
    (none when the band is empty)."""
    if hi < lo:
        return range(0)
    first = -(-max(0, -lo) // size) * size  # i0 + lo ≥ 0
    last = min(p.n_k - size - hi, p.n_q - size)  # i0 + size − 1 + hi ≤ n_k − 1, and a whole block
    return range(first, last + 1, size) if last >= first else range(0)


def _window_query_block(span: int, key_block: int) -> int:
    """Queries a block under a window of ``span`` keys: span / 8 (32 to
    QUERY_BLOCK) when its keys, size + span − 1, fit in a key block, so that
    the blocks can be stacked; else span / 4, as a block then goes key block
    by key block. Measured (fifth round): span / 8 takes 0.73–1.00× the
    time of span / 4 for W = 256 to 896 at n = 4096, d = 64 and 128; at
    W = 1024 it would no longer stack, and took 1.4× the time in 2-D."""
    eighth = min(QUERY_BLOCK, max(32, span // 8))
    return eighth if eighth + span - 1 <= key_block else min(QUERY_BLOCK, max(32, span // 4))


def _unstacked(n_q: int, inner: range, size: int, edge: int) -> list[slice]:
    """The query blocks no stack takes: blocks of ``size`` when nothing is
    stacked; else the rows before and after the stacks, in blocks of up to
    ``edge`` rows (``_edge_rows``)."""
    if not inner:
        return [slice(i, min(i + size, n_q)) for i in range(0, n_q, size)]
    runs = ((0, inner.start), (inner[-1] + size, n_q))
    return [slice(i, min(i + edge, stop)) for start, stop in runs for i in range(start, stop, edge)]


def _edge_rows(heads: int, size: int, width: int, key_block: int) -> int:
    """Rows of a query block at the ends of a window (those no stack takes):
    ``size`` doubled up to QUERY_BLOCK while a part's block of logits, ``heads``
    × rows × its keys (at most rows − size + ``width``, ``key_block`` at a
    time), stays within BLOCK_NUMBERS. The ends are a few blocks, each of
    which costs Python far more than its arithmetic: 2-D window 256 at
    n = 4096, its 256 first queries as 1 block rather than 8 of 32."""
    rows = size
    while 2 * rows <= QUERY_BLOCK and heads * 2 * rows * min(key_block, 2 * rows - size + width) <= BLOCK_NUMBERS:
        rows *= 2
    return rows


def _stacks(inner: range, size: int, most: int, share: int = 1) -> list[_Stack]:
    """The inner blocks in stacks of about equal counts, at most ``most`` blocks
    each, as many stacks as a multiple of ``share`` (the workers) when there
    are blocks enough, so that every worker gets as many."""
    n = len(inner)
    if n == 0:
        return []
    stacks = -(-n // max(1, most))  # ⌈n / most⌉
    stacks = min(n, -(-stacks // share) * share)
    counts = [n // stacks + (s < n % stacks) for s in range(stacks)]  # n split evenly: counts differ by 1 at most
    starts = accumulate(counts[:-1], initial=0)  # 0, c0, c0 + c1, ...
    return [_Stack(inner[b], count, size) for b, count in zip(starts, counts, strict=True)]


def _logit_bound(p: Problem) -> float:
    """An upper bound on every |logit| (and sink) when it is known, else inf.

    Scores: |factor · q·k| ≤ |factor| · max ‖q_i‖ · max ‖k_j‖ (``prepare``'s
    bound); a soft-cap bounds them by the cap. A bias or ALiBi may add
    anything: inf. NaN (from NaN inputs) compares false, as inf does.
    """
    if p.bias is not None or p.alibi is not None:
        return np.inf
    bound = abs(p.factor) * p.score_bound
    if p.options.softcap is not None:
        bound = min(bound, abs(float(p.options.softcap)))
    if p.sinks is not None:
        bound = max(bound, float(np.abs(p.sinks).max()))
    return bound


def _base2(p: Problem, bounded: bool) -> bool:
    """Whether the logits may be made in base 2 (log2(e) in the factor) and
    taken through exp2: when bounded (no running max, no bias or ALiBi, which
    ``combine`` adds in base e) and with no soft-cap (a tanh of the base-e
    scores). The band is then applied as 0/1 weights after exp2
    (``_attend_block``, ``_attend_stack``); a block under a mask keeps exp and −inf. A sink stays
    in base e: it joins the sum as exp(sink). float32 only: numpy's float64
    exp2 is the slower (1.65 ms against exp's 1.06 ms on a 1 M block)."""
    return bounded and p.options.softcap is None and p.q.dtype == np.float32


def _cost(part: Problem, rows: slice | _Stack, band: tuple[int, int] | None) -> int:
    """The logits a block of work computes, about: heads × queries × the keys they see."""
    heads = math.prod(part.logits_shape[:-2])
    if isinstance(rows, _Stack):
        assert band is not None
        return heads * rows.count * rows.size * (rows.size + band[1] - band[0])
    queries = range(part.n_q)[rows]
    keys = visible_keys(queries, part.n_q, part.n_k, part.options.causal, part.options.window)
    return heads * len(queries) * len(keys)


def _normalise(acc: np.ndarray, total: np.ndarray, out: np.ndarray) -> None:
    """out = acc / total, and 0 where a query could attend to nothing:
    [..., r, d_v] times the [..., r, 1] reciprocals, written in place."""
    inverse = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)  # [..., r, 1]
    np.multiply(acc, inverse, out=out)


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
    return p.ungroup(forward(p, query_block=query_block, key_block=key_block, workers=workers, progress=progress))


def forward(
    p: Problem,
    *,
    query_block: int | None = None,
    key_block: int | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    lse: np.ndarray | None = None,
) -> np.ndarray:
    """``blocked`` on a prepared problem -> the output [..., n_q, d_v], grouped
    as ``p`` is. ``lse`` [..., n_q, 1] (``p.logits_shape[:-1] + (1,)``), when
    given, is filled with each row's log-sum-exp, log(Σ_j exp(logit_j) + exp(sink)),
    what the backward pass recomputes the weights from (``grad``): −inf for a
    row that may attend to nothing (and has no sink)."""
    bounded = _logit_bound(p) <= _exp_safe(p.q.dtype)  # then no running max is needed
    base2 = _base2(p, bounded)
    key_block = max(1, key_block or KEY_BLOCK)
    # Causal and the window: the keys j of query i are i + lo <= j <= i + hi (None: open).
    lo, hi = band(p.n_q, p.n_k, p.options.causal, p.options.window)
    span = None if lo is None or hi is None else max(1, hi - lo + 1)  # keys a query sees under a window
    query_block = max(1, query_block or (QUERY_BLOCK if span is None else _window_query_block(span, key_block)))
    # The work: batch × K/V heads (several to a part when small) × query blocks, on one pool.
    keys = min(key_block, p.n_k, p.n_k if span is None else query_block + span)  # a query block's widest key block
    each = p.group * min(query_block, p.n_q) * keys  # logits of one head's block
    together = max(1, BLOCK_NUMBERS // max(1, each))
    # Under a window, whole query blocks whose keys all exist go several to a
    # product (_Stack), taking all their keys at once: when those fit in a key
    # block, and with no mask or bias (they depend on i and j, not j − i).
    stacked: tuple[int, int] | None = None  # the band (lo, hi) of stacked blocks
    if lo is not None and hi is not None and p.mask is None and p.bias is None and query_block + hi - lo <= key_block:
        stacked = lo, hi
    inner = range(0) if stacked is None else _inner_blocks(p, query_block, *stacked)  # their starts
    blocks: list[tuple[tuple[slice, ...], Problem, slice | _Stack]] = []
    share = worker_count(workers)
    for where, part in p.heads(together):
        heads = math.prod(part.logits_shape[:-2])
        edge = _edge_rows(heads, query_block, keys, key_block)  # rows of the blocks no stack takes
        blocks += [(where, part, rows) for rows in _unstacked(p.n_q, inner, query_block, edge)]
        per_block = heads * query_block * keys  # logits of one query block of the part
        most = STACK_NUMBERS // max(1, per_block)  # query blocks a stack
        blocks += [(where, part, stack) for stack in _stacks(inner, query_block, most, share)]
    # Costliest first (causal: the bottom query blocks see the most keys), so
    # that the last blocks the pool hands out are small and no core waits
    # long for the other at the end (measured: 2.4–7.7 ms of one core idle
    # at the end in the order of the rows, about 1 ms in this one).
    blocks.sort(key=lambda block: _cost(block[1], block[2], stacked), reverse=True)
    output = np.empty(p.out_shape, dtype=p.q.dtype)  # [..., n_q, d_v] (grouped with GQA)

    def attend(block: tuple[tuple[slice, ...], Problem, slice | _Stack]) -> None:
        where, part, rows = block
        out = _rows_of(output, where, rows)  # [..., r, d_v] a view ([count, ..., size, d_v] for a stack)
        if isinstance(rows, _Stack):
            assert stacked is not None
            state = _attend_stack(part, rows, stacked, bounded, base2)
        else:
            state = _attend_rows(part, rows, key_block, bounded, base2)
        if state.acc is None or state.total is None:  # no keys to see: nothing to attend to
            out[...] = 0
        else:
            _normalise(state.acc, state.total, out)
        check_output(out)  # here, on every core, rather than over the whole output after
        if lse is not None:
            _log_sum_exp(state, _rows_of(lse, where, rows), part.sinks)

    map_blocks(attend, blocks, workers, progress)
    return output


def _rows_of(m: np.ndarray, where: tuple[slice, ...], rows: slice | _Stack) -> np.ndarray:
    """The view of m [..., n_q, m] that a block of work writes: [..., r, m], or
    [count, ..., size, m] for a stack, as its state is laid out."""
    if not isinstance(rows, _Stack):
        return m[where + (..., rows, EVERYTHING)]
    whole = slice(rows.start, rows.start + rows.count * rows.size)
    span = m[where + (..., whole, EVERYTHING)]  # [..., count · size, m]
    return np.moveaxis(span.reshape(*span.shape[:-2], rows.count, rows.size, span.shape[-1]), -3, 0)


def _log_sum_exp(state: _Rows, out: np.ndarray, sinks: np.ndarray | None) -> None:
    """out = log(total) + ref, each row's log(Σ exp(logit) + exp(sink)), in place:
    [..., r, 1]; −inf (log 0) for a row that may attend to nothing and has no sink."""
    if state.total is None:  # no keys to see: the sink alone, if any
        out[...] = -np.inf if sinks is None else sinks
        return
    with np.errstate(divide="ignore"):
        np.log(state.total, out=out)
    if state.peak is not None:
        out += np.where(np.isfinite(state.peak), state.peak, 0.0)  # the ref _add took the sums from
