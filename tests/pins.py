"""Pinned outputs of torch and transformers against the same made again live.

The pins were made on one machine (an Intel Xeon, MKL's products). torch's
float16, bfloat16 and float32 arithmetic is not the same bit for bit on every
CPU: made again on an AMD EPYC, 3 of 56 float16 outputs in tests/test_check_hf.py
had one number one unit in the last place away (1 of 512 or 2,048). So a
live comparison allows one unit in the last place of the dtype torch computed
in, no more.
"""

from __future__ import annotations

import numpy as np

LIVE_UNITS = 1


def units_apart(live: np.ndarray, pinned: np.ndarray) -> int:
    """The most units in the last place between two arrays of one 16- or 32-bit
    float type, or their bit patterns (0 when equal; NaN patterns compare as bits)."""
    live, pinned = np.asarray(live), np.asarray(pinned)
    assert live.shape == pinned.shape and live.itemsize == pinned.itemsize, (live.dtype, pinned.dtype)
    a, b = _ordered(live), _ordered(pinned)
    return int(np.abs(a - b).max()) if a.size else 0


def _ordered(x: np.ndarray) -> np.ndarray:
    """Bit patterns as integers in the order of the numbers they stand for (±0 both 0)."""
    bits = np.ascontiguousarray(x).view(np.uint16 if x.itemsize == 2 else np.uint32).astype(np.int64)
    sign = 1 << (8 * x.itemsize - 1)
    return np.where(bits & sign, -(bits & (sign - 1)), bits)
