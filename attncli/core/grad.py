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
(``_whole``) or, for long inputs, never: forward and backward fused by
blocks of queries that hold every key they see (``grad_fused``: six products
and one exp per logit), or, with the soft-cap, keys past what such a block
holds, or a ``block=`` given, FlashAttention-2's two passes (``_blocked``:
``grad_blocks``, P recomputed block by block from the forward's log-sum-exp).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attncli.core.arrays import shape_text, sum_to, unit_rows
from attncli.core.grad_blocks import in_blocks
from attncli.core.grad_fused import fused, usable
from attncli.core.logits import Problem, combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import blas_held
from attncli.core.positions import rotate_back, visible_keys
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


# Up to this many logits (every head's n_q × n_k, 512 KiB in float64) the backward
# pass holds them whole; past it, it goes fused by blocks of queries (grad_fused),
# or in blocks of BLOCK queries × BLOCK keys (grad_blocks). Measured side by side
# (benchmarks/README.md): whole took 0.3× the time of blocks on [2, 2, 16, 16] and
# 0.7× on [1, 4, 64, 64] causal (the blocks' fixed costs), 1.4× on [1, 8, 128, 64]
# and 1.6–3.8× on [2, 8, 256, 64]; against the fused blocks 0.3× on [2, 2, 32, 16]
# and [1, 2, 64, 32] causal, 1.1× on [1, 4, 128, 64], 2–3× on [1, 8, 128, 64]
# causal and [2, 8, 256, 64].
WHOLE_CELLS = 1 << 16
BLOCK = 256
ROWS_CELLS = 1 << 20  # the rounded closed form (check --grad's baseline) past this many logits: by rows of queries


def attention_grad(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    dout: np.ndarray,
    options: AttentionOptions | None = None,
    *,
    block: int | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Grads:
    """dQ, dK, dV (and dsinks, dbias) of attention for the output gradient dO.

    [..., H_q, n_q, d_k], [..., H_kv, n_k, d_k], [..., H_kv, n_k, d_v],
    dO [..., H_q, n_q, d_v] -> Grads, each gradient in its input's shape,
    in float64 whatever the inputs' dtype. ``block``: queries and keys per block
    (FlashAttention-2's two passes, never holding n_q × n_k); 0: whole matrices,
    kept in ``Grads.steps``; None: whole up to WHOLE_CELLS logits, else forward and
    backward fused by blocks of queries (``grad_fused``) where it applies, else blocks of BLOCK.
    In blocks, batch × K/V heads run on up to ``workers`` threads (default: every core),
    and ``progress(done, total)`` is told of each part done.
    """
    options = options or AttentionOptions()
    q, k, v, dout = (np.asarray(m, dtype=np.float64) for m in (q, k, v, dout))
    fuse = block is None
    if block is None and q.ndim >= 2 and k.ndim >= 2:
        heads = max(math.prod(q.shape[:-2]), math.prod(k.shape[:-2]))
        block = BLOCK if heads * q.shape[-2] * k.shape[-2] > WHOLE_CELLS else 0
    return backward(
        q, k, v, dout, _float64(options), block=block or None, workers=workers, progress=progress, fuse=fuse
    )


def backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    dout: np.ndarray,
    options: AttentionOptions,
    rounded: Callable[[np.ndarray], np.ndarray] = lambda x: x,
    block: int | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    fuse: bool = False,
) -> Grads:
    """The closed form in the inputs' dtype, each step passed through ``rounded``:
    the identity for the float64 reference; for ``attn check --grad``'s naive
    baseline, rounding to a low-precision dtype (``core.check.rounding``).
    ``block``: in blocks of that many queries and keys (``_blocked``, unrounded, on up to ``workers`` threads);
    with ``fuse``, fused by blocks of queries instead where ``grad_fused.usable`` (unrounded too)."""
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
        with blas_held(workers):  # whole matrices: BLAS's threads are the parallelism, as many as attn's
            dq, dk, dv, ds_bias, sink_terms, output, steps = _whole(p, qm, km, do, options, rounded)
    elif fuse and usable(p):
        dq, dk, dv, ds_bias, sink_terms, output = fused(p, qm, km, do, workers, progress)
        steps = None
    else:
        dq, dk, dv, ds_bias, sink_terms, output, steps = _blocked(p, qm, km, do, block, workers, progress)

    dq = p.ungroup(dq)  # [..., H_q, n_q, d_k]
    dk, dv = _ungroup_kv(dk, p), _ungroup_kv(dv, p)  # [..., H_kv, n_k, d]: summed over each group
    if options.similarity == "cosine":
        dq, dk = _through_unit_rows(dq, p.ungroup(p.q)), _through_unit_rows(dk, _ungroup_kv(p.k, p))
    if options.rope is not None:  # RoPE's rotation is orthogonal: turn back by minus the angle
        dq, dk = rotate_back(dq, dk, options.rope)

    dsinks = None
    if options.sinks is not None and sink_terms is not None:
        per_head = p.ungroup(np.sum(sink_terms, axis=-2, keepdims=True))  # [..., H_q, 1, 1]
        dsinks = sum_to(per_head[..., 0, 0], options.sinks.shape)
    dbias = None
    if options.bias is not None and ds_bias is not None:
        dbias = sum_to(p.ungroup(ds_bias), options.bias.shape)
    return Grads(
        sum_to(dq, q.shape),
        sum_to(dk, k.shape),
        sum_to(dv, v.shape),
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
    bias), each row's sink term −p_s · rowsum(dO ∘ O), O, and the steps.

    Past ``ROWS_CELLS`` logits (``attn check --grad``'s rounded baseline at the
    lengths kernels run at) a block of query rows at a time, against the keys some
    row of it may see under causal and the window (each row's softmax needs them
    all; the others get weight 0 whatever their score): the same steps rounded the
    same way, dK and dV summed over the blocks (in float64) before they are
    rounded once, and no steps kept. One block is the whole computation, number
    for number."""
    n_q, n_k = p.n_q, p.n_k
    heads = math.prod(np.broadcast_shapes(p.q.shape[:-2], p.k.shape[:-2]))
    step = n_q if heads * n_q * n_k <= ROWS_CELLS else max(1, ROWS_CELLS // max(1, heads * n_k))
    dqs, outputs, sinks = [], [], []
    dk_sum = dv_sum = ds_bias = None
    steps = None
    for a in range(0, n_q, step):
        rows = slice(a, min(n_q, a + step))
        keys = visible_keys(range(rows.start, rows.stop), n_q, n_k, options.causal, options.window)
        seen = slice(keys.start, keys.stop) if step < n_q and len(keys) else slice(0, n_k)
        do_r, v = do[..., rows, :], p.v[..., seen, :]  # [..., r, d_v], [..., c, d_v]
        z = rounded(scores(p, rows=rows, cols=seen, factor=p.factor))  # [..., r, c] Z = q·k · scale / temperature
        logits, _ = combine(z.copy(), p, rows, seen)  # [..., r, c] softcap(Z) + bias + ALiBi, −inf where forbidden
        weights = rounded(softmax(rounded(logits), sink=p.sinks))  # [..., r, c] P
        output = rounded(weights @ v)  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v] O

        dv_part = np.swapaxes(weights, -1, -2) @ do_r  # [..., c, r] @ [..., r, d_v] -> [..., c, d_v]
        dp = rounded(do_r @ np.swapaxes(v, -1, -2))  # [..., r, d_v] @ [..., d_v, c] -> [..., r, c]
        delta = rounded(np.sum(do_r * output, axis=-1, keepdims=True))  # [..., r, 1] rowsum(dO ∘ O) = Σ_j P_ij dP_ij
        ds = rounded(weights * (dp - delta))  # [..., r, c] dS: zero wherever P is (forbidden pairs, empty rows)
        dz = ds
        if options.softcap is not None:  # d/dZ cap · tanh(Z / cap) = 1 − tanh²(Z / cap)
            dz = rounded(ds * (1.0 - np.tanh(z / float(options.softcap)) ** 2))
        dqs.append(rounded(dz @ km[..., seen, :] * p.factor))  # [..., r, c] @ [..., c, d_k] -> [..., r, d_k]
        dk_part = np.swapaxes(dz, -1, -2) @ qm[..., rows, :] * p.factor  # [..., c, r] @ [..., r, d_k]
        if dk_sum is None or dv_sum is None:  # [..., n_k, d_k], [..., n_k, d_v] in float64
            dk_sum = np.zeros(dk_part.shape[:-2] + (n_k, dk_part.shape[-1]))
            dv_sum = np.zeros(dv_part.shape[:-2] + (n_k, dv_part.shape[-1]))
        dk_sum[..., seen, :] += dk_part
        dv_sum[..., seen, :] += dv_part
        outputs.append(output)
        if p.sinks is not None:  # [..., r, 1] −p_s · rowsum(dO ∘ O)
            sinks.append(-(1.0 - weights.sum(axis=-1, keepdims=True)) * delta)
        if p.bias is not None:  # dbias = dS, over what the bias spans (its rows and keys, or all of them)
            ds_bias = np.zeros(p.bias.shape) if ds_bias is None else ds_bias
            part = ds_bias[..., rows, :] if p.bias.shape[-2] == n_q != 1 else ds_bias
            part = part[..., seen] if p.bias.shape[-1] == n_k != 1 else part
            part += sum_to(ds, part.shape)
        if step == n_q:
            steps = BackwardSteps(dp, delta, ds, dz)
    assert dk_sum is not None and dv_sum is not None
    work = outputs[0].dtype
    dq, dk, dv = np.concatenate(dqs, axis=-2), rounded(dk_sum.astype(work)), rounded(dv_sum.astype(work))
    sink_terms = np.concatenate(sinks, axis=-2) if sinks else None
    bias_grad = None if ds_bias is None else ds_bias.astype(work)
    return dq, dk, dv, bias_grad, sink_terms, np.concatenate(outputs, axis=-2), steps


def _blocked(
    p: Problem,
    qm: np.ndarray,
    km: np.ndarray,
    do: np.ndarray,
    block: int,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Raw:
    """The same in blocks (``grad_blocks``, FlashAttention-2's backward), never holding n_q × n_k."""
    return (*in_blocks(p, qm, km, do, block, workers, progress), None)


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
