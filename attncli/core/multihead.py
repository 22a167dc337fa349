"""Projections and multi-head attention (``attn self``), in numpy.

picoGPT's mha as named steps, in the row convention: project, split heads,
attend in every head at once (the head is a batch axis of attention_steps),
merge, project out. X is [n_q, d_in]; the context Z (X itself for
self-attention) is [n_k, d_z]; W_Q [d_in, d_attn], W_K [d_z, d_attn],
W_V [d_z, d_v], optional W_O [d_v, d_out].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.arrays import broadcasts_to, result_dtype, shape_text
from attncli.core.options import AttentionOptions
from attncli.core.reference import Steps, reference
from attncli.errors import AttnError, ShapeError, UsageError


@dataclass
class MultiHeadSteps:
    """Every intermediate of one multi-head attention call."""

    q: np.ndarray  # [n_q, d_attn] X W_Q + b_q
    k: np.ndarray  # [n_k, d_attn] Z W_K + b_k
    v: np.ndarray  # [n_k, d_v] Z W_V + b_v
    heads: Steps  # batched over heads: weights [n_head, n_q, n_k], output [n_head, n_q, d_v / n_head]
    merged: np.ndarray  # [n_q, d_v] the heads' outputs side by side
    output: np.ndarray  # [n_q, d_out] merged W_O + b_o, or merged when there is no W_O

    @property
    def weights(self) -> np.ndarray:  # [n_head, n_q, n_k]
        return self.heads.weights


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """x W + b, row vectors: [..., d_in] @ [d_in, d_out] + [d_out] -> [..., d_out].

    A batch is flattened into one 2-D product: numpy's stacked matmul calls
    BLAS once per matrix, several times slower on small inputs."""
    y = x.reshape(-1, x.shape[-1]) @ w
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], w.shape[1])


def split_heads(x: np.ndarray, n_head: int) -> np.ndarray:
    """Cut the feature axis into n_head equal slices: [..., n, d] -> [..., n_head, n, d / n_head]."""
    *batch, n, d = x.shape
    return np.moveaxis(x.reshape(*batch, n, n_head, d // n_head), -2, -3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """The heads side by side again: [..., n_head, n, d_head] -> [..., n, n_head · d_head]."""
    *batch, n_head, n, d_head = x.shape
    return np.moveaxis(x, -3, -2).reshape(*batch, n, n_head * d_head)


def random_projection(seed: int, which: int, d_in: int, d_out: int) -> np.ndarray:
    """A [d_in, d_out] float64 matrix drawn from N(0, 1/d_in), as untrained weights.

    Variance 1/d_in (LeCun normal) keeps each projected feature about as large
    as an input feature, so the scaled scores stay near 1 whatever the sizes.
    Each matrix (``which``: 0 = W_Q, 1 = W_K, 2 = W_V) has its own stream of
    the seed, so giving W_Q from a file does not change the random W_K.
    """
    stream = np.random.SeedSequence(seed).spawn(which + 1)[which]
    return np.random.default_rng(stream).normal(0.0, 1.0 / math.sqrt(d_in), size=(d_in, d_out))


def multi_head_attention_steps(
    x: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    *,
    context: np.ndarray | None = None,
    w_o: np.ndarray | None = None,
    b_q: np.ndarray | None = None,
    b_k: np.ndarray | None = None,
    b_v: np.ndarray | None = None,
    b_o: np.ndarray | None = None,
    n_head: int = 1,
    options: AttentionOptions | None = None,
    **keywords: Any,
) -> MultiHeadSteps:
    """Multi-head attention of X over a context Z (X itself when None), keeping every step.

    [n_q, d_in], W_Q [d_in, d_attn], W_K [d_z, d_attn], W_V [d_z, d_v]
    -> output [n_q, d_out] (d_out = d_v without W_O) and weights [n_head, n_q, n_k].
    Each head attends with scale 1/√(d_attn / n_head) unless the options say
    otherwise. Biases are vectors (a single row or column is accepted). The
    attention settings (``options``, or the keywords of ``attention``: mask,
    causal, scale, ...) apply to every head. Shapes that do not chain raise a
    ShapeError naming both shapes.
    """
    if options is not None and keywords:
        raise UsageError(f"give AttentionOptions or keywords ({', '.join(keywords)}), not both")
    options = options if options is not None else AttentionOptions.from_keywords(**keywords)
    if isinstance(n_head, bool) or not isinstance(n_head, int) or n_head < 1:
        raise UsageError(f"the number of heads must be a positive whole number, got {n_head}")
    z_name = "X" if context is None else "Z"
    z = x if context is None else context
    dtype = result_dtype(*(np.asarray(m) for m in (x, z, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o) if m is not None))
    x, z, w_q, w_k, w_v = (np.asarray(m, dtype=dtype) for m in (x, z, w_q, w_k, w_v))
    w_o = None if w_o is None else np.asarray(w_o, dtype=dtype)
    b_q, b_k, b_v, b_o = (_bias(name, b, dtype) for name, b in (("b_q", b_q), ("b_k", b_k), ("b_v", b_v), ("b_o", b_o)))
    _check_projections(x, z, z_name, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o, n_head)
    n_q, n_k = x.shape[0], z.shape[0]
    for m in (options.mask, options.bias):
        if m is not None and not broadcasts_to(m.shape, (n_q, n_k)):
            raise ShapeError(
                f"the mask is {shape_text(m)} but each head's weights are {n_q}×{n_k} (queries × keys)",
                hint=f"give a {n_q}×{n_k} mask, or 1×{n_k} for every query",
            )

    with np.errstate(over="ignore", invalid="ignore"):
        q = linear(x, w_q, b_q)  # [n_q, d_in] @ [d_in, d_attn] -> [n_q, d_attn]
        k = linear(z, w_k, b_k)  # [n_k, d_z] @ [d_z, d_attn] -> [n_k, d_attn]
        v = linear(z, w_v, b_v)  # [n_k, d_z] @ [d_z, d_v] -> [n_k, d_v]
    _check_finite("the projections overflow: X, Z or the W hold numbers too large", q, k, v)
    heads = reference(  # [n_head, n_q, d_head], [n_head, n_k, d_head], [n_head, n_k, d_v/n_head]
        split_heads(q, n_head),
        split_heads(k, n_head),
        split_heads(v, n_head),
        options,
    )  # weights [n_head, n_q, n_k], output [n_head, n_q, d_v / n_head]
    merged = merge_heads(heads.output)  # -> [n_q, d_v]
    with np.errstate(over="ignore", invalid="ignore"):
        output = merged if w_o is None else linear(merged, w_o, b_o)  # [n_q, d_v] @ [d_v, d_out] -> [n_q, d_out]
    _check_finite("the output projection overflows: W_O holds numbers too large", output)
    return MultiHeadSteps(q, k, v, heads, merged, output)


def multi_head_attention(
    x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, **options
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention -> (output [n_q, d_out], weights [n_head, n_q, n_k]).

    See ``multi_head_attention_steps`` for the options (context, w_o, biases,
    n_head, mask, causal).
    """
    steps = multi_head_attention_steps(x, w_q, w_k, w_v, **options)
    return steps.output, steps.weights


def _bias(name: str, b: np.ndarray | None, dtype: np.dtype) -> np.ndarray | None:
    """A bias as a vector [d]; a single row [1, d] or column [d, 1] is flattened."""
    if b is None:
        return None
    b = np.asarray(b, dtype=dtype)
    if b.ndim == 2 and 1 in b.shape:
        b = b.reshape(-1)
    if b.ndim != 1:
        raise ShapeError(f"{name} must be a vector (one row or one column of numbers), got shape {shape_text(b)}")
    return b


def _check_projections(x, z, z_name, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o, n_head) -> None:
    """X, Z and the projections must chain; d_attn and d_v must split into the heads."""
    for name, m in (("X", x), (z_name, z), ("W_Q", w_q), ("W_K", w_k), ("W_V", w_v), ("W_O", w_o)):
        if m is not None and m.ndim != 2:
            raise ShapeError(f"{name} must be a matrix (rows × columns), got shape {shape_text(m)}")
    for data, data_name, w, w_name in ((x, "X", w_q, "W_Q"), (z, z_name, w_k, "W_K"), (z, z_name, w_v, "W_V")):
        if w.shape[0] != data.shape[1]:
            raise ShapeError(
                f"{data_name} is {shape_text(data)} but {w_name} is {shape_text(w)}",
                hint=f"{w_name} needs {data.shape[1]} rows, one per column of {data_name}",
            )
    if w_q.shape[1] != w_k.shape[1]:
        raise ShapeError(
            f"W_Q is {shape_text(w_q)} but W_K is {shape_text(w_k)}",
            hint="W_Q and W_K need the same number of columns, d_attn",
        )
    if w_o is not None and w_o.shape[0] != w_v.shape[1]:
        raise ShapeError(
            f"W_V is {shape_text(w_v)} but W_O is {shape_text(w_o)}",
            hint=f"W_O needs {w_v.shape[1]} rows, one per column of W_V",
        )
    if b_o is not None and w_o is None:
        raise ShapeError("b_o is given but W_O is not", hint="b_o is added after the output projection W_O")
    for b, b_name, w, w_name in (
        (b_q, "b_q", w_q, "W_Q"),
        (b_k, "b_k", w_k, "W_K"),
        (b_v, "b_v", w_v, "W_V"),
        (b_o, "b_o", w_o, "W_O"),
    ):
        if b is not None and b.shape[0] != w.shape[1]:
            raise ShapeError(
                f"{b_name} has {b.shape[0]} numbers but {w_name} is {shape_text(w)}", hint=f"one per column of {w_name}"
            )
    for w, w_name, d_name in ((w_q, "W_Q", "d_attn"), (w_v, "W_V", "d_v")):
        if w.shape[1] % n_head:
            raise ShapeError(
                f"{w_name} is {shape_text(w)}: {d_name} = {w.shape[1]} does not split into {n_head} heads",
                hint=f"the number of heads must divide {d_name}",
            )


def _check_finite(message: str, *arrays: np.ndarray) -> None:
    if not all(np.isfinite(a).all() for a in arrays):
        raise AttnError(message, hint="scale the inputs down, or pass float64 data")
