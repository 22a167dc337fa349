"""The forward and backward passes fused, row block by row block (``grad``'s
middle path, when dO is known before the forward pass).

A block of Br queries (each with its K/V head's group of query heads) holds
its logits against every key some query of it may see — Br × those keys,
within ``CELLS`` numbers — so its softmax is exact in one pass, with no
log-sum-exp saved and no second exp::

    S = Q K_ᵀ · factor          E = exp(S) (0 where forbidden), l = rowsum(E)
    O = E V / l                 D = rowsum(dO ∘ O)
    dP − D = [dO, −D] [V, 1]ᵀ   dS' = E ∘ (dP − D)       (dS = dS' / l)
    dQ = dS' K · factor / l     dK += dS'ᵀ (Q · factor / l)   dV += Eᵀ (dO / l)

six products and one exp per logit (the two-pass path in ``grad_blocks``
needs seven and two). The 1 / l of each row is carried on the [Br, d]
matrices, never on the [Br, keys] ones. When every |logit| is known to be
small and the inputs' sizes keep E's products in range (``_no_max_needed``)
exp needs no max, and the band's cut keys (causal's diagonal, a window's
edges) become 0 as weights after exp; otherwise each row's max is taken
first and ``combine`` sets −∞. Keys no
query of the block may see are never computed. The soft-cap goes the
two-pass way (``usable``).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.core.arrays import sum_to
from attncli.core.grad_blocks import Sums
from attncli.core.logits import Problem, _cut, _pick, combine
from attncli.core.parallel import map_blocks
from attncli.core.positions import band_weights, seen_by_all, visible_keys

# A block's logits: at most this many numbers (4 MiB in float64), twice over (E and dS).
CELLS = 1 << 19
# Fewer query rows than this a block (n_k past CELLS / SMALLEST_ROWS keys) and the
# products grow thin: the two-pass path instead.
SMALLEST_ROWS = 64
# At least this many units of work (a head's query blocks in ranges, when there are
# fewer heads), whatever the workers, so that the sums do not depend on them.
UNITS = 4


def usable(p: Problem) -> bool:
    """Whether the fused path takes ``p``: no soft-cap (its tanh needs the scores
    kept), and a block of at least SMALLEST_ROWS rows (queries × their group of
    heads) against every key fits in CELLS."""
    return p.options.softcap is None and _rows_within(p) * p.group >= SMALLEST_ROWS


def _rows_within(p: Problem) -> int:
    """Queries per block (each with its group of heads) that CELLS allows against every key."""
    return CELLS // (max(1, p.n_k) * p.group)


def _rows_per_block(p: Problem) -> int:
    """Queries per block: as many as CELLS allows, a multiple of 16 when that is
    at least 32; under a band at most BAND_ROWS, and BAND_BLOCK rows with their
    group of heads, since a block computes its cut keys for every row and
    throws most away."""
    rows = _rows_within(p)
    if p.options.causal is not None or p.options.window is not None:
        rows = min(rows, BAND_ROWS, max(1, BAND_BLOCK // p.group))
    if rows >= 32:
        rows -= rows % 16
    return max(1, min(p.n_q, rows))


# Under a band: at most BAND_ROWS queries a block (a block of r queries computes
# about r² / 2 logits its band forbids), and BAND_BLOCK rows of logits with their
# group of heads. Measured on one worker, best of 10 on a busy machine: 128 queries
# took 0.87× the time of 64 and 0.94× that of 256 on [1, 8, 1024, 64] causal; with
# 4 K/V heads for 16 query heads, blocks of 256 and 512 rows 0.94× and 0.92× the
# time of 128 (the products run faster on more rows).
BAND_ROWS = 128
BAND_BLOCK = 512


@dataclass(frozen=True)
class _Unit:
    """A part of the problem (one K/V head with its group of query heads) over a range of its query blocks."""

    where: tuple[slice, ...]  # the part's place on the leading axes
    part: Problem
    blocks: list[slice]  # its query blocks
    own: bool  # dK and dV of its own (a later range of a part's queries), added up after
    cost: int


def fused(
    p: Problem,
    qm: np.ndarray,
    km: np.ndarray,
    do: np.ndarray,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sums:
    """Forward and backward at once, by blocks of queries -> grouped dQ, dK, dV
    (before RoPE and cosine are undone; dK and dV summed over each group), dS
    summed to the grouped bias's shape (None without a bias), each row's sink
    term −p_s · D (None without sinks), and O. The same as ``grad_blocks.in_blocks``."""
    lead = p.logits_shape[:-2]
    ndim = len(p.logits_shape)
    kv_lead = lead if p.group == 1 else lead[:-1] + (1,)
    d_k, d_v = qm.shape[-1], p.v.shape[-1]
    output = np.empty(lead + (p.n_q, d_v))
    dq = np.empty(lead + (p.n_q, d_k))
    dk = np.zeros(kv_lead + (p.n_k, d_k))
    dv = np.zeros(kv_lead + (p.n_k, d_v))
    sink_terms = None if p.sinks is None else np.empty(lead + (p.n_q, 1))
    ds_bias = None if p.bias is None else np.zeros(p.bias.shape)
    shared = threading.Lock()
    units = _units(p, _rows_per_block(p))
    own = {  # dK and dV of a part's later ranges of queries, added up after
        id(u): (np.zeros(_pick(dk, u.where, ndim).shape), np.zeros(_pick(dv, u.where, ndim).shape))
        for u in units
        if u.own
    }

    small = _no_max_needed(p, qm, km, do)
    plain = p.bias is None and p.alibi is None and p.mask is None and p.cannot_overflow
    blocks = {(b.start, b.stop) for unit in units for b in unit.blocks}  # every part's are the same
    rows = max(b - a for a, b in blocks) * p.group  # a block's rows (queries × their group of heads) at most
    cells = max(len(_keys(p, slice(a, b))) * (b - a) for a, b in blocks) * p.group  # ≤ CELLS
    sizes = {  # each buffer's numbers at most: a thread's buffers are made at these sizes (``_scratch``)
        "e": cells,
        "ds": cells,
        "q": rows * d_k,
        "do": rows * (d_v + 1),
        "ev": rows * (d_v + 1),
        "dq": rows * d_k,
        "v1": p.n_k * (d_v + 1),
        "dk": d_k * p.n_k,
        "dv": d_v * p.n_k,
        "dkt": d_k * p.n_k,
        "dvt": d_v * p.n_k,
    }

    def run(unit: _Unit) -> None:
        def pick(m: np.ndarray) -> np.ndarray:
            return _pick(m, unit.where, ndim)

        part, blocks = unit.part, unit.blocks
        g = math.prod(part.logits_shape[:-2])
        keys = range(min(_keys(part, b).start for b in blocks), max(_keys(part, b).stop for b in blocks))
        dk_part, dv_part = own[id(unit)] if unit.own else (pick(dk), pick(dv))
        scratch = _scratch(sizes)
        v1 = scratch["v1"][: len(keys) * (d_v + 1)].reshape(len(keys), d_v + 1)  # [V, 1] of the unit's keys
        v1[:, :d_v], v1[:, d_v] = part.v.reshape(part.v.shape[-2:])[keys.start : keys.stop], 1.0
        head = _Part(
            part,
            g,
            _by_head(pick(qm), part, g),
            _by_head(pick(do), part, g),
            pick(km).reshape(km.shape[-2:]),
            v1,
            keys.start,
            _viewed(pick(output), g),
            _viewed(pick(dq), g),
            scratch["dkt"][: d_k * len(keys)].reshape(d_k, len(keys)),
            scratch["dvt"][: d_v * len(keys)].reshape(d_v, len(keys)),
            None if sink_terms is None else _viewed(pick(sink_terms), g),
            None if ds_bias is None else pick(ds_bias),
            shared,
            scratch,
            small,
            plain,
        )
        head.dkt[...], head.dvt[...] = 0.0, 0.0
        for rows in blocks:
            head.block(rows)
        _viewed(dk_part, 1)[0, keys.start : keys.stop] += head.dkt.T
        _viewed(dv_part, 1)[0, keys.start : keys.stop] += head.dvt.T

    map_blocks(run, units, workers, progress)
    for unit in units:  # in order, whatever thread ran which
        if unit.own:
            _pick(dk, unit.where, ndim)[...] += own[id(unit)][0]
            _pick(dv, unit.where, ndim)[...] += own[id(unit)][1]
    return dq, dk, dv, ds_bias, sink_terms, output


# Each thread keeps its buffers from call to call, up to this many numbers (32 MiB):
# made anew for every call, freeing megabytes made glibc hand their pages back
# and fault them in again, which two threads of one process pay for in turn
# (the process's page tables are shared): two threads each running the same
# [1, 4, 1024, 64] causal call took 62 → 122 ms a call over four rounds where
# two processes took 70–75, and 70–87 with the buffers kept, as processes did.
KEPT_NUMBERS = 1 << 22
_kept = threading.local()


def _scratch(sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """The calling thread's buffers, each of at least ``sizes`` numbers: the ones
    it keeps when they are large enough, else made (and kept if within KEPT_NUMBERS)."""
    kept = getattr(_kept, "buffers", None)
    if kept is not None and all(name in kept and kept[name].size >= size for name, size in sizes.items()):
        return kept
    if kept is not None:  # grow what is kept rather than keep two sets
        sizes = {name: max(size, kept[name].size if name in kept else 0) for name, size in sizes.items()}
    made = {name: np.empty(size) for name, size in sizes.items()}
    _kept.buffers = made if sum(sizes.values()) <= KEPT_NUMBERS else None
    return made


def _units(p: Problem, rows: int) -> list[_Unit]:
    """batch × K/V heads, each a unit of its query blocks; when that gives fewer
    than UNITS, each part's blocks in ranges of about equal cost (the later ones
    with dK and dV of their own). Costliest first."""
    blocks = [slice(a, min(a + rows, p.n_q)) for a in range(0, p.n_q, rows)]
    cost = [len(_keys(p, b)) * (b.stop - b.start) for b in blocks]
    parts = p.heads()
    ranges = min(len(blocks), -(-UNITS // len(parts)))
    running = np.cumsum(cost)
    total = running[-1] if len(running) else 0
    cuts = sorted(
        {0, len(blocks)} | {int(np.argmin(np.abs(running - total * i / ranges))) + 1 for i in range(1, ranges)}
    )
    units = [
        _Unit(where, part, blocks[a:b], index > 0, sum(cost[a:b]) * p.group)
        for where, part in parts
        for index, (a, b) in enumerate(itertools.pairwise(cuts))
        if b > a
    ]
    units.sort(key=lambda unit: unit.cost, reverse=True)
    return units


# exp(logit) with no max taken: while every |logit| ≤ this, E lies within e^±128
# (1e±56), far inside float64's normal numbers, and so do l, E V and E ∘ (dP − D)
# for any inputs short of 1e240 (``_no_max_needed``).
SMALL_LOGITS = 128.0


def _no_max_needed(p: Problem, qm: np.ndarray, km: np.ndarray, do: np.ndarray) -> bool:
    """Whether exp(logits) may be taken with no row max first: every |logit| ≤
    SMALL_LOGITS (``Problem.logit_bound``: no bias or ALiBi), and what the
    unnormalised E meets stays far below float64's largest: e^(2 · bound) · n ·
    (1 + ‖V‖)(1 + 2 ‖dO‖ ‖V‖)(1 + factor (‖Q‖ + ‖K‖)), the norms the rows'
    largest. NaN compares false: the running max then, as for any input it cannot vouch for."""
    bound = p.logit_bound
    if not bound <= SMALL_LOGITS:
        return False
    q, k, v, dout = (_largest_norm(m) for m in (qm, km, p.v, do))
    with np.errstate(over="ignore", invalid="ignore"):
        reach = math.exp(2 * bound) * max(p.n_q, p.n_k) * (1 + v) * (1 + 2 * dout * v) * (1 + abs(p.factor) * (q + k))
    return bool(reach < 1e300)


def _largest_norm(m: np.ndarray) -> float:
    """max over rows of ‖row‖: [..., n, d] -> a number (inf past float64's range, NaN with a NaN)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.einsum("...i,...i->...", m, m).max())) if m.size else 0.0


def _keys(p: Problem, rows: slice) -> range:
    return visible_keys(range(rows.start, rows.stop), p.n_q, p.n_k, p.options.causal, p.options.window)


@dataclass
class _Part:
    """One K/V head with its group of g query heads, as its blocks use it: the
    inputs as [g, n, d] views, and views of what the blocks write (O, dQ, the
    sink terms, dbias) or add to (dK and dV, through dKᵀ and dVᵀ of the unit's
    keys: OpenBLAS runs Qᵀ dS' ([d, r] @ [r, c]) faster than dS'ᵀ Q)."""

    part: Problem
    g: int
    q: np.ndarray  # [g, n_q, d_k]
    do: np.ndarray  # [g, n_q, d_v]
    k: np.ndarray  # [n_k, d_k]
    v1: np.ndarray  # [c, d_v + 1] [V, 1] of the unit's keys, from ``first`` on (a buffer of the thread's)
    first: int
    out: np.ndarray  # [g, n_q, d_v] O
    dq: np.ndarray  # [g, n_q, d_k]
    dkt: np.ndarray  # [d_k, c] Σ (Q · factor / l)ᵀ dS' over the unit's blocks
    dvt: np.ndarray  # [d_v, c] Σ (dO / l)ᵀ E
    sink_terms: np.ndarray | None  # [g, n_q, 1]
    ds_bias: np.ndarray | None  # the part's dbias, summed to the bias's shape
    shared: threading.Lock  # held while adding to dbias (a bias may be shared by parts)
    scratch: dict[str, np.ndarray]  # the thread's buffers, by name
    small: bool  # every |logit| is small: exp needs no max
    plain: bool  # ``combine`` has nothing to do: no bias, ALiBi or mask, no overflow to check

    def buffer(self, name: str, *shape: int) -> np.ndarray:
        """The thread's buffer ``name`` as a C-contiguous array of ``shape``: the
        first numbers of one flat array, kept for every block (allocating a block's
        arrays anew made the allocator fault their pages in again every time)."""
        size = math.prod(shape)
        flat = self.scratch.get(name)
        if flat is None or flat.size < size:
            flat = self.scratch[name] = np.empty(size)
        return flat[:size].reshape(shape)

    def block(self, rows: slice) -> None:
        """O, dQ and the sink terms of the queries ``rows``, and their share of dK,
        dV and dbias: six products, one exp (the module's docstring)."""
        p, g = self.part, self.g
        lead = p.logits_shape[:-2]
        br = rows.stop - rows.start
        r, d_k, d_v = g * br, self.q.shape[-1], self.v1.shape[-1] - 1  # r: the rows' queries × their heads
        keys = _keys(p, rows)
        if not keys:  # no query of the block may see any key: O = 0, and so are its gradients
            self.out[:, rows], self.dq[:, rows] = 0.0, 0.0
            if self.sink_terms is not None:
                self.sink_terms[:, rows] = 0.0
            return
        c, cols = len(keys), slice(keys.start, keys.stop)
        here = slice(keys.start - self.first, keys.stop - self.first)
        k, v1 = self.k[cols], self.v1[here]  # [c, d_k], [c, d_v + 1]
        qs = self.buffer("q", r, d_k)  # [r, d_k] Q · factor, each query head's rows together
        np.multiply(self.q[:, rows], p.factor, out=qs.reshape(g, br, d_k))
        do1 = self.buffer("do", r, d_v + 1)  # [r, d_v + 1] [dO, −D]
        do1.reshape(g, br, d_v + 1)[..., :d_v] = self.do[:, rows]

        e = np.matmul(qs, k.T, out=self.buffer("e", r, c))  # [r, d_k] @ [d_k, c] -> [r, c] S
        sink = None if p.sinks is None else np.broadcast_to(p.sinks, lead + (1, 1)).reshape(g, 1, 1)
        ref = self._exp(e, rows, keys, sink)  # E, in place; each row's max when one was taken
        ev = np.matmul(e, v1, out=self.buffer("ev", r, d_v + 1))  # [r, c] @ [c, d_v + 1] -> [E V, rowsum(E)]
        total = ev[:, d_v]  # [r] l, a view
        sink_e = None
        if sink is not None:  # a sink joins each row's sum, with no value: exp(sink − max)
            sink_e = np.broadcast_to(np.exp(sink - (0.0 if ref is None else ref.reshape(g, br, 1))), (g, br, 1))
            total += sink_e.reshape(r)
        inv = np.divide(1.0, total, out=np.zeros(r), where=total > 0)[:, None]  # [r, 1] 1 / l (0: no weight at all)
        out = np.multiply(ev[:, :d_v].reshape(g, br, d_v), inv.reshape(g, br, 1), out=self.out[:, rows])  # O
        delta = np.einsum("gbd,gbd->gb", do1.reshape(g, br, d_v + 1)[..., :d_v], out)  # [g, br] D = rowsum(dO ∘ O)
        do1[:, d_v] = -delta.reshape(r)
        if self.sink_terms is not None and sink_e is not None:  # −p_s · D, p_s = exp(sink) / l
            self.sink_terms[:, rows] = -(sink_e * inv.reshape(g, br, 1)) * delta[..., None]

        ds = np.matmul(do1, v1.T, out=self.buffer("ds", r, c))  # [r, d_v + 1] @ [d_v + 1, c] -> dP − D
        ds *= e  # dS' = E ∘ (dP − D) = dS · l
        ds_inv = inv  # what turns dS' into dS, row by row
        if self.ds_bias is not None:  # dbias = dS, the bias's block
            ds *= inv
            ds_inv = np.ones_like(inv)
            block_of_bias = _cut(self.ds_bias, rows, cols)  # a view
            summed = sum_to(ds.reshape(lead + (br, c)), block_of_bias.shape)
            with self.shared:
                block_of_bias += summed
        dq = np.matmul(ds, k, out=self.buffer("dq", r, d_k))  # [r, c] @ [c, d_k] -> dS' K
        np.multiply(
            dq.reshape(g, br, d_k), (ds_inv * p.factor).reshape(g, br, 1), out=self.dq[:, rows]
        )  # dS K · factor
        qs *= ds_inv  # Q · factor / l
        self.dkt[:, here] += np.matmul(qs.T, ds, out=self.buffer("dk", d_k, c))  # [d_k, r] @ [r, c]: (dS'ᵀ Q/l)ᵀ
        dos = do1[:, :d_v]
        dos *= inv  # dO / l
        self.dvt[:, here] += np.matmul(dos.T, e, out=self.buffer("dv", d_v, c))  # [d_v, r] @ [r, c]: (Eᵀ dO/l)ᵀ

    def _exp(self, e: np.ndarray, rows: slice, keys: range, sink: np.ndarray | None) -> np.ndarray | None:
        """S [r, c] -> E = exp(logits) in place, 0 where a query may not attend ->
        each row's max [r, 1] that was taken from the logits first (None: none was)."""
        p, g = self.part, self.g
        br, c = rows.stop - rows.start, e.shape[-1]
        logits = e.reshape(p.logits_shape[:-2] + (br, c))  # [..., g, br, c] a view, as the options see the block
        queries, cols = range(rows.start, rows.stop), slice(keys.start, keys.stop)
        every = seen_by_all(queries, p.n_q, p.n_k, p.options.causal, p.options.window)
        cut = (
            [(a, b) for a, b in ((keys.start, every.start), (every.stop, keys.stop)) if b > a]
            if every
            else [(keys.start, keys.stop)]
        )  # the keys the band cuts: a window's left edge, causal's diagonal
        if self.small:  # exp needs no max: the band as 0/1 weights after it (numpy's exp is slow on −inf)
            if not self.plain:
                combine(logits, p, rows, cols, inside=True)
            np.exp(e, out=e)
            e3 = e.reshape(g, br, c)
            for a, b in cut:
                e3[:, :, a - keys.start : b - keys.start] *= band_weights(
                    queries, range(a, b), p.n_q, p.n_k, p.options.causal, p.options.window, e.dtype
                )
            return None
        combine(logits, p, rows, cols, inside=not cut)  # −∞ where forbidden
        peak = e.max(axis=-1, keepdims=True)  # [r, 1]
        if sink is not None:  # a sink is one more logit of each row
            peak = np.maximum(peak.reshape(g, br, 1), sink).reshape(-1, 1)
        ref = np.where(np.isfinite(peak), peak, 0.0)  # a row that sees nothing: exp(−∞ − 0) = 0
        np.subtract(e, ref, out=e)
        np.exp(e, out=e)
        return ref


def _by_head(m: np.ndarray, part: Problem, g: int) -> np.ndarray:
    """[..., (g,) n, m] -> [g, n, m], a view (of the broadcast when m is shared by heads)."""
    return np.broadcast_to(m, part.logits_shape[:-2] + m.shape[-2:]).reshape(g, *m.shape[-2:])


def _viewed(m: np.ndarray, g: int) -> np.ndarray:
    """[..., (g,) n, m] -> [g, n, m] as a view of m (what is written there is written in m)."""
    view = m.reshape(g, *m.shape[-2:])
    assert np.may_share_memory(view, m), "a reshape that copied would lose what is written"
    return view
