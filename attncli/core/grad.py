"""The backward pass: the gradients of attention, in float64, from the
closed form, written as the equations (FlashAttention's backward, whole)::

    dV = Pᵀ dO
    dP = dO Vᵀ
    dS = P ∘ (dP − rowsum(dO ∘ O))          the softmax's Jacobian, row by row
    dZ = dS ∘ (1 − tanh²(Z / cap))          through the soft-cap (else dZ = dS)
    dQ = dZ K · factor,   dK = dZᵀ Q · factor   (factor = scale / temperature)

with P the weights, Z the scaled scores before the soft-cap, and Q, K as
they met (rotated with RoPE). Then, in order back to the inputs:

- grouped-query attention: dK and dV summed over each group's query heads;
- RoPE: the gradients of the rotated Q and K turned back (the rotation is
  orthogonal, so its transpose is the rotation by minus the angle);
- cosine similarity: through the unit-length rows;
- a forbidden pair has P = 0, so dS = 0 there; a fully masked row gives zero;
- the bias (and ALiBi) is added to the logits: dbias = dS;
- a sink s is one more logit of every row, with no value: its weight is
  p_s = 1 − rowsum(P) and dP_s = 0, so ds = Σ_rows −p_s · rowsum(dO ∘ O).

Any input that broadcast in the forward pass gets its gradient summed back
over the axes it was broadcast along. The n_q × n_k matrices are held whole
(``_whole``) or, for long inputs, never (``_blocked``: each block's dS is
summed down to the bias's broadcast shape as it goes, so dbias takes the
bias's memory, not every head's n_q × n_k).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attncli.core.arrays import shape_text, unit_rows
from attncli.core.kernel import forward
from attncli.core.logits import Problem, _cut, _pick, combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import blas_held, map_blocks
from attncli.core.positions import query_positions, rotate, seen_by_all, visible_keys
from attncli.core.reference import softmax
from attncli.errors import ShapeError


@dataclass
class BackwardSteps:
    """The intermediates of the backward pass, [..., H_q, n_q, n_k] (delta [..., H_q, n_q, 1]),
    what ``attn explain --grad`` shows; kept when the matrices are held whole."""

    dp: np.ndarray  # dO Vᵀ
    delta: np.ndarray  # rowsum(dO ∘ O) = rowsum(P ∘ dP): the softmax Jacobian's correction
    ds: np.ndarray  # P ∘ (dP − delta)
    dz: np.ndarray  # dS through the soft-cap's tanh (dS without a soft-cap)


@dataclass
class Grads:
    """The gradients of Σ O ∘ dO with respect to every input of attention."""

    dq: np.ndarray  # Q's shape [..., H_q, n_q, d_k]
    dk: np.ndarray  # K's shape [..., H_kv, n_k, d_k] (summed over each group's query heads)
    dv: np.ndarray  # V's shape [..., H_kv, n_k, d_v]
    dsinks: np.ndarray | None = None  # the sinks' shape ([H] or [..., H]), when sinks are given
    dbias: np.ndarray | None = None  # the bias's shape, when a bias is given
    output: np.ndarray | None = None  # [..., H_q, n_q, d_v] the forward output O, in float64
    steps: BackwardSteps | None = None  # dP, delta, dS, dZ, when the matrices were held whole

    def named(self) -> dict[str, np.ndarray]:
        """The gradients by name (dq, dk, dv, then dsinks and dbias when given)."""
        out = {"dq": self.dq, "dk": self.dk, "dv": self.dv}
        if self.dsinks is not None:
            out["dsinks"] = self.dsinks
        if self.dbias is not None:
            out["dbias"] = self.dbias
        return out


# Up to this many logits (every head's n_q × n_k, 32 MiB in float64) the backward
# pass holds them whole; past it, it goes in blocks of BLOCK queries × BLOCK keys.
WHOLE_CELLS = 1 << 22
BLOCK = 128


def attention_grad(q: np.ndarray, k: np.ndarray, v: np.ndarray, dout: np.ndarray,
                   options: AttentionOptions | None = None, *, block: int | None = None,
                   workers: int | None = None) -> Grads:
    """dQ, dK, dV (and dsinks, dbias) of attention for the output gradient dO.

    [..., H_q, n_q, d_k], [..., H_kv, n_k, d_k], [..., H_kv, n_k, d_v],
    dO [..., H_q, n_q, d_v] -> Grads, each gradient in its input's shape,
    in float64 whatever the inputs' dtype. ``block``: queries and keys per block
    (FlashAttention's backward, never holding n_q × n_k); 0: whole matrices,
    kept in ``Grads.steps``; None: whole up to WHOLE_CELLS logits, else blocks of BLOCK.
    In blocks, batch × K/V heads run on up to ``workers`` threads (default: every core).
    """
    options = options or AttentionOptions()
    q, k, v, dout = (np.asarray(m, dtype=np.float64) for m in (q, k, v, dout))
    if block is None and q.ndim >= 2 and k.ndim >= 2:
        heads = max(math.prod(q.shape[:-2]), math.prod(k.shape[:-2]))
        block = BLOCK if heads * q.shape[-2] * k.shape[-2] > WHOLE_CELLS else 0
    return backward(q, k, v, dout, _float64(options), block=block or None, workers=workers)


def backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, dout: np.ndarray, options: AttentionOptions,
             rounded: Callable[[np.ndarray], np.ndarray] = lambda x: x, block: int | None = None,
             workers: int | None = None) -> Grads:
    """The closed form in the inputs' dtype, each step passed through ``rounded``:
    the identity for the float64 reference; for ``attn check --grad``'s naive
    baseline, rounding to a low-precision dtype (``core.check.rounding``).
    ``block``: in blocks of that many queries and keys (``_blocked``, unrounded, on up to ``workers`` threads)."""
    p = prepare(q, k, v, options)  # Q, K rotated (RoPE); heads grouped (GQA)
    p = replace(p, q=rounded(p.q), k=rounded(p.k), v=rounded(p.v))  # as a kernel stores them
    out_shape = p.ungroup(np.empty(p.out_shape, dtype=np.int8)).shape  # [..., H_q, n_q, d_v]
    if dout.shape != out_shape:
        raise ShapeError(f"dO is {shape_text(dout)} but the output is {shape_text(out_shape)}",
                         hint="give the gradient of the output, one number per output cell")
    do = _group(rounded(dout), p)  # [..., (H_kv, group,) n_q, d_v]

    qm, km = p.q, p.k  # [..., n_q, d_k], [..., n_k, d_k] as they met (unit rows for cosine)
    if options.similarity == "cosine":
        qm, km = rounded(unit_rows(qm)), rounded(unit_rows(km))
    if block is None:
        with blas_held(workers):  # whole matrices: BLAS's threads are the parallelism, as many as attn's
            dq, dk, dv, ds_bias, sink_terms, output, steps = _whole(p, qm, km, do, options, rounded)
    else:
        dq, dk, dv, ds_bias, sink_terms, output, steps = _blocked(p, qm, km, do, options, block, workers)

    dq = p.ungroup(dq)  # [..., H_q, n_q, d_k]
    dk, dv = _ungroup_kv(dk, p), _ungroup_kv(dv, p)  # [..., H_kv, n_k, d]: summed over each group
    if options.similarity == "cosine":
        dq, dk = _through_unit_rows(dq, p.ungroup(p.q)), _through_unit_rows(dk, _ungroup_kv(p.k, p))
    if options.rope is not None:  # RoPE's rotation is orthogonal: turn back by minus the angle
        n_q, n_k = p.n_q, p.n_k
        dq = rotate(dq, -query_positions(n_q, n_k, options.rope), options.rope)
        dk = rotate(dk, -np.arange(n_k), options.rope)

    dsinks = None
    if options.sinks is not None and sink_terms is not None:
        per_head = p.ungroup(np.sum(sink_terms, axis=-2, keepdims=True))  # [..., H_q, 1, 1]
        dsinks = _sum_to(per_head[..., 0, 0], options.sinks.shape)
    dbias = None
    if options.bias is not None and ds_bias is not None:
        dbias = _sum_to(p.ungroup(ds_bias), options.bias.shape)
    return Grads(_sum_to(dq, q.shape), _sum_to(dk, k.shape), _sum_to(dv, v.shape),
                 dsinks, dbias, p.ungroup(output),
                 None if steps is None else _ungroup_steps(steps, p))


Raw = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None", np.ndarray,
            "BackwardSteps | None"]


def _whole(p: Problem, qm: np.ndarray, km: np.ndarray, do: np.ndarray, options: AttentionOptions,
           rounded: Callable[[np.ndarray], np.ndarray]) -> Raw:
    """The closed form on whole n_q × n_k matrices -> grouped dQ, dK, dV (before RoPE
    and cosine are undone), dS summed to the grouped bias's shape (None without a
    bias), each row's sink term −p_s · rowsum(dO ∘ O), O, and the steps."""
    z = rounded(scores(p, factor=p.factor))  # [..., n_q, n_k] Z = q·k · scale / temperature
    logits, _ = combine(z.copy(), p)  # [..., n_q, n_k] softcap(Z) + bias + ALiBi, −inf where forbidden
    weights = rounded(softmax(rounded(logits), sink=p.sinks))  # [..., n_q, n_k] P
    output = rounded(weights @ p.v)  # [..., n_q, n_k] @ [..., n_k, d_v] -> [..., n_q, d_v] O

    dv = rounded(np.swapaxes(weights, -1, -2) @ do)  # [..., n_k, n_q] @ [..., n_q, d_v] -> [..., n_k, d_v]
    dp = rounded(do @ np.swapaxes(p.v, -1, -2))  # [..., n_q, d_v] @ [..., d_v, n_k] -> [..., n_q, n_k]
    delta = rounded(np.sum(do * output, axis=-1, keepdims=True))  # [..., n_q, 1] rowsum(dO ∘ O) = Σ_j P_ij dP_ij
    ds = rounded(weights * (dp - delta))  # [..., n_q, n_k] dS: zero wherever P is (forbidden pairs, empty rows)
    dz = ds
    if options.softcap is not None:  # d/dZ cap · tanh(Z / cap) = 1 − tanh²(Z / cap)
        dz = rounded(ds * (1.0 - np.tanh(z / float(options.softcap)) ** 2))
    dq = rounded(dz @ km * p.factor)  # [..., n_q, n_k] @ [..., n_k, d_k] -> [..., n_q, d_k]
    dk = rounded(np.swapaxes(dz, -1, -2) @ qm * p.factor)  # [..., n_k, n_q] @ [..., n_q, d_k] -> [..., n_k, d_k]

    sink_terms = None
    if p.sinks is not None:
        sink_terms = -(1.0 - weights.sum(axis=-1, keepdims=True)) * delta  # [..., n_q, 1] −p_s · rowsum(dO ∘ O)
    ds_bias = None if p.bias is None else _sum_to(ds, p.bias.shape)  # dbias = dS, over what the bias spans
    return dq, dk, dv, ds_bias, sink_terms, output, BackwardSteps(dp, delta, ds, dz)


def _blocked(p: Problem, qm: np.ndarray, km: np.ndarray, do: np.ndarray, options: AttentionOptions,
             block: int, workers: int | None = None) -> Raw:
    """FlashAttention-2's backward, never holding n_q × n_k: -> what ``_whole`` returns.

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
    return dq, dk, dv, ds_bias, sink_terms, output, None


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
    """One unit's blocks, added into ``sums``. For each rows of its plan, the
    rows of Q, dO, L and D are laid out as [group · r, ...] (a K/V head's group
    of query heads one after the other, so that one product sums dK and dV
    over the group, K and V never copied); −L and −D ride as one more column
    of Q and dO against a column of ones after K and V, so that the products
    give S − L and dP − D (``_Rows``)."""
    part = unit.part
    lead = part.logits_shape[:-2]  # [1, ..., (group)]: one K/V head
    group = math.prod(lead)
    factor = part.factor
    k, v = km.reshape(km.shape[-2:]), v.reshape(v.shape[-2:])  # [n_k, d_k], [n_k, d_v]: one K/V head here
    keys = _Keys(_ones_after(k), _ones_after(v), k * factor)
    fold = part.options.softcap is None  # S − L in the product: every option but the soft-cap is added or masked
    for rows, blocks in unit.plan:
        r = rows.stop - rows.start

        def flat(m: np.ndarray, r: int = r, rows: slice = rows) -> np.ndarray:
            """[..., n, m] -> the rows' [group · r, m] (a copy only when the group's rows are apart)."""
            return np.reshape(np.broadcast_to(m[..., rows, :], lead + (r, m.shape[-1])), (group * r, m.shape[-1]))

        q_rows, lse_rows = flat(qm), flat(lse)  # [g·r, d_k], [g·r, 1]
        at = _Rows(np.concatenate([q_rows * factor, -lse_rows if fold else np.zeros_like(lse_rows)], axis=-1),
                   np.concatenate([flat(do), -flat(delta)], axis=-1), None if fold else lse_rows,
                   np.zeros_like(q_rows))
        for cols, inside in blocks:
            _backward_block(part, rows, cols, inside, at, keys, sums)
        sums.dq[..., rows, :] += at.dq.reshape(lead + (r, at.dq.shape[-1]))


@dataclass
class _Rows:
    """Rows of queries of one part as the blocks use them, [g·r, ...]."""

    q: np.ndarray  # [g·r, d_k + 1] [Q · factor, −L] (−L: 0 with a soft-cap, then subtracted after it)
    do: np.ndarray  # [g·r, d_v + 1] [dO, −D]
    lse: np.ndarray | None  # [g·r, 1] L, with a soft-cap
    dq: np.ndarray  # [g·r, d_k] the rows' dQ so far


@dataclass
class _Keys:
    """A part's keys as the blocks use them: one K/V head, [n_k, ...]."""

    k: np.ndarray  # [n_k, d_k + 1] [K, 1]
    v: np.ndarray  # [n_k, d_v + 1] [V, 1]
    k_scaled: np.ndarray  # [n_k, d_k] K · factor


def _ones_after(m: np.ndarray) -> np.ndarray:
    """[n, d] -> [n, d + 1]: m and a column of ones."""
    out = np.empty(m.shape[:-1] + (m.shape[-1] + 1,))
    out[..., :-1], out[..., -1] = m, 1.0
    return out


def _backward_block(p: Problem, rows: slice, cols: slice, inside: bool, at: _Rows, keys: _Keys,
                    sums: _PartSums) -> None:
    """One block of queries × keys: P recomputed once from L, five products.
    ``inside``: no band to apply (``combine``)."""
    lead = p.logits_shape[:-2]
    r, c = rows.stop - rows.start, cols.stop - cols.start
    d_k, d_v = keys.k_scaled.shape[-1], at.do.shape[-1] - 1
    z = at.q @ keys.k[cols].T  # [g·r, d_k + 1] @ [d_k + 1, c] -> [g·r, c] S − L (S = Q Kᵀ · factor)
    logits = z.reshape(lead + (r, c))  # a view, as the options see the block
    cap = p.options.softcap
    kept = None if cap is None else logits / float(cap)  # Z / cap, for the soft-cap's derivative
    combine(logits, p, rows, cols, inside)  # in place: + bias + ALiBi (softcap(S) first), −inf where forbidden
    if at.lse is not None:
        z -= at.lse
    weights = np.exp(z, out=z)  # [g·r, c] P = exp(logits − L): 0 where forbidden
    sums.dv[..., cols, :] += weights.T @ at.do[:, :d_v]  # [c, g·r] @ [g·r, d_v] -> [c, d_v] dV, summed over the group
    ds = at.do @ keys.v[cols].T  # [g·r, d_v + 1] @ [d_v + 1, c] -> [g·r, c] dP − D
    ds *= weights  # dS = P ∘ (dP − D)
    if sums.ds_bias is not None:  # the bias's block: [rows, cols] of an axis it has, whole on one it broadcasts
        block_of_bias = _cut(sums.ds_bias, rows, cols)  # a view
        summed = _sum_to(ds.reshape(lead + (r, c)), block_of_bias.shape)
        with sums.shared:
            block_of_bias += summed
    if kept is not None:  # dZ = dS ∘ (1 − tanh²(Z / cap))
        np.tanh(kept, out=kept)
        ds *= (1.0 - np.square(kept, out=kept)).reshape(ds.shape)
    at.dq += ds @ keys.k_scaled[cols]  # [g·r, c] @ [c, d_k] -> [g·r, d_k] dQ = dZ K · factor
    sums.dk[..., cols, :] += ds.T @ at.q[:, :d_k]  # [c, g·r] @ [g·r, d_k] -> [c, d_k] dK = dZᵀ Q · factor, summed


def _ungroup_steps(steps: BackwardSteps, p: Problem) -> BackwardSteps:
    """The intermediates as [..., H_q, n_q, n_k] (delta [..., H_q, n_q, 1]), as the weights are shown."""

    def whole(x: np.ndarray) -> np.ndarray:
        return p.ungroup(np.broadcast_to(x, p.logits_shape[:-1] + x.shape[-1:]))

    return BackwardSteps(whole(steps.dp), whole(steps.delta), whole(steps.ds), whole(steps.dz))

def _float64(options: AttentionOptions) -> AttentionOptions:
    """The options with their arrays in float64, so that every step runs in float64."""
    changes = {name: np.asarray(getattr(options, name), dtype=np.float64)
               for name in ("bias", "sinks", "alibi_slopes") if getattr(options, name) is not None}
    return options.but(**changes) if changes else options


def _group(x: np.ndarray, p: Problem) -> np.ndarray:
    """[..., H_q, n, m] -> [..., H_kv, group, n, m] to meet grouped Q; unchanged without grouping."""
    if p.group == 1:
        return x
    return x.reshape(*x.shape[:-3], x.shape[-3] // p.group, p.group, *x.shape[-2:])


def _ungroup_kv(x: np.ndarray, p: Problem) -> np.ndarray:
    """[..., H_kv, group, n_k, m] -> [..., H_kv, n_k, m]: a K/V head's gradient is the sum
    over the query heads of its group (what a kernel forgets when it drops the sum)."""
    if p.group == 1:
        return x
    return x.sum(axis=-3)


def _through_unit_rows(du: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The gradient of u = x / |x| taken back to x: (du − u (u · du)) / |x|, row by row."""
    norm = np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), np.finfo(x.dtype).tiny)  # [..., n, 1]
    u = x / norm
    return (du - u * np.sum(u * du, axis=-1, keepdims=True)) / norm


def _sum_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """x summed over the axes an input of ``shape`` was broadcast along, back to ``shape``."""
    extra = x.ndim - len(shape)
    if extra > 0:
        x = x.sum(axis=tuple(range(extra)))
    elif extra < 0:  # an input with more axes of 1 than the result has axes (one sink for a 2-D problem)
        x = x.reshape((1,) * -extra + x.shape)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    if axes:
        x = x.sum(axis=axes, keepdims=True)
    return x.reshape(shape)
