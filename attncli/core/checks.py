"""The checks settings share: a positive finite number, a whole number, a real
number; and the window side that has no limit."""

from __future__ import annotations

import math
import numbers
from typing import Any

from attncli.errors import UsageError

UNBOUNDED = -1  # a window side of -1 has no limit (FlashAttention's window_size)


def check_positive(name: str, value: float | None) -> None:
    """None passes (a default applies); anything else must be finite and > 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{name} must be a positive finite number, got {value}")


def is_int(value: Any) -> bool:
    """A whole number (any integer type), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A real number (any real type), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def either(names: tuple[str, ...]) -> str:
    """'a, b or c'."""
    return ", ".join(names[:-1]) + " or " + names[-1]
