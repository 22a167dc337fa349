"""``pins.units_apart``, what the live comparisons with torch allow: the steps of the
dtype between two numbers, across zero and in float16, bfloat16 and float32."""

import numpy as np
import pytest
from pins import units_apart


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_units_apart_counts_the_steps_between_two_numbers(dtype):
    low = pytest.importorskip("ml_dtypes").bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    one = np.array([1.0, -2.5, 0.0], dtype=low)
    bits = one.view(np.uint16 if one.itemsize == 2 else np.uint32)
    up = (bits + np.array([1, 1, 1], dtype=bits.dtype)).view(low)  # one step away from 0 for −2.5 and up from 0
    assert units_apart(one, one) == 0
    assert units_apart(up, one) == 1
    assert units_apart(np.array([-0.0], dtype=low), np.array([0.0], dtype=low)) == 0
    smallest = up[2:]  # the smallest positive number of the dtype
    assert units_apart(-smallest, smallest) == 2  # across zero: two steps
    mantissa = {"float16": 10, "bfloat16": 7, "float32": 23}[dtype]  # bits: the steps from 1 to 2
    assert units_apart(np.array([1.0], dtype=low), np.array([2.0], dtype=low)) == 1 << mantissa
    assert units_apart(bits, bits) == 0  # bit patterns compare as the numbers they stand for
