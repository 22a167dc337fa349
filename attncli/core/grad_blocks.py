"""The backward pass in blocks, as FlashAttention-2 does it (``grad._blocked``).

The forward kernel saves each row's log-sum-exp L; D = rowsum(dO ∘ O). Then
every block of queries × keys that the causal triangle and the window leave
recomputes its weights once, P = exp(S − L), and five matrix products give
its share of the gradients::

    S = Q K_jᵀ · factor (− L)   dV_j += Pᵀ dO   dP − D = [dO, −D] [V_j, 1]ᵀ
    dS = P ∘ (dP − D)           dQ += dZ K_j · factor   dK_j += dZᵀ Q · factor

(dZ: dS through the soft-cap's tanh). Key blocks the causal triangle or the
window forbid are never visited (``positions.visible_keys`` and
``seen_by_all``, as the forward kernel); nothing of n_q × n_k is held. In
float64: it is the reference.
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass

import numpy as np

from attncli.core.arrays import sum_to
from attncli.core.kernel import forward
from attncli.core.logits import Problem, _cut, _pick, combine
from attncli.core.parallel import map_blocks
from attncli.core.positions import seen_by_all, visible_keys

Sums = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None", np.ndarray]


def in_blocks(p: Problem, qm: np.ndarray, km: np.ndarray, do: np.ndarray, block: int,
              workers: int | None = None) -> Sums:
    """FlashAttention-2's backward, never holding n_q × n_k -> grouped dQ, dK, dV
    (before RoPE and cosine are undone; dK and dV summed over each group), dS
    summed to the grouped bias's shape (None without a bias), each row's sink
    term −p_s · D (None without sinks), and O.

    The forward kernel (``kernel.forward``) gives O and each row's log-sum-exp L;
    D = rowsum(dO ∘ O) and each row's sink term follow from them. Then each
    block of up to ``block`` queries × ``block`` keys that the causal triangle
    and the window leave (``_block_plan``; the others are never visited)
    recomputes P once, exp(logits − L), and five products give its share of
    the gradients (``_backward_block``). With a bias, each block's dS is summed
    down to the bias's (grouped) shape into its [rows, cols], so dbias takes
    the bias's memory. The work goes in units (``_units``) on the thread pool
    (``map_blocks``, up to ``workers`` threads); how it is cut does not depend
    on ``workers``, so neither do the sums (but for a bias shared by units)."""
    lead = p.logits_shape[:-2]  # [..., (H_kv, group)]
    n_q, n_k, ndim = p.n_q, p.n_k, len(p.logits_shape)
    kv_lead = lead if p.group == 1 else lead[:-1] + (1,)  # dK and dV: one per K/V head, summed over its group
    lse = np.empty(lead + (n_q, 1))  # [..., n_q, 1] L = log(Σ exp(logits) + exp(sink)) per row
    output = forward(p, workers=workers, lse=lse)  # [..., n_q, d_v] O
    np.copyto(lse, 0.0, where=~np.isfinite(lse))  # a row that sees nothing: its logits are all −inf, P = 0 whatever L
    delta = np.einsum("...i,...i->...", do, output)[..., None]  # [..., n_q, 1] D = rowsum(dO ∘ O)
    sink_terms = None if p.sinks is None else -np.exp(p.sinks - lse) * delta  # [..., n_q, 1] −p_s · D
    dq = np.zeros(lead + (n_q, qm.shape[-1]))  # [..., n_q, d_k]
    dk = np.zeros(kv_lead + (n_k, km.shape[-1]))  # [..., n_k, d_k]
    dv = np.zeros(kv_lead + (n_k, p.v.shape[-1]))  # [..., n_k, d_v]
    ds_bias = None if p.bias is None else np.zeros(p.bias.shape)
    shared = threading.Lock()  # a bias shared by several units (broadcast over heads or keys) is added to under it
    units = _units(p, block)
    partial = {id(unit): np.zeros(unit.part.logits_shape[:-2] + (n_q, qm.shape[-1]))
               for unit in units if unit.key_range > 0}  # dQ of a part's later key ranges, added up after

    def run(unit: _Unit) -> None:
        def pick(m: np.ndarray) -> np.ndarray:
            return _pick(m, unit.where, ndim)

        dq_part = partial[id(unit)] if id(unit) in partial else pick(dq)
        sums = _PartSums(dq_part, pick(dk), pick(dv), None if ds_bias is None else pick(ds_bias), shared)
        _backward_part(unit, pick(qm), pick(km), pick(p.v), pick(do), pick(lse), pick(delta), sums)

    map_blocks(run, units, workers, None)
    for unit in units:  # in order, whatever thread ran which
        if id(unit) in partial:
            _pick(dq, unit.where, ndim)[...] += partial[id(unit)]
    return dq, dk, dv, ds_bias, sink_terms, output


# The backward pass is cut into at least this many units of work, when the
# keys allow (a part's keys in ranges of about equal cost, when batch × K/V
# heads gives fewer parts): enough for the threads of up to UNITS cores, and
# not decided by the workers, so that the gradients' sums are the same
# whatever the machine. Each extra range holds its own dQ, n_q × d_k.
UNITS = 4

# A block the band cuts (causal's diagonal, a window's edges) is cut into
# halves of its queries, each against the keys it may see, while that spares
# a fifth of its logits and the halves keep at least SMALLEST_ROWS queries:
# causal's 128 × 128 diagonal as 64 × 64 and 64 × 128, 3/4 of the block.
SMALLEST_ROWS = 64

Plan = list[tuple[slice, list[tuple[slice, bool]]]]  # [(rows, [(cols, inside)])]


@dataclass(frozen=True)
class _Unit:
    """A part of the problem (one K/V head with its group of query heads),
    over one range of its keys: the blocks to visit, by rows of queries."""

    where: tuple[slice, ...]  # the part's place on the leading axes (``Problem.heads``)
    part: Problem
    plan: Plan
    key_range: int  # which of the part's key ranges: 0 adds to dQ, the others to a dQ of their own
    cost: int  # logits it computes


@dataclass
class _PartSums:
    """A part's views of what the blocks add to: dQ [..., n_q, d_k], dK [..., n_k, d_k],
    dV [..., n_k, d_v], and dS summed to the bias's shape, added to under ``shared``."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    ds_bias: np.ndarray | None
    shared: threading.Lock


def _block_plan(p: Problem, block: int) -> Plan:
    """The blocks the backward visits: [(rows, [(cols, inside)])], queries in
    blocks of ``block``, each against the keys some query of it may see under
    causal and the window (``visible_keys``, as in the forward kernel) in
    blocks aligned on multiples of ``block``; ``inside`` when every query of
    the block sees every key of it (``seen_by_all``: no band to apply). A
    block the band cuts goes in halves of its queries (``_halves``), each a
    plan entry of its own. The same for every part."""
    plan: Plan = []
    for start in range(0, p.n_q, block):
        rows = slice(start, min(start + block, p.n_q))
        keys = _keys(p, rows)
        whole = []
        for first in range(keys.start - keys.start % block, keys.stop, block):
            cols = slice(max(first, keys.start), min(first + block, keys.stop))
            pieces = _halves(p, rows, cols)
            if len(pieces) == 1 and pieces[0][0] == rows:
                whole.append(pieces[0][1:])
            else:
                plan += [(half, [(keys_of_half, inside)]) for half, keys_of_half, inside in pieces]
        if whole:
            plan.append((rows, whole))
    return plan


def _keys(p: Problem, rows: slice) -> slice:
    """The keys some query of ``rows`` may see under causal and the window."""
    keys = visible_keys(range(rows.start, rows.stop), p.n_q, p.n_k, p.options.causal, p.options.window)
    return slice(keys.start, keys.stop)


def _halves(p: Problem, rows: slice, cols: slice) -> list[tuple[slice, slice, bool]]:
    """A block of the plan as [(rows, cols, inside)]: itself, inside when
    every query sees every key (``seen_by_all``), or, when the band cuts it,
    its halves of queries against the keys each may see, while that spares a
    fifth of the logits (and again within each half)."""
    every = seen_by_all(range(rows.start, rows.stop), p.n_q, p.n_k, p.options.causal, p.options.window)
    if every.start <= cols.start and cols.stop <= every.stop:
        return [(rows, cols, True)]
    r = rows.stop - rows.start
    if r >= 2 * SMALLEST_ROWS:
        middle = rows.start + r // 2
        halves = []
        for half in (slice(rows.start, middle), slice(middle, rows.stop)):
            seen = _keys(p, half)
            keys = slice(max(cols.start, seen.start), min(cols.stop, seen.stop))
            if keys.stop > keys.start:
                halves.append((half, keys))
        kept = sum((h.stop - h.start) * (k.stop - k.start) for h, k in halves)
        if 5 * kept <= 4 * r * (cols.stop - cols.start):
            return [piece for half, keys in halves for piece in _halves(p, half, keys)]
    return [(rows, cols, False)]


def _units(p: Problem, block: int) -> list[_Unit]:
    """The work: batch × K/V heads (``Problem.heads``), and, when that gives
    fewer than UNITS parts, each part's key blocks in ranges of about equal
    cost (causal: the first keys are seen by the most queries), so that up
    to UNITS threads have work. Costliest first, as the kernel hands out."""
    plan = _block_plan(p, block)
    key_blocks = -(-p.n_k // block)
    cost = np.zeros(key_blocks)  # logits computed per key block
    for rows, blocks in plan:
        for cols, _ in blocks:
            cost[cols.start // block] += (rows.stop - rows.start) * (cols.stop - cols.start)
    parts = p.heads()
    ranges = min(key_blocks, -(-UNITS // len(parts)))
    running = np.cumsum(cost)
    cuts = sorted({0, key_blocks} | {int(np.argmin(np.abs(running - running[-1] * i / ranges))) + 1
                                     for i in range(1, ranges)})
    plans = []  # each range's plan: its key blocks [a, b)
    for a, b in itertools.pairwise(cuts):
        kept = [(rows, [(cols, inside) for cols, inside in blocks if a <= cols.start // block < b])
                for rows, blocks in plan]
        kept = [(rows, blocks) for rows, blocks in kept if blocks]
        if kept:
            plans.append((kept, int(cost[a:b].sum())))
    units = [_Unit(where, part, kept, index, math.prod(part.logits_shape[:-2]) * logits)
             for where, part in parts for index, (kept, logits) in enumerate(plans)]
    units.sort(key=lambda unit: unit.cost, reverse=True)
    return units


def _backward_part(unit: _Unit, qm: np.ndarray, km: np.ndarray, v: np.ndarray, do: np.ndarray, lse: np.ndarray,
                   delta: np.ndarray, sums: _PartSums) -> None:
    """One unit's blocks, added into ``sums``.

    The rows it visits are laid out query by query, each query's group of
    heads together ([r · g, ...]: a K/V head's group of query heads), so that
    a block of queries is one slice and one product sums dK and dV over the
    group (K and V never copied). −L and −D ride as one more column of Q and
    dO, against a column of ones after K and V, so that the products give
    S − L and dP − D (``_Operands``). Each operand is written once into its
    own array: temporaries of this size freed in pairs made the allocator
    give pages back and fault them in again, 0.5 ms each (measured)."""
    part = unit.part
    lead = part.logits_shape[:-2]  # [1, ..., (group)]: one K/V head
    group, factor = math.prod(lead), part.factor
    fold = part.options.softcap is None  # S − L in the product: every option but the soft-cap adds or masks
    rows = slice(min(r.start for r, _ in unit.plan), max(r.stop for r, _ in unit.plan))  # the queries it visits
    keys = slice(min(c.start for _, b in unit.plan for c, _ in b), max(c.stop for _, b in unit.plan for c, _ in b))

    def by_query(m: np.ndarray, scale: float = 1.0, column: np.ndarray | float | None = None) -> np.ndarray:
        """[..., (g,) n_q, m] -> the rows' [r · g, m] (query i's heads together) · scale, and a column after."""
        def laid_out(x: np.ndarray) -> np.ndarray:  # [..., (g,) n_q, m] -> the rows' [r, g, m], a view
            return np.swapaxes(np.broadcast_to(x, lead + x.shape[-2:]).reshape(group, *x.shape[-2:])[:, rows], 0, 1)

        width = m.shape[-1] + (column is not None)
        out = np.empty((rows.stop - rows.start, group, width))  # [r, g, m (+ 1)]
        np.multiply(laid_out(m), scale, out=out[..., :m.shape[-1]])
        if isinstance(column, np.ndarray):
            np.negative(laid_out(column), out=out[..., -1:])
        elif column is not None:
            out[..., -1] = column
        return out.reshape(-1, width)

    def with_ones(m: np.ndarray) -> np.ndarray:
        """One K/V head's keys [..., n_k, m] -> [c, m + 1]: the unit's keys and a column of ones."""
        m = m.reshape(m.shape[-2:])[keys]
        out = np.empty((m.shape[0], m.shape[1] + 1))
        out[:, :-1], out[:, -1] = m, 1.0
        return out

    at = _Operands(
        q=by_query(qm, factor, lse if fold else 0.0),  # [Q · factor, −L]
        do=by_query(do, 1.0, delta),  # [dO, −D]
        lse=None if fold else by_query(lse),
        k=with_ones(km), v=with_ones(v), k_scaled=np.multiply(km.reshape(km.shape[-2:])[keys], factor),
        dq=np.zeros(((rows.stop - rows.start) * group, qm.shape[-1])),
        dk=sums.dk.reshape(sums.dk.shape[-2:]), dv=sums.dv.reshape(sums.dv.shape[-2:]),  # views of all n_k
        group=group, first_row=rows.start, first_key=keys.start)
    for block_rows, blocks in unit.plan:
        for cols, inside in blocks:
            _backward_block(part, block_rows, cols, inside, at, sums)
    dq = np.swapaxes(at.dq.reshape(rows.stop - rows.start, group, -1), 0, 1)  # [g, r, d_k]
    sums.dq[..., rows, :] += dq.reshape(lead + dq.shape[-2:])


@dataclass
class _Operands:
    """One unit's operands as its blocks use them: its rows [r · g, ...] (query
    by query, each query's group of heads together) from ``first_row`` on, its
    keys [c, ...] (one K/V head) from ``first_key`` on."""

    q: np.ndarray  # [r · g, d_k + 1] [Q · factor, −L] (−L: 0 with a soft-cap, then subtracted after it)
    do: np.ndarray  # [r · g, d_v + 1] [dO, −D]
    lse: np.ndarray | None  # [r · g, 1] L, with a soft-cap
    k: np.ndarray  # [c, d_k + 1] [K, 1]
    v: np.ndarray  # [c, d_v + 1] [V, 1]
    k_scaled: np.ndarray  # [c, d_k] K · factor
    dq: np.ndarray  # [r · g, d_k] dQ so far
    dk: np.ndarray  # [n_k, d_k] views of the part's dK and dV, every key
    dv: np.ndarray  # [n_k, d_v]
    group: int
    first_row: int
    first_key: int

    def logits(self, z: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
        """A block [r · g, c] as the options see it: [..., g, r, c], a view."""
        r = z.shape[0] // self.group
        return np.swapaxes(z.reshape(r, self.group, z.shape[-1]), 0, 1).reshape(lead + (r, z.shape[-1]))


def _backward_block(p: Problem, rows: slice, cols: slice, inside: bool, at: _Operands, sums: _PartSums) -> None:
    """One block of queries × keys: P recomputed once from L, five products.
    ``inside``: no band to apply (``combine``)."""
    lead = p.logits_shape[:-2]
    mine = slice((rows.start - at.first_row) * at.group, (rows.stop - at.first_row) * at.group)  # the rows' [r · g]
    theirs = slice(cols.start - at.first_key, cols.stop - at.first_key)  # the keys' [c] of the unit's
    d_k, d_v = at.k_scaled.shape[-1], at.dv.shape[-1]
    z = at.q[mine] @ at.k[theirs].T  # [r·g, d_k + 1] @ [d_k + 1, c] -> [r·g, c] S − L (S = Q Kᵀ · factor)
    logits = at.logits(z, lead)  # [..., g, r, c] a view, as the options see the block
    cap = p.options.softcap
    kept = None if cap is None else logits / float(cap)  # Z / cap [..., g, r, c], for the soft-cap's derivative
    combine(logits, p, rows, cols, inside)  # in place: + bias + ALiBi (softcap(S) first), −inf where forbidden
    if at.lse is not None:
        z -= at.lse[mine]
    weights = np.exp(z, out=z)  # [r·g, c] P = exp(logits − L): 0 where forbidden
    at.dv[cols] += weights.T @ at.do[mine, :d_v]  # [c, r·g] @ [r·g, d_v] -> [c, d_v] dV, summed over the group
    ds = at.do[mine] @ at.v[theirs].T  # [r·g, d_v + 1] @ [d_v + 1, c] -> [r·g, c] dP − D
    ds *= weights  # dS = P ∘ (dP − D)
    if sums.ds_bias is not None:  # the bias's block: [rows, cols] of an axis it has, whole on one it broadcasts
        block_of_bias = _cut(sums.ds_bias, rows, cols)  # a view
        summed = sum_to(at.logits(ds, lead), block_of_bias.shape)
        with sums.shared:
            block_of_bias += summed
    if kept is not None:  # dZ = dS ∘ (1 − tanh²(Z / cap))
        np.tanh(kept, out=kept)
        at.logits(ds, lead)[...] *= 1.0 - np.square(kept, out=kept)
    at.dq[mine] += ds @ at.k_scaled[theirs]  # [r·g, c] @ [c, d_k] -> [r·g, d_k] dQ = dZ K · factor
    at.dk[cols] += ds.T @ at.q[mine, :d_k]  # [c, r·g] @ [r·g, d_k] -> [c, d_k] dK = dZᵀ Q · factor, summed
