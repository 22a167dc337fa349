"""The blocked kernel: the output of the reference without ever holding the
n_q × n_k matrices, on every core.

``online_softmax``, first below, is the algorithm (FlashAttention's), and
the path taken when no tuned choice applies. ``forward`` cuts the work into
blocks of queries (``blocking.plan``) for a thread pool (numpy's matmul and
ufuncs release the GIL) and streams each block's keys through the softmax
it chose for the call. The tuned choices sit beside the algorithm, each
taken only where the code that chooses it checks what it relies on:

- ``_from_zero``: no running max, when every |logit| is known to be small
  (``_choose``); the scores laid out keys first, and a key block the band
  cuts through taken by halves of the queries (``_halves``).
- ``_exp_base2``: ``_from_zero`` in base 2 through exp2, when ``combine``
  is exact in base 2 (``_choose``); the band as 0/1 weights after exp2.
- window stacks (``blocking.py``): many small query blocks through one
  product, when the logits depend on j − i alone (``blocking.stack_band``).

An implementation choice, tested against the reference: both make their
logits with ``logits.combine``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

import numpy as np

from attncli.core.blocking import Block, Stack, plan, views
from attncli.core.logits import EVERYTHING, Problem, check_output, combine, prepare, product, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import map_blocks, worker_count
from attncli.core.positions import band_weights, seen_by_all, visible_keys


def online_softmax(
    blocks: Iterable[tuple[np.ndarray, np.ndarray]],
    sinks: np.ndarray | None,
    out: np.ndarray,
    lse: np.ndarray | None = None,
) -> None:
    """out = softmax(logits) V for a block of queries whose keys come block by
    block: FlashAttention's online softmax.

    ``blocks``: (logits [..., r, c], values [..., c, d_v]) for each block of
    keys (the logits are used up); ``sinks``: [..., H or 1, 1, 1] one logit
    per head that joins every row's softmax with no value; ``out``:
    [..., r, d_v]; ``lse``, when given, [..., r, 1]: each row's
    log(Σ exp(logit) + exp(sink)), what the backward recomputes the weights
    from (``grad_blocks``).

    softmax(x) = exp(x − m) / Σ exp(x − m) for any m. Here m is the running
    max, so that no exp overflows: each block raises it, and the sums so far
    are multiplied by exp(old m − new m). No row of the n_q × n_k weights is
    held whole, and the weights are never normalised: the output is divided
    by the row sums at the end (n_q · d_v divisions, not n_q · n_k), and a
    query that may attend to nothing gets zeros.
    """
    acc: np.ndarray | None = None  # [..., r, d_v] Σ exp(x − m) · v
    total: np.ndarray | None = None  # [..., r, 1] Σ exp(x − m)
    peak: np.ndarray | None = None  # [..., r, 1] m, the max so far (−∞: none yet)
    for logits, values in blocks:
        new = logits.max(axis=-1, keepdims=True)  # [..., r, 1]
        if peak is not None:
            new = np.maximum(new, peak)
        elif sinks is not None:  # a sink is one more logit of each row: it starts the running max...
            new = np.maximum(new, sinks)
        ref = np.where(np.isfinite(new), new, 0)  # a row of −∞ only so far: exp(−∞ − 0) = 0
        with np.errstate(over="ignore", invalid="ignore"):  # −1e308 − 1e308 = −∞: weight 0, as it should be
            e = np.exp(np.subtract(logits, ref, out=logits), out=logits)  # [..., r, c]
            part = e @ values  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v]
        part_total = _row_sums(e)  # [..., r, 1]
        if acc is None or total is None or peak is None:
            if sinks is not None:  # ...and the running sum, with no value
                part_total = part_total + np.exp(sinks - ref)
            acc, total = part, part_total
        else:
            shrink = np.exp(peak - ref)  # [..., r, 1] the sums so far were taken from the old max (−∞: 0)
            acc *= shrink
            total *= shrink
            acc += part
            total += part_total
        peak = new
        del logits, e  # before the next block's logits are made, which may then reuse their memory
    _write(acc, total, out)
    if lse is not None:
        _log_sum_exp(total, peak, sinks, lse)


def key_blocks(p: Problem, rows: slice, key_block: int) -> list[tuple[slice, bool]]:
    """The keys some query of ``rows`` may see under causal and the window,
    in blocks of at most ``key_block``: [(cols, inside)], inside when every
    query sees every key of the block (no masking). The keys no query may
    see are never computed. A block that is mostly inside is cut at the
    edges of the keys every query sees, so that only its edges are masked."""
    causal, window = p.options.causal, p.options.window
    queries = range(rows.start, rows.stop)
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


def _logit_blocks(p: Problem, rows: slice, key_block: int) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """``online_softmax``'s blocks for the queries ``rows``, made one at a time:
    logits [..., r, c] (``combine``'s) and values [..., c, d_v]."""
    for cols, inside in key_blocks(p, rows, key_block):
        yield combine(scores(p, rows, cols, p.factor), p, rows, cols, inside)[0], p.v[..., cols, :]


def _row_sums(e: np.ndarray) -> np.ndarray:
    """[..., r, c] -> [..., r, 1], as a matrix-vector product: BLAS's gemv
    is faster than ``e.sum`` and, along the keys-first layout (where numpy's
    sum adds row after row), closer to the exact sum."""
    return np.matmul(e, np.ones(e.shape[-1], dtype=e.dtype))[..., None]


def _write(acc: np.ndarray | None, total: np.ndarray | None, out: np.ndarray) -> None:
    """out = acc / total: [..., r, d_v] times the [..., r, 1] reciprocals, in
    place; 0 where a query may attend to nothing (no keys, or a sum of 0)."""
    if acc is None or total is None:
        out[...] = 0
        return
    inverse = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)  # [..., r, 1]
    np.multiply(acc, inverse, out=out)


def _log_sum_exp(total: np.ndarray | None, peak: np.ndarray | None, sinks: np.ndarray | None, out: np.ndarray) -> None:
    """out = log(total) + the max the sums were taken from (``peak``; None: 0),
    [..., r, 1] in place; with no keys, the sink alone, or −∞ (log 0)."""
    if total is None:
        out[...] = -np.inf if sinks is None else sinks
        return
    with np.errstate(divide="ignore"):
        np.log(total, out=out)
    if peak is not None:
        out += np.where(np.isfinite(peak), peak, 0.0)  # the ref each block was taken from


# The tuned choices. Each is taken only where what it relies on is checked:
# the softmax's in ``_choose``, the stacks' in ``blocking.stack_band``.


class Softmax(Enum):
    """How the kernel takes the softmax of a problem's logits (``_choose``)."""

    RUNNING_MAX = "running max"  # online_softmax, the plain algorithm
    FROM_ZERO = "from zero"  # _from_zero: no running max
    BASE_2 = "base 2"  # _from_zero through exp2 (_exp_base2), the band as 0/1 weights


def _choose(p: Problem) -> Softmax:
    """The softmax for ``p``: the plain algorithm unless a tuned one is exact."""
    # Without a running max exp(logit) must neither overflow nor leave the
    # normal numbers: every |logit| within _exp_safe (NaN compares false).
    if not p.logit_bound <= _exp_safe(p.q.dtype):
        return Softmax.RUNNING_MAX
    # exp2 of logits made in base 2 is exp of the logits when ``combine`` is
    # exact in base 2. With a mask, whose −∞ would meet exp2's slow path on
    # −∞, it is not taken; in float64 numpy's exp2 is slower than its exp.
    if p.exact_in_base2 and p.mask is None and p.q.dtype == np.float32:
        return Softmax.BASE_2
    return Softmax.FROM_ZERO


def _exp_safe(dtype: np.dtype) -> float:
    """exp(logit) neither overflows nor leaves the normal numbers while
    |logit| ≤ this (e^±44 in float32, e^±354 in float64; n_k · e^44 is still
    far from float32's 3.4e38): below it the kernel needs no running max."""
    return float(np.log(np.finfo(dtype).max)) / 2


@dataclass
class _Sums:
    """The sums of ``_from_zero`` for a block of queries: softmax(x) =
    exp(x) / Σ exp(x) taken from 0, with no max."""

    sinks: np.ndarray | None  # [..., H or 1, 1, 1]: exp(sink) joins each row's sum, with no value
    acc: np.ndarray | None = None  # [..., r, d_v] Σ exp(x) · v
    total: np.ndarray | None = None  # [..., r, 1] Σ exp(x)

    def add(self, e: np.ndarray, values: np.ndarray) -> None:
        """One key block: e [..., r, c] its exp(logits), values [..., c, d_v]."""
        with np.errstate(over="ignore", invalid="ignore"):
            part = e @ values  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v]
        part_total = _row_sums(e)  # [..., r, 1]
        if self.acc is None or self.total is None:
            self.acc, self.total = part, part_total if self.sinks is None else part_total + np.exp(self.sinks)
        else:
            self.acc += part
            self.total += part_total

    def start(self, p: Problem, rows: slice) -> None:
        """The sums at 0 (and a sink's exp(sink)) when there are none yet, for ``rows`` to add to in parts."""
        if self.acc is None or self.total is None:
            lead, r = p.logits_shape[:-2], rows.stop - rows.start
            self.acc = np.zeros((*lead, r, p.v.shape[-1]), dtype=p.q.dtype)
            self.total = np.zeros((*lead, r, 1), dtype=p.q.dtype)
            if self.sinks is not None:
                self.total += np.exp(self.sinks)

    def rows(self, local: slice) -> _Sums:
        """The sums of some rows (after ``start``), as views: what is added there is added here."""
        assert self.acc is not None and self.total is not None
        return _Sums(None, self.acc[..., local, :], self.total[..., local, :])

    def write(self, out: np.ndarray, lse: np.ndarray | None) -> None:
        """``online_softmax``'s end: out = acc / total, and lse = log(total) when given."""
        _write(self.acc, self.total, out)
        if lse is not None:
            _log_sum_exp(self.total, None, self.sinks, lse)


def _from_zero(p: Problem, rows: slice, key_block: int, base2: bool, out: np.ndarray, lse: np.ndarray | None) -> None:
    """``online_softmax`` for the queries ``rows`` with no running max, when
    ``_choose`` has found every |logit| small: each key block adds its
    exp(logits) · V and row sums, with no max taken and nothing rescaled.
    Its scores are laid out keys first (``logits.product``), which OpenBLAS
    runs faster for these blocks; ``online_softmax``'s blocks stay
    row-major, where its running max and ALiBi's distances run along
    memory. A key block the band cuts through may be taken by halves of the
    queries (``_halves``), each adding into its rows of the sums: there is
    no running max for the halves to keep in step. ``base2``: the blocks'
    exponentials by ``_exp_base2``."""
    exp = _exp2_of_block if base2 else _exp_of_block
    sums = _Sums(p.sinks)
    for cols, inside in key_blocks(p, rows, key_block):
        halves = None if inside else _halves(p, rows, cols)
        if halves is None:
            sums.add(exp(p, rows, cols, inside), p.v[..., cols, :])
            continue
        sums.start(p, rows)
        for half, keys in halves:
            local = slice(half.start - rows.start, half.stop - rows.start)
            sums.rows(local).add(exp(p, half, keys, False), p.v[..., keys, :])
    sums.write(out, lse)


def _exp_of_block(p: Problem, rows: slice, cols: slice, inside: bool) -> np.ndarray:
    """exp(logits) [..., r, c] of a block of queries and keys (0 where forbidden), keys first."""
    logits, _ = combine(scores(p, rows, cols, p.factor, keys_first=True), p, rows, cols, inside)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(logits, out=logits)


def _exp2_of_block(p: Problem, rows: slice, cols: slice, inside: bool) -> np.ndarray:
    """``_exp_of_block`` through ``_exp_base2``; the band's weights unless ``inside``."""
    banded = not inside and (p.options.causal is not None or p.options.window is not None)
    return _exp_base2(p, p.q[..., rows, :], p.k[..., cols, :], rows, cols, banded)


LOG2E = math.log2(math.e)  # exp(x) = exp2(x · log2 e)


def _exp_base2(p: Problem, qb: np.ndarray, kb: np.ndarray, rows: slice, cols: slice, banded: bool) -> np.ndarray:
    """exp(logits) of queries [..., r, d_k] against keys [..., c, d_k] as
    exp2 of the logits made in base 2, log2(e) folded into the factor:
    numpy's float32 exp2 is about twice as fast as its exp. ``combine``
    changes nothing more here (``Problem.exact_in_base2``, checked by
    ``_choose``) and is told ``inside``: the band (``banded``) is multiplied
    in as 0/1 weights after exp2 rather than set to −∞ before it, as numpy's
    exp2 takes a slow path on −∞. [..., r, c], keys first."""
    scaled = product(qb, kb, p.options.similarity, p.factor * LOG2E, keys_first=True)
    logits, _ = combine(scaled, p, rows, cols, inside=True)  # [..., r, c] in base 2
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp2(logits, out=logits)
        if banded:  # times the band's [r, c] 1 or 0, laid out as e
            i, j = range(p.n_q)[rows], range(p.n_k)[cols]
            e *= band_weights(i, j, p.n_q, p.n_k, p.options.causal, p.options.window, e.dtype, keys_first=True)
    return e


def _halves(p: Problem, rows: slice, cols: slice) -> list[tuple[slice, slice]] | None:
    """A key block the band cuts through (causal's diagonal), taken by halves
    of the queries, each against the keys some query of it may see, when
    that spares at least a fifth of the block's logits (causal's diagonal:
    a quarter); else None. ``_from_zero`` only."""
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


def _attend_rows(
    p: Problem, rows: slice, key_block: int, softmax: Softmax, out: np.ndarray, lse: np.ndarray | None
) -> None:
    """out [..., r, d_v] = softmax(logits) V for the queries ``rows`` (and lse [..., r, 1])."""
    if softmax is Softmax.RUNNING_MAX:
        online_softmax(_logit_blocks(p, rows, key_block), p.sinks, out, lse)
    else:
        _from_zero(p, rows, key_block, softmax is Softmax.BASE_2, out, lse)


def _attend_stack(
    p: Problem, stack: Stack, lo_hi: tuple[int, int], softmax: Softmax, out: np.ndarray, lse: np.ndarray | None
) -> None:
    """out [count, ..., size, d_v] = softmax(logits) V for a stack of query
    blocks (and lse [count, ..., size, 1]), all their keys at once: one key
    block for the chosen softmax."""
    q, k, v, rows, cols = views(p, stack, lo_hi)  # [count, ..., size, d_k], [count, ..., c, d], the first block's
    if softmax is Softmax.BASE_2:
        e = _exp_base2(p, q, k, rows, cols, banded=True)
    else:
        logits, _ = combine(product(q, k, p.options.similarity, p.factor), p, rows, cols)  # [count, ..., size, c]
        if softmax is Softmax.RUNNING_MAX:
            online_softmax([(logits, v)], p.sinks, out, lse)
            return
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(logits, out=logits)
    sums = _Sums(p.sinks)
    sums.add(e, v)
    sums.write(out, lse)


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
    what the backward pass recomputes the weights from (``grad_blocks``): −inf
    for a row that may attend to nothing (and has no sink)."""
    softmax = _choose(p)
    work = plan(p, query_block, key_block, worker_count(workers))
    output = np.empty(p.out_shape, dtype=p.q.dtype)  # [..., n_q, d_v] (grouped with GQA)

    def attend(block: Block) -> None:
        where, part, rows = block
        if isinstance(rows, Stack):
            assert work.stacked is not None
            out = rows.view(output, where)  # [count, ..., size, d_v] a view
            _attend_stack(part, rows, work.stacked, softmax, out, None if lse is None else rows.view(lse, where))
        else:
            out = output[where + (..., rows, EVERYTHING)]  # [..., r, d_v] a view
            lse_rows = None if lse is None else lse[where + (..., rows, EVERYTHING)]  # [..., r, 1]
            _attend_rows(part, rows, work.key_block, softmax, out, lse_rows)
        check_output(out)  # here, on every core, rather than over the whole output after

    map_blocks(attend, work.blocks, workers, progress)
    return output
