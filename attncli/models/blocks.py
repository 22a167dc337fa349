"""The building blocks transformer families share, in numpy: a dense layer,
LayerNorm and the activations config.json names.

Row vectors and ``x @ W`` with W of shape [d_in, d_out], as everywhere in
attncli. Each function keeps float32 float32 (constants are Python floats).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.core.multihead import linear


@dataclass(frozen=True)
class Linear:
    """A dense layer's params: x @ w + b, row vectors."""

    w: np.ndarray  # [d_in, d_out]
    b: np.ndarray | None  # [d_out]; None: no bias


@dataclass(frozen=True)
class Norm:
    """A LayerNorm's params: gain and shift."""

    g: np.ndarray  # [d]
    b: np.ndarray  # [d]


def dense(x: np.ndarray, p: Linear) -> np.ndarray:
    """x W + b for every vector: [..., d_in] -> [..., d_out] (picoGPT's ``linear(x, **c_fc)``)."""
    return linear(x, p.w, p.b)


def layer_norm(x: np.ndarray, p: Norm, eps: float) -> np.ndarray:
    """Each vector to mean 0 and variance 1, then scaled by g and shifted by b."""
    # [..., d] -> [..., d]
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p.g + p.b  # eps a python float: stays float32


def rms_norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    """Each vector divided by its root mean square, then scaled by g (Llama's RMSNorm)."""
    # [..., d] -> [..., d]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g  # eps a python float: stays float32


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, vectorised (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7,
    below float32's resolution near 1); numpy has no erf and scipy is not needed."""
    p, a1, a2, a3, a4, a5 = 0.3275911, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
    sign, z = np.sign(x), np.abs(x)
    t = 1 / (1 + p * z)
    y = 1 - ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t * np.exp(-z * z)
    return sign * y


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x·Φ(x), BERT's activation ('gelu' in config.json)."""
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation ('gelu_new', 'gelu_pytorch_tanh')."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def silu(x: np.ndarray) -> np.ndarray:
    """x·σ(x), Llama's activation ('silu'), written as torch writes it: x / (1 + e^−x)."""
    with np.errstate(over="ignore"):  # e^−x overflows for x < −88 in float32: x / inf = −0, the right limit
        return x / (1 + np.exp(-x))


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {  # config.json's name -> function
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": relu,
    "silu": silu,
}
