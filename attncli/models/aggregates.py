"""A model's attention maps combined: over heads (the mean, the largest) and
through layers (attention rollout).

    over_heads(weights, "mean")        # [layers, heads, n_q, n_k] -> [layers, n_q, n_k]
    rollout(weights)                   # [layers, heads, n, n] of layers 0 .. L − 1 -> [L, n, n]

Rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers",
§3): each layer's heads averaged, the residual connection added as the
identity, Â = ½ (A + I), each row renormalised to sum to 1, and the layers
multiplied from the first: R₀ = Â₀, R_l = Â_l R_{l−1}. Row i of R_l says how
much of token i's vector after layer l comes, through attention alone, from
each input token. Computed in float64.
"""

from __future__ import annotations

import numpy as np

AGGREGATES = ("mean", "max", "rollout")  # the ways heads (and layers) are combined


def over_heads(weights: np.ndarray, how: str) -> np.ndarray:
    """The heads of each layer combined: their mean or their largest weight.
    [layers, heads, n_q, n_k] -> [layers, n_q, n_k], float32 as the weights."""
    if how == "mean":
        return weights.mean(axis=1, dtype=np.float64).astype(weights.dtype)
    if how == "max":
        return weights.max(axis=1)
    raise ValueError(f"no aggregate {how!r} over heads: mean or max")


def rollout(weights: np.ndarray) -> np.ndarray:
    """Attention rollout through layers 0 .. L − 1: [L, heads, n, n] (every query's row)
    -> [L, n, n] float64, R_l after layer l."""
    n = weights.shape[-1]
    eye = np.eye(n)
    out = np.empty((weights.shape[0], n, n))
    flow = eye
    for layer in range(weights.shape[0]):
        a = 0.5 * weights[layer].mean(axis=0, dtype=np.float64) + 0.5 * eye  # [n, n]: the residual added
        a /= a.sum(axis=-1, keepdims=True)  # rows sum to 1 again (they may not: sinks, hidden rows)
        flow = a @ flow  # [n, n] @ [n, n] -> [n, n]
        out[layer] = flow
    return out


def rollout_reach(allowed: np.ndarray) -> np.ndarray:
    """Where rollout can be non-zero: the pairs each layer allows, with the identity,
    chained. [L, n, n] bool -> [L, n, n] bool (a window reaches further layer by layer)."""
    n = allowed.shape[-1]
    reach = np.eye(n, dtype=np.float32)
    out = np.empty(allowed.shape, dtype=bool)
    for layer in range(allowed.shape[0]):
        step = (allowed[layer] | np.eye(n, dtype=bool)).astype(np.float32)
        out[layer] = (step @ reach) > 0  # [n, n] @ [n, n]: counts of paths, each at most n
        reach = out[layer].astype(np.float32)
    return out
