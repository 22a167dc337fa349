"""The reference: attention written as the equation, keeping every step.

    logits  = softcap(RoPE(Q) RoPE(K)ᵀ · scale / temperature) + bias + ALiBi, −∞ where forbidden
    weights = exp(logits) / (Σ exp(logits) + exp(sink))      (plain softmax without sinks)
    output  = weights V

``attn explain`` shows these steps, and every other implementation (the
blocked kernel) is tested against this one. It holds the n_q × n_k matrices
whole; for long inputs use ``attention(..., need_weights=False)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli.core.logits import check_output, combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.parallel import on_attn_threads


@dataclass
class Steps:
    """Every intermediate of one attention call, for explaining and for JSON."""

    scores: np.ndarray  # [..., n_q, n_k] q·k (or cosine) before scaling
    scale: float  # what the scores were multiplied by
    scaled: np.ndarray  # [..., n_q, n_k] scores · scale / temperature
    capped: np.ndarray | None  # [..., n_q, n_k] softcap(scaled); None without a soft-cap
    logits: np.ndarray  # [..., n_q, n_k] softcap(scaled) + bias + ALiBi; −inf = forbidden
    allowed: np.ndarray | None  # [..., n_q, n_k] bool, None when nothing is forbidden
    weights: np.ndarray  # [..., n_q, n_k] softmax of the logits; each row sums to 1 (or 0; < 1 with sinks)
    output: np.ndarray  # [..., n_q, d_v] weights V
    # RoPE(Q) [..., H_q, n_q, d_k], RoPE(K) [..., H_kv, n_k, d_k] (times a RoPE scaling's attention factor)
    rotated: tuple[np.ndarray, np.ndarray] | None = None


def softmax(x: np.ndarray, axis: int = -1, sink: np.ndarray | None = None, keys: slice | None = None) -> np.ndarray:
    """Stable softmax along ``axis``; a row that is all −inf gives all zeros.

    ``sink`` (broadcasting to x with ``axis`` of length 1): one more logit per
    row that joins the denominator and is dropped afterwards (gpt-oss's
    attention sinks), so each row sums to less than 1.

    ``keys`` (the last axis only): the caller knows every logit outside these
    is −∞ (keys no query of the block may see): the max, exp and division run
    on these alone, the sum still over the whole row, so that it adds the same
    numbers in the same order as without ``keys`` (the same result, bit for bit).
    """
    # [..., n] -> [..., n]
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    seen = x if keys is None else x[..., keys]
    if keys is not None and axis not in (-1, x.ndim - 1):
        raise ValueError("softmax: keys cut the last axis")
    peak = np.max(seen, axis=axis, keepdims=True, initial=-np.inf)
    if sink is not None:
        peak = np.maximum(peak, sink)
    peak = np.where(np.isfinite(peak), peak, 0)  # all −inf row: exp(−inf) = 0 below
    with np.errstate(over="ignore"):  # −1e308 − 1e308 = −inf: its weight is 0, as it should be
        if keys is None:
            e = np.exp(x - peak)
        else:
            e = np.zeros_like(x)
            e[..., keys] = np.exp(seen - peak)
    total = np.sum(e, axis=axis, keepdims=True)
    if sink is not None:
        total = total + np.exp(sink - peak)  # the sink's share of the denominator; it has no value
    if keys is None:
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    out = np.zeros_like(e)
    np.divide(e[..., keys], total, out=out[..., keys], where=total > 0)
    return out


@on_attn_threads  # BLAS on no more threads than attn decides (parallel.py)
def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions | None = None) -> Steps:
    """softmax(QKᵀ · scale / temperature + bias, masked) V, step by step.

    [..., H_q, n_q, d_k], [..., H_kv, n_k, d_k], [..., H_kv, n_k, d_v] -> Steps
    with weights [..., H_q, n_q, n_k] and output [..., H_q, n_q, d_v]. A query
    that may attend to nothing gets zero weights and a zero output, never NaN.
    """
    p = prepare(q, k, v, options or AttentionOptions())  # Q and K rotated (RoPE), heads grouped (GQA)
    qk = scores(p)  # [..., n_q, n_k] q·k
    with np.errstate(over="ignore"):  # an overflow is combine's to report, in one line
        scaled = qk * np.asarray(p.factor, dtype=qk.dtype)  # [..., n_q, n_k] q·k · scale / temperature
    stages: dict[str, np.ndarray] = {}
    logits, allowed = combine(scaled.copy(), p, stages=stages)  # [..., n_q, n_k] soft-capped, + bias, −inf
    weights = softmax(logits, sink=p.sinks)  # [..., n_q, n_k] each row sums to 1 (0 if all forbidden, < 1 with sinks)
    with np.errstate(over="ignore", invalid="ignore"):
        output = weights @ p.v  # [..., n_q, n_k] @ [..., n_k, d_v] -> [..., n_q, d_v]
    check_output(output)
    if allowed is not None:
        allowed = np.broadcast_to(allowed, logits.shape)
    qk, scaled, logits, weights, output = (p.ungroup(x) for x in (qk, scaled, logits, weights, output))
    capped = p.ungroup(stages["softcap"]) if "softcap" in stages else None
    rotated = None
    if p.options.rope is not None:  # Q and K as they met: rotated, K without the grouping axis
        rotated = (p.ungroup(p.q), p.k[..., 0, :, :] if p.group > 1 else p.k)
    return Steps(
        qk, p.scale, scaled, capped, logits, None if allowed is None else p.ungroup(allowed), weights, output, rotated
    )
