"""Small array helpers the core and the models share: shapes as text, the
result dtype, broadcasting, unit-length rows."""

from __future__ import annotations

import numpy as np


def shape_text(m: np.ndarray | tuple[int, ...]) -> str:
    """(3, 4) -> '3×4', as every message writes a shape."""
    return "×".join(str(n) for n in (m if isinstance(m, tuple) else m.shape))


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """The float dtype the maths runs in: float64 stays float64; float32,
    float16 and bfloat16 compute in float32 (as PyTorch's CPU kernels do);
    integers and anything else become float64."""
    dtypes = [np.asarray(a).dtype for a in arrays]
    if any(d.kind == "f" and d.itemsize > 4 for d in dtypes):
        return np.dtype(np.float64)
    if all(d.kind == "f" or is_bfloat16(d) for d in dtypes):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def is_bfloat16(dtype: np.dtype) -> bool:
    """ml_dtypes' bfloat16 (numpy has none of its own)."""
    return dtype.name == "bfloat16"


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Does an array of ``shape`` broadcast to exactly ``target``?"""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def unit_rows(x: np.ndarray, floor: float | None = None) -> np.ndarray:
    """Rows scaled to length 1: [..., d] -> [..., d]. A row shorter than ``floor``
    (default the dtype's smallest normal number) is divided by ``floor``, so an
    all-zero row stays zero (cosine 0, as torch's eps). BERT's pooling passes
    1e-12, torch.nn.functional.normalize's eps."""
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, np.finfo(x.dtype).tiny if floor is None else floor)


def sum_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
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
