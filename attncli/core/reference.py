"""The reference: attention written as the equation, keeping every step.

    weights = softmax(QKᵀ · scale / temperature + bias, −∞ where forbidden)
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


@dataclass
class Steps:
    """Every intermediate of one attention call, for explaining and for JSON."""

    scores: np.ndarray  # [..., n_q, n_k] q·k (or cosine) before scaling
    scale: float  # what the scores were multiplied by
    logits: np.ndarray  # [..., n_q, n_k] scores · scale / temperature + bias; −inf = forbidden
    allowed: np.ndarray | None  # [..., n_q, n_k] bool, None when nothing is forbidden
    weights: np.ndarray  # [..., n_q, n_k] softmax of the logits; each row sums to 1 (or 0)
    output: np.ndarray  # [..., n_q, d_v] weights V


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable softmax along ``axis``; a row that is all −inf gives all zeros."""
    # [..., n] -> [..., n]
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all −inf row: exp(−inf) = 0 below
    with np.errstate(over="ignore"):  # −1e308 − 1e308 = −inf: its weight is 0, as it should be
        e = np.exp(x - peak)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray,
              options: AttentionOptions | None = None) -> Steps:
    """softmax(QKᵀ · scale / temperature + bias, masked) V, step by step.

    [..., n_q, d_k], [..., n_k, d_k], [..., n_k, d_v] -> Steps with weights
    [..., n_q, n_k] and output [..., n_q, d_v]. A query that may attend to
    nothing gets zero weights and a zero output, never NaN.
    """
    p = prepare(q, k, v, options or AttentionOptions())
    qk = scores(p)  # [..., n_q, n_k] q·k
    logits, allowed = combine(qk * p.factor, p)  # [..., n_q, n_k] scaled, + bias, −inf where forbidden
    weights = softmax(logits)  # [..., n_q, n_k] each row sums to 1 (0 if all forbidden)
    with np.errstate(over="ignore", invalid="ignore"):
        output = weights @ p.v  # [..., n_q, n_k] @ [..., n_k, d_v] -> [..., n_q, d_v]
    check_output(output)
    return Steps(qk, p.scale, logits, allowed, weights, output)
