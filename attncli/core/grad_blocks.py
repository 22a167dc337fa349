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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.core.arrays import sum_to
from attncli.core.kernel import forward
from attncli.core.logits import Problem, _cut, _pick, combine
from attncli.core.parallel import map_blocks
from attncli.core.positions import band_weights, seen_by_all, visible_keys

Sums = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None", np.ndarray]


def in_blocks(
    p: Problem,
    qm: np.ndarray,
    km: np.ndarray,
    do: np.ndarray,
    block: int,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Sums:
    """FlashAttention-2's backward, never holding n_q × n_k -> grouped dQ, dK, dV
    (before RoPE and cosine are undone; dK and dV summed over each group), dS
    summed to the grouped bias's shape (None without a bias), each row's sink
    term −p_s · D (None without sinks), and O.

    The forward kernel (``kernel.forward``) gives O and each row's log-sum-exp L;
    D = rowsum(dO ∘ O) and each row's sink term follow from them. Then each
    block of up to ``block`` / group queries (each with its group of heads) ×
    ``block`` keys that the causal triangle and the window leave (``_block_plan``;
    the others are never visited) recomputes P once, exp(logits − L), and five
    products give its share of the gradients (``_backward_block``). With a
    bias, each block's dS is summed down to the bias's (grouped) shape into its
    [rows, cols], so dbias takes the bias's memory. The work goes in units
    (``_units``) on the thread pool (``map_blocks``, up to ``workers``
    threads); how it is cut does not depend on ``workers``, so neither do the
    sums (but for a bias shared by units). ``progress(done, total)`` is told of
    each unit done."""
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
    local = threading.local()  # each thread's block-sized buffers, for this call
    units = _units(p, block)
    partial = {
        id(unit): np.zeros(unit.part.logits_shape[:-2] + (n_q, qm.shape[-1])) for unit in units if unit.key_range > 0
    }  # dQ of a part's later key ranges, added up after

    def run(unit: _Unit) -> None:
        def pick(m: np.ndarray) -> np.ndarray:
            return _pick(m, unit.where, ndim)

        dq_part = partial[id(unit)] if id(unit) in partial else pick(dq)
        sums = _PartSums(dq_part, pick(dk), pick(dv), None if ds_bias is None else pick(ds_bias), shared)
        scratch = local.__dict__.setdefault("buffers", {})
        _backward_part(unit, pick(qm), pick(km), pick(p.v), pick(do), pick(lse), pick(delta), sums, scratch)

    map_blocks(run, units, workers, progress)
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
# causal's 256 × 256 diagonal as 128 × 128 (itself as 64 × 64 and 64 × 128)
# and 128 × 256, 11/16 of the block (the triangle is 1/2).
SMALLEST_ROWS = 64

# A thread holds [K, 1] and [V, 1] of up to this many keys at once (2 MiB for
# d = 64), each written once for every query block that visits them.
KEY_CHUNK = 2048

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
    block: int  # the plan's block: its keys are aligned on multiples of it


@dataclass
class _PartSums:
    """A part's views of what the blocks add to: dQ [..., n_q, d_k], dK [..., n_k, d_k],
    dV [..., n_k, d_v], and dS summed to the bias's shape, added to under ``shared``."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    ds_bias: np.ndarray | None
    shared: threading.Lock


def _block_plan(p: Problem, rows_block: int, key_block: int) -> Plan:
    """The blocks the backward visits: [(rows, [(cols, inside)])], queries in
    blocks of ``rows_block``, each against the keys some query of it may see
    under causal and the window (``visible_keys``, as in the forward kernel)
    in blocks aligned on multiples of ``key_block``; ``inside`` when every
    query of the block sees every key of it (``seen_by_all``: no band to
    apply). A block the band cuts goes in halves of its queries (``_halves``),
    each a plan entry of its own. The same for every part."""
    plan: Plan = []
    for start in range(0, p.n_q, rows_block):
        rows = slice(start, min(start + rows_block, p.n_q))
        keys = _keys(p, rows)
        whole = []
        for first in range(keys.start - keys.start % key_block, keys.stop, key_block):
            cols = slice(max(first, keys.start), min(first + key_block, keys.stop))
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
    # A block's rows of logits are its queries × their group of heads: block / group
    # queries, so that GQA's blocks hold as many logits as others (measured: 0.89×
    # and 0.92× the time of blocks of 256 queries on [1, 16, 1024, 64] causal with
    # 4 and 2 K/V heads, one thread).
    plan = _block_plan(p, max(1, block // p.group), block)
    key_blocks = -(-p.n_k // block)
    cost = np.zeros(key_blocks)  # logits computed per key block
    for rows, blocks in plan:
        for cols, _ in blocks:
            cost[cols.start // block] += (rows.stop - rows.start) * (cols.stop - cols.start)
    parts = p.heads()
    ranges = min(key_blocks, -(-UNITS // len(parts)))
    running = np.cumsum(cost)
    cuts = sorted(
        {0, key_blocks} | {int(np.argmin(np.abs(running - running[-1] * i / ranges))) + 1 for i in range(1, ranges)}
    )
    plans = []  # each range's plan: its key blocks [a, b)
    for a, b in itertools.pairwise(cuts):
        kept = [
            (rows, [(cols, inside) for cols, inside in blocks if a <= cols.start // block < b]) for rows, blocks in plan
        ]
        kept = [(rows, blocks) for rows, blocks in kept if blocks]
        if kept:
            plans.append((kept, int(cost[a:b].sum())))
    units = [
        _Unit(where, part, kept, index, math.prod(part.logits_shape[:-2]) * logits, block)
        for where, part in parts
        for index, (kept, logits) in enumerate(plans)
    ]
    units.sort(key=lambda unit: unit.cost, reverse=True)
    return units


def _backward_part(
    unit: _Unit,
    qm: np.ndarray,
    km: np.ndarray,
    v: np.ndarray,
    do: np.ndarray,
    lse: np.ndarray,
    delta: np.ndarray,
    sums: _PartSums,
    scratch: dict[tuple[str, int, int], np.ndarray],
) -> None:
    """One unit's blocks, added into ``sums``. For each rows of its plan, their
    Q · factor, dO, L and D are laid out query by query, each query's group
    of heads together ([r · g, ...]: a K/V head's group of query heads), so
    that one product sums dK and dV over the group, K and V views of the
    inputs (never copied). Everything is written into block-sized buffers
    (``scratch``, the thread's), so that extra memory stays a few blocks
    whatever n is."""
    part = unit.part
    lead = part.logits_shape[:-2]  # [1, ..., (group)]: one K/V head
    group = math.prod(lead)

    def by_query(m: np.ndarray) -> np.ndarray:
        """[..., (g,) n_q, m] -> [n_q, g, m], a view: query i's heads together."""
        return np.swapaxes(np.broadcast_to(m, lead + m.shape[-2:]).reshape(group, *m.shape[-2:]), 0, 1)

    rows_of = {name: by_query(m) for name, m in (("q", qm), ("do", do), ("lse", lse), ("delta", delta))}
    k, v = km.reshape(km.shape[-2:]), v.reshape(v.shape[-2:])  # one K/V head here: [n_k, d] views
    dk, dv = sums.dk.reshape(sums.dk.shape[-2:]), sums.dv.reshape(sums.dv.shape[-2:])
    fold = part.options.softcap is None  # S − L in the product: every option but the soft-cap adds or masks
    span = unit.block * max(1, KEY_CHUNK // unit.block)  # aligned on blocks, as the plan's keys are
    first = min(cols.start for _, blocks in unit.plan for cols, _ in blocks)
    last = max(cols.stop for _, blocks in unit.plan for cols, _ in blocks)
    for start in range(first - first % span, last, span):
        chunk = slice(max(start, first), min(start + span, last))
        keys = _Keys(
            _with_ones(scratch, "k", k[chunk]), _with_ones(scratch, "v", v[chunk]), k, dk, dv, group, chunk.start
        )
        for rows, blocks in unit.plan:
            here = [(cols, inside) for cols, inside in blocks if chunk.start <= cols.start < chunk.stop]
            if here:
                _backward_rows(part, rows, here, rows_of, keys, sums, scratch, fold)


def _backward_rows(
    part: Problem,
    rows: slice,
    blocks: list[tuple[slice, bool]],
    rows_of: dict[str, np.ndarray],
    keys: _Keys,
    sums: _PartSums,
    scratch: dict[tuple[str, int, int], np.ndarray],
    fold: bool,
) -> None:
    """One rows of queries of a unit's plan against its key blocks in the keys at hand."""
    lead = part.logits_shape[:-2]
    group, r = keys.group, (rows.stop - rows.start) * keys.group

    def laid(name: str, column: str | None, scale: float = 1.0) -> np.ndarray:
        """The rows' [r · g, m (+ 1)] of ``name`` (times ``scale``) in a buffer, minus ``column`` after it."""
        m = rows_of[name][rows]  # [r, g, m] a view
        out = _buffer(scratch, name, r, m.shape[-1] + (column is not None))
        into = out.reshape(m.shape[:-1] + out.shape[-1:])  # [r, g, m (+ 1)]
        np.multiply(m, scale, out=into[..., : m.shape[-1]])
        if column is not None:
            np.negative(rows_of[column][rows], out=into[..., -1:])
        return out

    at = _Rows(
        q=laid("q", "lse", part.factor),
        do=laid("do", "delta"),
        lse=None if fold else laid("lse", None),
        dq=_buffer(scratch, "dq", r, rows_of["q"].shape[-1]),
    )
    if not fold:
        at.q[:, -1] = 0.0  # with a soft-cap, L is subtracted after it
    at.dq[...] = 0.0
    for cols, inside in blocks:
        _backward_block(part, rows, cols, inside, at, keys, sums, scratch)
    dq = np.swapaxes(at.dq.reshape(rows.stop - rows.start, group, -1), 0, 1)  # [g, r, d_k] a view
    dq *= part.factor  # dZ K · factor
    sums.dq[..., rows, :] += dq.reshape(lead + dq.shape[-2:])


@dataclass
class _Rows:
    """A plan entry's rows as its blocks use them, [r · g, ...] (query by query,
    each query's group of heads together), in the thread's buffers; −L and −D
    ride as one more column of Q and dO, against a column of ones after K and V,
    so that the products give S − L and dP − D."""

    q: np.ndarray  # [r · g, d_k + 1] [Q · factor, −L] (with a soft-cap: [Q · factor, 0])
    do: np.ndarray  # [r · g, d_v + 1] [dO, −D]
    lse: np.ndarray | None  # [r · g, 1] L, with a soft-cap
    dq: np.ndarray  # [r · g, d_k] Σ dZ K so far


@dataclass
class _Keys:
    """A unit's keys at hand, one K/V head: [K, 1] and [V, 1] of the keys from
    ``first`` on (in the thread's buffers), and [n_k, ...] views of K and of the
    part's dK and dV."""

    k_ones: np.ndarray  # [c, d_k + 1]
    v_ones: np.ndarray  # [c, d_v + 1]
    k: np.ndarray  # [n_k, d_k]
    dk: np.ndarray  # [n_k, d_k]
    dv: np.ndarray  # [n_k, d_v]
    group: int
    first: int

    def logits(self, z: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
        """A block [r · g, c] as the options see it: [..., g, r, c], a view."""
        if self.group == 1:
            return z.reshape(lead + z.shape)
        r = z.shape[0] // self.group
        return np.swapaxes(z.reshape(r, self.group, z.shape[-1]), 0, 1).reshape(lead + (r, z.shape[-1]))


def _buffer(scratch: dict[tuple[str, int, int], np.ndarray], name: str, rows: int, cols: int) -> np.ndarray:
    """The thread's [rows, cols] buffer for ``name``, made on first use: a block's
    arrays are not allocated anew for every block (freeing them in pairs made the
    allocator give pages back and fault them in again, 0.5 ms a time here)."""
    key = (name, rows, cols)
    if key not in scratch:
        scratch[key] = np.empty((rows, cols))
    return scratch[key]


def _backward_block(
    p: Problem,
    rows: slice,
    cols: slice,
    inside: bool,
    at: _Rows,
    keys: _Keys,
    sums: _PartSums,
    scratch: dict[tuple[str, int, int], np.ndarray],
) -> None:
    """One block of queries × keys: P recomputed once from L, five products.
    ``inside``: no band to apply (``combine``)."""
    lead = p.logits_shape[:-2]
    r, c = at.q.shape[0], cols.stop - cols.start  # r: the rows' queries × their group of heads
    d_k, d_v = at.dq.shape[-1], at.do.shape[-1] - 1
    here = slice(cols.start - keys.first, cols.stop - keys.first)
    k, v = keys.k_ones[here], keys.v_ones[here]  # [c, d + 1] [K, 1], [V, 1]
    z = np.matmul(at.q, k.T, out=_buffer(scratch, "z", r, c))  # [r·g, d_k + 1] @ [d_k + 1, c] -> [r·g, c] S − L
    logits = keys.logits(z, lead)  # [..., g, r, c] a view, as the options see the block
    cap = p.options.softcap
    kept = None if cap is None else np.divide(logits, float(cap), out=keys.logits(_buffer(scratch, "tanh", r, c), lead))
    banded = not inside and (p.options.causal is not None or p.options.window is not None)  # the band cuts it
    combine(logits, p, rows, cols, inside=True)  # in place: + bias + ALiBi (softcap(S) first), −inf where masked;
    # the band is not applied here but after exp, as weights (as the kernel's float32 blocks do)
    if at.lse is not None:
        z -= at.lse
    if banded:  # the pairs the band forbids hold any S − L: capped at 0, as every allowed one is: no overflow
        np.minimum(z, 0.0, out=z)
    weights = np.exp(z, out=z)  # [r·g, c] P = exp(logits − L): 0 where masked
    if banded:  # and 0 where the band forbids: as weights after exp, which takes 3.5× as long on −inf
        logits *= band_weights(
            range(p.n_q)[rows], range(p.n_k)[cols], p.n_q, p.n_k, p.options.causal, p.options.window, z.dtype
        )
    keys.dv[cols] += np.matmul(weights.T, at.do[:, :d_v], out=_buffer(scratch, "dv", c, d_v))  # [c, r·g] @ [r·g, d_v]
    ds = np.matmul(at.do, v.T, out=_buffer(scratch, "ds", r, c))  # [r·g, d_v + 1] @ [d_v + 1, c] -> dP − D
    ds *= weights  # dS = P ∘ (dP − D)
    if sums.ds_bias is not None:  # the bias's block: [rows, cols] of an axis it has, whole on one it broadcasts
        block_of_bias = _cut(sums.ds_bias, rows, cols)  # a view
        summed = sum_to(keys.logits(ds, lead), block_of_bias.shape)
        with sums.shared:
            block_of_bias += summed
    if kept is not None:  # dZ = dS ∘ (1 − tanh²(Z / cap))
        np.tanh(kept, out=kept)
        np.square(kept, out=kept)
        np.subtract(1.0, kept, out=kept)
        keys.logits(ds, lead)[...] *= kept
    at.dq += np.matmul(ds, keys.k[cols], out=_buffer(scratch, "dq block", r, d_k))  # [r·g, c] @ [c, d_k]: Σ dZ K
    keys.dk[cols] += np.matmul(ds.T, at.q[:, :d_k], out=_buffer(scratch, "dk", c, d_k))  # [c, r·g] @ [r·g, d_k]


def _with_ones(scratch: dict[tuple[str, int, int], np.ndarray], name: str, m: np.ndarray) -> np.ndarray:
    """[c, d] -> [c, d + 1] in the thread's buffer: m and a column of ones."""
    out = _buffer(scratch, name, m.shape[0], m.shape[1] + 1)
    out[:, :-1], out[:, -1] = m, 1.0
    return out
