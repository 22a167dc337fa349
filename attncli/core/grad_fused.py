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
small (``Problem.logit_bound``) exp needs no max, and the band's cut keys
(causal's diagonal, a window's edges) become 0 as weights after exp;
otherwise each row's max is taken first and ``combine`` sets −∞. Keys no
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
from attncli.core.logits import Problem, _cut, _pick, combine
from attncli.core.parallel import map_blocks
from attncli.core.positions import band_weights, seen_by_all, visible_keys

Sums = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None", np.ndarray]

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
    at least 32; under a band, at most BAND_ROWS rows (with the group of heads),
    since a block computes its cut keys for every row and throws most away."""
    rows = _rows_within(p)
    if p.options.causal is not None or p.options.window is not None:
        rows = min(rows, max(1, BAND_ROWS // p.group))
    if rows >= 32:
        rows -= rows % 16
    return max(1, min(p.n_q, rows))


BAND_ROWS = 128
TRANSPOSED = True


@dataclass(frozen=True)
class _Unit:
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
    local = threading.local()
    units = _units(p, _rows_per_block(p))
    own = {  # dK and dV of a part's later ranges of queries, added up after
        id(u): (np.zeros(_pick(dk, u.where, ndim).shape), np.zeros(_pick(dv, u.where, ndim).shape))
        for u in units
        if u.own
    }

    def run(unit: _Unit) -> None:
        def pick(m: np.ndarray) -> np.ndarray:
            return _pick(m, unit.where, ndim)

        dk_part, dv_part = own[id(unit)] if unit.own else (pick(dk), pick(dv))
        scratch = local.__dict__.setdefault("buffers", {})
        _Part(
            unit.part,
            pick(qm),
            pick(km),
            pick(do),
            pick(output),
            pick(dq),
            dk_part,
            dv_part,
            None if sink_terms is None else pick(sink_terms),
            None if ds_bias is None else pick(ds_bias),
            shared,
            scratch,
        ).run(unit.blocks)

    map_blocks(run, units, workers, progress)
    for unit in units:  # in order, whatever thread ran which
        if unit.own:
            _pick(dk, unit.where, ndim)[...] += own[id(unit)][0]
            _pick(dv, unit.where, ndim)[...] += own[id(unit)][1]
    return dq, dk, dv, ds_bias, sink_terms, output


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


def _keys(p: Problem, rows: slice) -> range:
    return visible_keys(range(rows.start, rows.stop), p.n_q, p.n_k, p.options.causal, p.options.window)


@dataclass
class _Part:
    """One K/V head with its group of query heads: views of its inputs and of what it writes."""

    part: Problem
    q: np.ndarray  # [..., (g,) n_q, d_k]
    k: np.ndarray  # [..., n_k, d_k]
    do: np.ndarray  # [..., (g,) n_q, d_v]
    out: np.ndarray  # [..., (g,) n_q, d_v] O
    dq: np.ndarray  # [..., (g,) n_q, d_k]
    dk: np.ndarray  # [..., n_k, d_k]
    dv: np.ndarray  # [..., n_k, d_v]
    sink_terms: np.ndarray | None  # [..., (g,) n_q, 1]
    ds_bias: np.ndarray | None
    shared: threading.Lock
    scratch: dict[str, np.ndarray]

    def run(self, blocks: list[slice]) -> None:
        p = self.part
        lead = p.logits_shape[:-2]
        g = math.prod(lead)

        def heads(m: np.ndarray) -> np.ndarray:
            """[..., (g,) n, m] -> [g, n, m], a view."""
            return np.broadcast_to(m, lead + m.shape[-2:]).reshape(g, *m.shape[-2:])

        self.g, self.lead = g, lead
        self.q3, self.do3 = heads(self.q), heads(self.do)
        self.out3, self.dq3 = _viewed(self.out, g), _viewed(self.dq, g)  # written to: views, never copies
        self.sinks3 = None if self.sink_terms is None else _viewed(self.sink_terms, g)
        self.dk2, self.dv2 = _viewed(self.dk, 1)[0], _viewed(self.dv, 1)[0]
        self.k2 = self.k.reshape(self.k.shape[-2:])
        self.v2 = p.v.reshape(p.v.shape[-2:])
        keys = range(min(_keys(p, b).start for b in blocks), max(_keys(p, b).stop for b in blocks))
        self.first = keys.start
        v1 = self._buffer("v1", len(keys) * (self.v2.shape[-1] + 1)).reshape(len(keys), -1)  # [V, 1]
        v1[:, :-1], v1[:, -1] = self.v2[keys.start : keys.stop], 1.0
        self.v1 = v1
        self.small = p.logit_bound <= float(np.log(np.finfo(np.float64).max)) / 2
        self.plain = p.bias is None and p.alibi is None and p.mask is None and p.cannot_overflow  # combine: nothing to do
        # dKᵀ and dVᵀ [d, keys], added to by Qᵀ dS' and dOᵀ E: OpenBLAS runs these
        # [d, r] @ [r, c] products faster than dS'ᵀ Q ([c, r] @ [r, d])
        self.dkt = np.zeros((d_k := self.q3.shape[-1], len(keys)))
        self.dvt = np.zeros((self.v2.shape[-1], len(keys)))
        for rows in blocks:
            self._block(rows)
        self.dk2[keys.start : keys.stop] += self.dkt.T
        self.dv2[keys.start : keys.stop] += self.dvt.T
        del d_k

    def _buffer(self, name: str, size: int) -> np.ndarray:
        """The thread's flat buffer ``name`` of at least ``size`` numbers (a view of its first ``size``)."""
        buf = self.scratch.get(name)
        if buf is None or buf.size < size:
            buf = self.scratch[name] = np.empty(size)
        return buf[:size]

    def _block(self, rows: slice) -> None:
        p, g = self.part, self.g
        br = rows.stop - rows.start
        r = g * br
        d_k, d_v = self.q3.shape[-1], self.v2.shape[-1]
        keys = _keys(p, rows)
        c = len(keys)
        if c == 0:  # no query of the block may see any key: O = 0, and so are its gradients
            self.out3[:, rows] = 0.0
            self.dq3[:, rows] = 0.0
            if self.sinks3 is not None:
                self.sinks3[:, rows] = 0.0
            return
        cols = slice(keys.start, keys.stop)
        k, v1 = self.k2[cols], self.v1[keys.start - self.first : keys.stop - self.first]  # [c, d_k], [c, d_v + 1]
        qs = self._buffer("q", r * d_k).reshape(g, br, d_k)
        np.multiply(self.q3[:, rows], p.factor, out=qs)  # Q · factor
        q2 = qs.reshape(r, d_k)
        do1 = self._buffer("do", r * (d_v + 1)).reshape(g, br, d_v + 1)  # [dO, −D]
        do1[..., :d_v] = self.do3[:, rows]
        do2 = do1.reshape(r, d_v + 1)

        e = np.matmul(q2, k.T, out=self._buffer("e", r * c).reshape(r, c))  # [r, d_k] @ [d_k, c] -> [r, c] S
        logits = e.reshape(self.lead + (br, c))  # [..., g, br, c] as the options see the block
        every = seen_by_all(range(rows.start, rows.stop), p.n_q, p.n_k, p.options.causal, p.options.window)
        cut = [
            (a, b)
            for a, b in ((keys.start, min(keys.stop, every.start)), (max(keys.start, every.stop), keys.stop))
            if b > a
        ]  # the keys the band cuts: a window's left edge, causal's diagonal
        if len(every) == 0:
            cut = [(keys.start, keys.stop)]
        sink = None if p.sinks is None else np.broadcast_to(p.sinks, self.lead + (1, 1)).reshape(g, 1, 1)
        ref = None
        if self.small:  # exp needs no max: the band as 0/1 weights after it (exp is slow on −inf)
            if not self.plain:
                combine(logits, p, rows, cols, inside=True)
            np.exp(e, out=e)
            e3 = e.reshape(g, br, c)
            for a, b in cut:
                e3[:, :, a - keys.start : b - keys.start] *= band_weights(
                    range(rows.start, rows.stop), range(a, b), p.n_q, p.n_k, p.options.causal, p.options.window, e.dtype
                )
        else:  # each row's max first; −∞ where forbidden
            combine(logits, p, rows, cols, inside=not cut)
            peak = e.max(axis=-1, keepdims=True)  # [r, 1]
            if sink is not None:  # a sink is one more logit of each row
                peak = np.maximum(peak.reshape(g, br, 1), sink).reshape(r, 1)
            ref = np.where(np.isfinite(peak), peak, 0.0)  # a row that sees nothing: exp(−∞ − 0) = 0
            np.subtract(e, ref, out=e)
            np.exp(e, out=e)
        ev = np.matmul(e, v1, out=self._buffer("o", r * (d_v + 1)).reshape(r, d_v + 1))  # [r, c] @ [c, d_v + 1]
        total = ev[:, d_v]  # [r] l = rowsum(E), from the column of ones
        sink_e = None
        if sink is not None:  # a sink joins each row's sum, with no value: exp(sink − ref)
            shift = 0.0 if ref is None else ref.reshape(g, br, 1)
            sink_e = np.broadcast_to(np.exp(sink - shift), (g, br, 1)).reshape(r)
            total += sink_e
        inv = np.divide(1.0, total, out=np.zeros(r), where=total > 0)[:, None]  # [r, 1] 1 / l (0: no weight at all)
        out = np.multiply(ev[:, :d_v].reshape(g, br, d_v), inv.reshape(g, br, 1), out=self.out3[:, rows])  # O = E V / l
        delta = np.einsum("gbd,gbd->gb", do1[..., :d_v], out).reshape(r)  # [r] D = rowsum(dO ∘ O)
        do2[:, d_v] = -delta
        if self.sinks3 is not None and sink_e is not None:  # −p_s · D, p_s = exp(sink) / (l + exp(sink))
            self.sinks3[:, rows] = (-(sink_e * inv[:, 0]) * delta).reshape(g, br, 1)
        ds = np.matmul(do2, v1.T, out=self._buffer("ds", r * c).reshape(r, c))  # [r, d_v + 1] @ [d_v + 1, c]: dP − D
        ds *= e  # dS' = E ∘ (dP − D) = dS · l
        ds_inv = inv  # what turns dS' into dS, row by row
        if self.ds_bias is not None:  # dbias = dS, the bias's block
            ds *= inv
            ds_inv = np.ones_like(inv)
            block_of_bias = _cut(self.ds_bias, rows, cols)
            summed = sum_to(ds.reshape(self.lead + (br, c)), block_of_bias.shape)
            with self.shared:
                block_of_bias += summed
        dq = np.matmul(ds, k, out=self._buffer("dq", r * d_k).reshape(r, d_k))  # [r, c] @ [c, d_k]
        inv_factor = (ds_inv * p.factor).reshape(g, br, 1)
        np.multiply(dq.reshape(g, br, d_k), inv_factor, out=self.dq3[:, rows])  # dQ = dS K · factor
        q2 *= ds_inv  # Q · factor / l
        here = slice(keys.start - self.first, keys.stop - self.first)
        if TRANSPOSED:
            self.dkt[:, here] += np.matmul(q2.T, ds, out=self._buffer("dk", c * d_k).reshape(d_k, c))  # [d_k, r] @ [r, c]
            dos = do2[:, :d_v]
            dos *= inv  # dO / l
            self.dvt[:, here] += np.matmul(dos.T, e, out=self._buffer("dv", c * d_v).reshape(d_v, c))  # [d_v, r] @ [r, c]
        else:
            self.dk2[cols] += np.matmul(ds.T, q2, out=self._buffer("dk", c * d_k).reshape(c, d_k))  # [c, r] @ [r, d_k]
            dos = do2[:, :d_v]
            dos *= inv  # dO / l
            self.dv2[cols] += np.matmul(e.T, dos, out=self._buffer("dv", c * d_v).reshape(c, d_v))  # [c, r] @ [r, d_v]


def _viewed(m: np.ndarray, g: int) -> np.ndarray:
    """[..., (g,) n, m] -> [g, n, m] as a view of m (what is written there is written in m)."""
    view = m.view()
    view.shape = (g, *m.shape[-2:])  # raises rather than copy
    return view
