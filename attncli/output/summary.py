"""How much of a big matrix a table view shows: the one place that decides.

A table stops being readable long before it stops fitting in memory, and
Rich lays out about 5,000 cells a second: a 3,000 × 3,000 heatmap would take
half an hour to draw. A matrix of more than TABLE_CELLS cells is therefore
shown by its first SHOWN_ROWS rows and SHOWN_COLUMNS columns, with a line
that says what is left out and how to get all of it; the data formats
(``-f json``, ``-f csv/tsv/npy --emit …``) always hold everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

TABLE_CELLS = 2_500  # a matrix up to this many cells is shown whole (50 × 50, about half a second)
SHOWN_ROWS = 50  # of a larger one, the first rows shown
SHOWN_COLUMNS = 50  # and the first columns
SHOWN_TABLES = 12  # tables of one kind (one per head, layer or query) shown one under another
GET_EVERYTHING = "all of it: --format json, or csv/tsv/npy with --emit"


@dataclass
class Part:
    """The part of a matrix a table shows, and the line saying what is left out (None: all of it)."""

    values: Any  # [rows shown, columns shown]
    rows: list[Any]
    cols: list[Any]
    allowed: Any  # the mask's part, or None
    note: Text | None


def shown_part(values: Any, rows: Sequence[Any], cols: Sequence[Any], allowed: Any = None) -> Part:
    """The first rows and columns of ``values`` [n, m] a table shows, with their labels."""
    n, m = values.shape
    if n * m <= TABLE_CELLS:
        return Part(values, list(rows), list(cols), allowed, None)
    r, c = min(n, SHOWN_ROWS), min(m, SHOWN_COLUMNS)
    cut = None if allowed is None else allowed[:r, :c]
    return Part(values[:r, :c], list(rows[:r]), list(cols[:c]), cut, left_out(n, m, r, c))


def left_out(n: int, m: int, r: int, c: int) -> Text:
    """'first 50 of 3,000 rows and 50 of 3,000 columns shown (all of it: …)'."""
    parts = [f"{r:,} of {n:,} rows" if r < n else "", f"{c:,} of {m:,} columns" if c < m else ""]
    shown = " and ".join(p for p in parts if p)
    return Text(f"… the first {shown} are shown ({GET_EVERYTHING})", style="dim")


def first_lines(count: int, limit: int = SHOWN_ROWS, what: str = "") -> tuple[range, Text | None]:
    """Which of ``count`` lines or tables (one per key, query, head…) a view
    shows, at most ``limit``, and the line that counts the rest (None: all shown)."""
    if count <= limit:
        return range(count), None
    more = f"{count - limit:,} more{' ' + what if what else ''}"
    return range(limit), Text(f"… and {more} ({GET_EVERYTHING})", style="dim")
