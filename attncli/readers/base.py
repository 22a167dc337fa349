"""What every reader shares: the Matrix and Bundle they return and the checks
on numbers, so that each format reports problems the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attncli.errors import AttnError


@dataclass
class Matrix:
    """A 2-D array with optional row and column names."""

    values: Any  # np.ndarray [rows, cols]: float32/float64, or bool for a mask
    row_labels: list[str] | None = None
    col_labels: list[str] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape


@dataclass
class Bundle:
    """Named matrices from one file (q, k, v, ...) and its plain settings."""

    matrices: dict[str, Matrix]
    meta: dict[str, Any] = field(default_factory=dict)


def decode_text(data: bytes, source: str) -> str:
    if not data.strip():
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise AttnError("is not UTF-8 text", source=source, line=line,
                        hint="a binary file? NPY files start with \\x93NUMPY") from None


def parse_number(text: str) -> float | None:
    """Python float syntax, or None when the text is not a number."""
    try:
        return float(text)
    except ValueError:
        return None


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


CHECK_BLOCK = 1 << 20  # cells checked at a time for NaN/inf


def first_bad(values: Any, mask: bool) -> tuple[int, int] | None:
    """(row, col) of the first NaN/inf (a mask may hold -inf), or None."""
    import numpy as np

    if values.dtype == bool:
        return None
    step = max(1, CHECK_BLOCK // max(1, values.shape[1]))
    for start in range(0, values.shape[0], step):  # in blocks: a mapped file is never read whole
        block = values[start : start + step]
        bad = np.isnan(block) | (np.isposinf(block) if mask else np.isinf(block))
        if bad.any():
            i, j = np.argwhere(bad)[0]
            return start + int(i), int(j)
    return None


def not_finite(value: float, mask: bool) -> str:
    allowed = " (a mask may hold -inf)" if mask else ""
    return f"{value} is not a finite number{allowed}"


def checked_labels(labels: list[str] | None, count: int, source: str, what: str) -> list[str] | None:
    if labels is not None and len(labels) != count:
        raise AttnError(f"{what} has {len(labels)} names for {count} entries", source=source)
    return labels
