"""Small array helpers the core and the models share: shapes as text, the
result dtype, broadcasting, unit-length rows."""

from __future__ import annotations

import numpy as np


def shape_text(m: np.ndarray | tuple[int, ...]) -> str:
    """(3, 4) -> '3×4', as every message writes a shape."""
    return "×".join(str(n) for n in (m if isinstance(m, tuple) else m.shape))


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """The float dtype the maths runs in: float32 stays float32, float64 stays
    float64, anything narrower or not a float becomes float64."""
    dtype = np.result_type(*arrays)
    return dtype if dtype.kind == "f" and dtype.itemsize >= 4 else np.dtype(np.float64)


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
