"""Scaled dot-product attention in numpy: the maths only, no I/O.

Import from here or from the package: ``from attncli import attention``.

Row vectors throughout, as in the transformer paper and the seeds:
Q is [n_q, d_k], K is [n_k, d_k], V is [n_k, d_v]; weights are [n_q, n_k] and
the output [n_q, d_v]. Leading batch axes ([..., n, d]) broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Union

import numpy as np

from attncli.errors import AttnError, ShapeError, UsageError

Causal = Union[bool, Literal["top-left", "bottom-right"]]
Similarity = Literal["dot", "cosine"]


@dataclass
class Steps:
    """Every intermediate of one attention call, for explaining and for JSON."""

    scores: np.ndarray  # [n_q, n_k] q·k (or cosine) before scaling
    scale: float  # what the scores were multiplied by
    logits: np.ndarray  # [n_q, n_k] scores · scale / temperature + mask; -inf = masked
    allowed: np.ndarray | None  # [n_q, n_k] bool, None when nothing is masked
    weights: np.ndarray  # [n_q, n_k] softmax of the logits; each row sums to 1 (or 0)
    output: np.ndarray  # [n_q, d_v] weights @ V


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable softmax along ``axis``; a row that is all -inf gives all zeros."""
    # [..., n] -> [..., n]
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all -inf row: exp(-inf) = 0 below
    e = np.exp(x - peak)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def causal_mask(n_q: int, n_k: int, align: str = "top-left") -> np.ndarray:
    """[n_q, n_k] bool, True where query i may attend to key j.

    top-left (PyTorch ``is_causal``, JAX, Keras): query i sees keys 0..i.
    bottom-right (the last query sees every key, as when n_q new tokens follow
    n_k - n_q cached ones): query i sees keys 0..i + n_k - n_q.
    """
    if align not in ("top-left", "bottom-right"):
        raise AttnError(f"unknown causal alignment {align!r}", hint="use top-left or bottom-right")
    offset = n_k - n_q if align == "bottom-right" else 0
    return np.tri(n_q, n_k, k=offset, dtype=bool)


def split_mask(mask: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Read a user's mask as (allowed, bias).

    A boolean mask, or one whose cells are all 0 or 1, says where a query may
    attend (True/1 = may attend, as in PyTorch SDPA, JAX and Keras). Any other
    float mask is added to the scaled scores; -inf there forbids the pair.
    """
    if mask is None:
        return None, None
    mask = np.asarray(mask)
    if mask.dtype == bool:
        return mask, None
    if mask.dtype.kind not in "fiu":
        raise AttnError(f"a mask must hold numbers or booleans, not {mask.dtype}")
    if np.isnan(mask).any() or np.isposinf(mask).any():
        raise AttnError("a mask may hold -inf but not NaN or +inf")
    if np.isin(mask, (0, 1)).all():
        return mask.astype(bool), None
    finite = np.isfinite(mask)
    if finite.all():
        return None, mask
    return finite, np.where(finite, mask, 0.0)  # -inf forbids the pair, like False


def _check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Q, K, V must chain: same d_k for Q and K, one value row per key."""
    for name, m in (("Q", q), ("K", k), ("V", v)):
        if m.ndim < 2:
            raise ShapeError(f"{name} must be a matrix (rows × columns), got shape {m.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(
            f"Q is {_shape(q)} but K is {_shape(k)}",
            hint="Q and K need the same number of columns, d_k",
        )
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"K is {_shape(k)} but V is {_shape(v)}",
            hint="K and V need the same number of rows: one value per key",
        )


def _shape(m: np.ndarray) -> str:
    return "×".join(str(n) for n in m.shape)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1; an all-zero row stays zero (cosine 0, as torch's eps)."""
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, np.finfo(x.dtype).tiny)


def default_scale(d_k: int, similarity: Similarity = "dot") -> float:
    """1/√d_k for dot products (keeps their spread independent of d_k); 1 for
    cosine similarity, which is already in [-1, 1]."""
    return 1.0 / math.sqrt(d_k) if similarity == "dot" else 1.0


def _result_dtype(*arrays: np.ndarray) -> np.dtype:
    dtype = np.result_type(*arrays)
    return dtype if dtype.kind == "f" and dtype.itemsize >= 4 else np.dtype(np.float64)


def attention_steps(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: np.ndarray | None = None,
    causal: Causal = False,
    similarity: Similarity = "dot",
    temperature: float = 1.0,
) -> Steps:
    """softmax(QKᵀ · scale / temperature + mask) V, keeping every step.

    ``mask`` is [n_q, n_k] or [1, n_k] (one row for every query): boolean or
    0/1 = may attend, any other float = added to the logits. ``causal`` is
    False, True (= "top-left") or "bottom-right". A query that may attend to
    nothing gets zero weights and a zero output, never NaN.
    """
    dtype = _result_dtype(q, k, v)
    q, k, v = (np.asarray(m, dtype=dtype) for m in (q, k, v))
    _check_shapes(q, k, v)
    _check_positive("scale", scale)
    _check_positive("temperature", temperature)
    n_q, d_k, n_k = q.shape[-2], q.shape[-1], k.shape[-2]
    if similarity not in ("dot", "cosine"):
        raise AttnError(f"unknown similarity {similarity!r}", hint="use dot or cosine")
    if scale is None:
        scale = default_scale(d_k, similarity)

    if similarity == "cosine":
        q, k = _unit_rows(q), _unit_rows(k)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = q @ np.swapaxes(k, -1, -2)  # [..., n_q, d_k] @ [..., d_k, n_k] -> [..., n_q, n_k]
        logits = scores * scale / temperature  # python floats keep float32 in float32
    if not np.isfinite(logits).all():
        raise AttnError(
            "attention scores overflow: Q and K hold numbers too large to multiply",
            hint="scale the inputs down, or pass float64 data",
        )

    allowed, bias = split_mask(mask)
    if causal:
        align = "top-left" if causal is True else causal
        allowed = causal_mask(n_q, n_k, align) & (True if allowed is None else allowed)
    for m in (allowed, bias):
        if m is not None and not _broadcasts_to(m.shape, logits.shape):
            raise ShapeError(
                f"the mask is {_shape(m)} but the weights are {_shape(logits)} (queries × keys)",
                hint=f"give a {n_q}×{n_k} mask, or 1×{n_k} for every query",
            )
    if bias is not None:
        logits = logits + bias.astype(dtype)
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)

    weights = softmax(logits)
    with np.errstate(over="ignore", invalid="ignore"):
        output = weights @ v  # [..., n_q, n_k] @ [..., n_k, d_v] -> [..., n_q, d_v]
    if not np.isfinite(output).all():
        raise AttnError("the output overflows: V holds numbers too large to add up",
                        hint="scale V down, or pass float64 data")
    if allowed is not None:
        allowed = np.broadcast_to(allowed, logits.shape)
    return Steps(scores, float(scale), logits, allowed, weights, output)


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: np.ndarray | None = None,
    causal: Causal = False,
    need_weights: bool = True,
    similarity: Similarity = "dot",
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """softmax(QKᵀ/√d_k)V -> (output, weights); weights None if not needed.

    [n_q, d_k], [n_k, d_k], [n_k, d_v] -> [n_q, d_v], [n_q, n_k].
    As in seed 000, a single query [d_k] gives [d_v] and [n_k] weights, and
    scalar values [n_k] give one number per query.
    See ``attention_steps`` for the mask, causal and similarity options.
    """
    q, v = np.asarray(q), np.asarray(v)
    one_query, scalar_values = q.ndim == 1, v.ndim == 1
    steps = attention_steps(
        q[None] if one_query else q, k, v[:, None] if scalar_values else v,
        scale=scale, mask=mask, causal=causal,
        similarity=similarity, temperature=temperature,
    )
    output, weights = steps.output, steps.weights
    if scalar_values:
        output = output[..., 0]
    if one_query:
        output, weights = output[0], weights[0]
    return output, (weights if need_weights else None)


def _check_positive(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{name} must be a positive finite number, got {value}")


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False
