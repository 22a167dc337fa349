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

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attncli.core.arrays import shape_text, unit_rows
from attncli.core.logits import Problem, _pick, combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import map_blocks
from attncli.core.positions import query_positions, rotate
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
BLOCK = 256


def attention_grad(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    dout: np.ndarray,
    options: AttentionOptions | None = None,
    *,
    block: int | None = None,
    workers: int | None = None,
) -> Grads:
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


def backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    dout: np.ndarray,
    options: AttentionOptions,
    rounded: Callable[[np.ndarray], np.ndarray] = lambda x: x,
    block: int | None = None,
    workers: int | None = None,
) -> Grads:
    """The closed form in the inputs' dtype, each step passed through ``rounded``:
    the identity for the float64 reference; for ``attn check --grad``'s naive
    baseline, rounding to a low-precision dtype (``core.check.rounding``).
    ``block``: in blocks of that many queries and keys (``_blocked``, unrounded, on up to ``workers`` threads)."""
    p = prepare(q, k, v, options)  # Q, K rotated (RoPE); heads grouped (GQA)
    p = replace(p, q=rounded(p.q), k=rounded(p.k), v=rounded(p.v))  # as a kernel stores them
    out_shape = p.ungroup(np.empty(p.out_shape, dtype=np.int8)).shape  # [..., H_q, n_q, d_v]
    if dout.shape != out_shape:
        raise ShapeError(
            f"dO is {shape_text(dout)} but the output is {shape_text(out_shape)}",
            hint="give the gradient of the output, one number per output cell",
        )
    do = _group(rounded(dout), p)  # [..., (H_kv, group,) n_q, d_v]

    qm, km = p.q, p.k  # [..., n_q, d_k], [..., n_k, d_k] as they met (unit rows for cosine)
    if options.similarity == "cosine":
        qm, km = rounded(unit_rows(qm)), rounded(unit_rows(km))
    if block is None:
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
    return Grads(
        _sum_to(dq, q.shape),
        _sum_to(dk, k.shape),
        _sum_to(dv, v.shape),
        dsinks,
        dbias,
        p.ungroup(output),
        None if steps is None else _ungroup_steps(steps, p),
    )


Raw = tuple[
    np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None", np.ndarray, "BackwardSteps | None"
]


def _whole(
    p: Problem,
    qm: np.ndarray,
    km: np.ndarray,
    do: np.ndarray,
    options: AttentionOptions,
    rounded: Callable[[np.ndarray], np.ndarray],
) -> Raw:
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


@dataclass
class _Sums:
    """What the blocked backward adds up block by block, grouped: dQ, dK, dV, O
    [..., n, d], each row's sink term [..., n_q, 1], dS summed to the bias's shape."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    output: np.ndarray
    sink_terms: np.ndarray | None
    ds_bias: np.ndarray | None

    def at(self, where: tuple[slice, ...], ndim: int) -> _Sums:
        """Views of one part's share (``Problem.heads``' ``where``); a bias axis of length 1 is shared whole."""

        def part(m: np.ndarray | None) -> np.ndarray | None:
            return None if m is None else _pick(m, where, ndim)

        return _Sums(
            self.dq[where],
            self.dk[where],
            self.dv[where],
            self.output[where],
            part(self.sink_terms),
            part(self.ds_bias),
        )


def _blocked(
    p: Problem,
    qm: np.ndarray,
    km: np.ndarray,
    do: np.ndarray,
    options: AttentionOptions,
    block: int,
    workers: int | None = None,
) -> Raw:
    """The same in blocks of ``block`` queries × ``block`` keys, never holding n_q × n_k:
    with a bias, each block's dS is summed down to the bias's (grouped) shape into
    its [rows, cols], so dbias takes the bias's memory. Batch × K/V heads are
    independent parts (``Problem.heads``: each K/V head with its group of query
    heads, whose dK and dV it sums), run on the thread pool (``map_blocks``,
    up to ``workers`` threads). -> what ``_whole`` returns."""
    lead = p.logits_shape[:-2]
    n_q, n_k, ndim = p.n_q, p.n_k, len(p.logits_shape)
    sums = _Sums(
        dq=np.zeros(lead + (n_q, qm.shape[-1])),
        dk=np.zeros(lead + (n_k, km.shape[-1])),
        dv=np.zeros(lead + (n_k, p.v.shape[-1])),
        output=np.zeros(lead + (n_q, p.v.shape[-1])),
        sink_terms=None if p.sinks is None else np.zeros(lead + (n_q, 1)),
        ds_bias=None if p.bias is None else np.zeros(p.bias.shape),
    )
    shared = threading.Lock()  # a bias shared by several parts (broadcast over heads) is added to under it

    def run(job: tuple[tuple[slice, ...], Problem]) -> None:
        where, part = job
        _blocked_part(
            part,
            _pick(qm, where, ndim),
            _pick(km, where, ndim),
            _pick(do, where, ndim),
            options,
            block,
            sums.at(where, ndim),
            shared,
        )

    map_blocks(run, p.heads(), workers, None)
    return sums.dq, sums.dk, sums.dv, sums.ds_bias, sums.sink_terms, sums.output, None


def _blocked_part(
    p: Problem,
    qm: np.ndarray,
    km: np.ndarray,
    do: np.ndarray,
    options: AttentionOptions,
    block: int,
    sums: _Sums,
    shared: threading.Lock,
) -> None:
    """One part's blocked backward, added into ``sums``. Three passes over the keys
    of each query block, recomputing the scores: the row's max and sum (its softmax
    denominator), then P and dP give dV and rowsum(P ∘ dP) = rowsum(dO ∘ O), then dS
    gives dQ and dK."""
    lead = p.logits_shape[:-2]
    n_q, n_k = p.n_q, p.n_k
    key_blocks = [slice(start, min(start + block, n_k)) for start in range(0, n_k, block)]
    for start in range(0, n_q, block):
        rows = slice(start, min(start + block, n_q))
        do_r = do[..., rows, :]  # [..., r, d_v]

        peak = np.full(lead + (rows.stop - start, 1), -np.inf)  # [..., r, 1] running max
        if p.sinks is not None:
            peak = np.maximum(peak, p.sinks)
        for cols in key_blocks:
            peak = np.maximum(peak, _block_logits(p, rows, cols)[1].max(axis=-1, keepdims=True))
        ref = np.where(np.isfinite(peak), peak, 0.0)  # an all −inf row: every weight 0
        total = np.zeros_like(ref) if p.sinks is None else np.exp(p.sinks - ref)  # [..., r, 1]
        for cols in key_blocks:
            total = total + np.exp(_block_logits(p, rows, cols)[1] - ref).sum(axis=-1, keepdims=True)

        delta = np.zeros_like(ref)  # [..., r, 1] rowsum(P ∘ dP) = rowsum(dO ∘ O)
        for cols in key_blocks:
            _, weights = _block_weights(p, rows, cols, ref, total)
            sums.output[..., rows, :] += weights @ p.v[..., cols, :]
            dp = do_r @ np.swapaxes(p.v[..., cols, :], -1, -2)  # [..., r, c]
            delta = delta + np.sum(weights * dp, axis=-1, keepdims=True)
            sums.dv[..., cols, :] += np.swapaxes(weights, -1, -2) @ do_r
        for cols in key_blocks:
            z, weights = _block_weights(p, rows, cols, ref, total)
            dp = do_r @ np.swapaxes(p.v[..., cols, :], -1, -2)
            ds = weights * (dp - delta)  # [..., r, c] dS
            if sums.ds_bias is not None:  # the bias's block: [rows, cols] of an axis it has, whole on one it broadcasts
                block_of_bias = sums.ds_bias[
                    ...,
                    rows if sums.ds_bias.shape[-2] > 1 else slice(None),
                    cols if sums.ds_bias.shape[-1] > 1 else slice(None),
                ]
                summed = _sum_to(ds, block_of_bias.shape)
                with shared:
                    block_of_bias += summed
            dz = ds if options.softcap is None else ds * (1.0 - np.tanh(z / float(options.softcap)) ** 2)
            sums.dq[..., rows, :] += dz @ km[..., cols, :] * p.factor
            sums.dk[..., cols, :] += np.swapaxes(dz, -1, -2) @ qm[..., rows, :] * p.factor
        if sums.sink_terms is not None:
            sums.sink_terms[..., rows, :] = -np.exp(p.sinks - ref) / total * delta  # −p_s · rowsum(dO ∘ O)


def _block_logits(p: Problem, rows: slice, cols: slice) -> tuple[np.ndarray, np.ndarray]:
    """Z = q·k · scale / temperature of a block, and its logits: [..., r, c] each."""
    z = scores(p, rows, cols, p.factor)
    return z, combine(z.copy(), p, rows, cols)[0]


def _block_weights(
    p: Problem, rows: slice, cols: slice, ref: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Z and P = exp(logits − ref) / total of a block, given each row's ref and denominator [..., r, 1]."""
    z, logits = _block_logits(p, rows, cols)
    e = np.exp(logits - ref)
    return z, np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _ungroup_steps(steps: BackwardSteps, p: Problem) -> BackwardSteps:
    """The intermediates as [..., H_q, n_q, n_k] (delta [..., H_q, n_q, 1]), as the weights are shown."""

    def whole(x: np.ndarray) -> np.ndarray:
        return p.ungroup(np.broadcast_to(x, p.logits_shape[:-1] + x.shape[-1:]))

    return BackwardSteps(whole(steps.dp), whole(steps.delta), whole(steps.ds), whole(steps.dz))


def _float64(options: AttentionOptions) -> AttentionOptions:
    """The options with their arrays in float64, so that every step runs in float64."""
    changes = {
        name: np.asarray(getattr(options, name), dtype=np.float64)
        for name in ("bias", "sinks", "alibi_slopes")
        if getattr(options, name) is not None
    }
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
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    if axes:
        x = x.sum(axis=axes, keepdims=True)
    return x.reshape(shape)
