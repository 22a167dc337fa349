"""How a delimited text file is laid out, decided once by documented rules:
which character separates cells, which marks decimals, which lines are
comments, whether the first row names the columns and the first column the
rows. ``TextSettings`` fields that are set win; where the file itself could be
read two ways, the decision is a ``Choice`` the caller reports (the CLI in an
``attn: note:``), naming the setting that picks the other reading.

The rules (the README's "Input files" says the same):

- Excel's first line ``sep=;`` names the delimiter.
- Otherwise the delimiter is the first of tab, ``;`` and ``,`` found in every
  one of the first 50 lines (outside quotes) that splits them into rows of
  numbers (after any label column): tabs and semicolons never occur inside a
  number, commas can be decimal commas. If none splits them so, the first
  found; none found: the format's own (``,`` for CSV, tab for TSV, runs of
  spaces for text).
- The decimal mark is ``.``, unless cells are separated by something else
  than commas, no number is written with a point, and some are written with a
  comma (``1,5``): then ``,``.
- A line starting with ``#`` is a comment (``np.savetxt(header=...)`` writes
  them), unless it starts with a colour code such as ``#8517dc``, a row label.
- The first row holds column names when none of its cells (after the label
  column) is a number, or when its first cell is empty (pandas writes an
  empty corner above its index). A first row ``0,1,…,n-1`` is what pandas
  writes for unnamed columns, but also data (a one-hot row ``0,1``): it is
  read as names when the rows below are written otherwise (``1.0``,
  ``0.25``, ``True``), else as data; either way a Choice says so.
- The first column holds row labels when none of its cells below the header
  is a number, or when the header's first cell is empty. Numbers with
  thousands separators (``1,234.5``, ``1 234``) or the other decimal mark
  (``1,5`` in a file of points) are not read, nor taken for labels: they are
  refused, with what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from attncli.readers.base import Choice, TextSettings
from attncli.text import parse_number

SEP_LINE = re.compile(r'^\s*"?sep=(.)"?\s*$')  # Excel's first line naming the delimiter
COLOUR = re.compile(r"#(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3,4})(?=[\s,;|]|$)")  # a label, not a comment
QUOTED = re.compile(r'"(?:[^"]|"")*"')
DELIMITERS = ("\t", ";", ",")  # in order of preference: tabs and semicolons never occur inside a number
WHITESPACE = " "  # the delimiter of whitespace-separated text: runs of spaces and tabs
SAMPLE_LINES = 50  # lines looked at to find the delimiter
PLAIN_INTEGER = re.compile(r"[+\-\u2212]?\d+")
DECIMAL_COMMA = re.compile(r"[+\-\u2212]?(\d+,\d*|,\d+)([eE][+\-\u2212]?\d+)?")
BOOLEANS = {"true": 1.0, "false": 0.0}  # mask cells, any case

Row = tuple[int, list[str]]  # (line number, cells)


def is_comment(line: str) -> bool:
    """A line starting with # (after spaces; a tab is an empty cell) that does not start with a colour code."""
    stripped = line.lstrip(" ")
    return stripped.startswith("#") and not COLOUR.match(stripped)


def sep_line(line: str) -> str | None:
    """The delimiter Excel's ``sep=X`` first line names, or None."""
    found = SEP_LINE.match(line)
    return found.group(1) if found else None


def find_delimiter(lines: Sequence[str], default: str, settings: TextSettings) -> str:
    """The delimiter of lines that are neither blank nor comments (see the module's rules)."""
    if settings.delimiter is not None:
        return settings.delimiter
    sample = [QUOTED.sub("", line) for line in lines[:SAMPLE_LINES]]
    candidates = [d for d in DELIMITERS if not (d == "," and settings.decimal == ",")]
    found = [d for d in candidates if sample and all(d in line for line in sample)]
    for delimiter in found:
        if _splits_into_numbers(sample, delimiter):
            return delimiter
    if found:
        return found[0]
    if default == "," and settings.decimal == ",":
        return ";"  # decimal commas: the cells cannot be separated by commas too
    return default


def _splits_into_numbers(lines: Sequence[str], delimiter: str) -> bool:
    """Does ``delimiter`` split every line but a header into numbers, after any first column of labels?"""
    marks = [Numbers(".", booleans=True)] + ([Numbers(",", booleans=True)] if delimiter != "," else [])
    rows = [[cell.strip() for cell in line.split(delimiter)] for line in lines]
    body = rows[1:] or rows  # the first line may be a header
    return len({len(cells) for cells in body}) == 1 and all(
        any(number(c) is not None for number in marks) for cells in body for c in cells[1:]
    )


@dataclass(frozen=True)
class Numbers:
    """How a cell is read as a number: the decimal mark, U+2212 as a minus
    (copied from a rendered formula), true/false in masks."""

    decimal: str = "."
    booleans: bool = False  # true/false (any case) are 1/0: mask cells

    def __call__(self, cell: str) -> float | None:
        text = self.text(cell)
        return None if text is None else parse_number(text)

    def text(self, cell: str) -> str | None:
        """The cell as Python float syntax, or None when it cannot be a number."""
        if self.booleans and cell.lower() in BOOLEANS:
            return str(BOOLEANS[cell.lower()])
        if self.decimal == ",":
            if "." in cell:
                return None
            cell = cell.replace(",", ".")
        return cell.replace("\u2212", "-")


def find_decimal(rows: Sequence[Row], delimiter: str, settings: TextSettings) -> str:
    """The decimal mark: ``,`` only where commas do not separate cells, no number has a point, and one has a comma."""
    if settings.decimal is not None:
        return settings.decimal
    if delimiter == ",":
        return "."
    comma = False
    for _, cells in rows:
        for cell in cells:
            if "." in cell and parse_number(cell.replace("\u2212", "-")) is not None:
                return "."
            comma = comma or DECIMAL_COMMA.fullmatch(cell) is not None
    return "," if comma else "."


@dataclass
class Layout:
    """Where the names are: a header row, a label column, and the choices made."""

    header: bool
    labels: bool
    choices: list[Choice] = field(default_factory=list)


def pandas_header(header: bool, source: str, line: int) -> Choice:
    """The reading of a first row 0,1,…,n-1: names when the rows below are not all whole numbers."""
    if header:
        return Choice(
            "read the first row 0,1,… as column names, as pandas writes them for unnamed columns: "
            "the rows below are not whole numbers",
            source,
            line,
            "header",
            False,
            "reads it as data",
        )
    return Choice(
        "read the first row 0,1,… as data, though pandas writes such a row to name unnamed columns: "
        "the rows below are whole numbers too",
        source,
        line,
        "header",
        True,
        "reads it as column names",
    )


# 1,234 or 1,234,567.5 (1.234,5 with decimal commas; 1 234 or 1'234): digits grouped by threes.
THOUSANDS = re.compile(r"[-+−]?\d{1,3}(?P<sep>[,.  '’])\d{3}(?:(?P=sep)\d{3})*(?:[.,]\d*)?")


def unread_number(cell: str, number: Numbers) -> bool:
    """A cell that is a number, but not as this file's numbers are read: thousands
    separators (1,234.5) or the other decimal mark (1,5 where the mark is '.')."""
    other = Numbers("," if number.decimal == "." else ".")
    return bool(THOUSANDS.fullmatch(cell.strip())) or other(cell) is not None


def find_layout(rows: Sequence[Row], number: Numbers, settings: TextSettings, source: str) -> Layout:
    """Header row and label column of rows that are not blank (see the module's rules)."""
    first_line, first = rows[0]
    below = rows[1:]
    pandas_corner = len(first) > 1 and first[0] == "" and all(first[1:])

    text_below = bool(below) and all(
        number(cells[0]) is None and not unread_number(cells[0], number) for _, cells in below
    )  # a column of labels below? (1,234 and 1,5 are not)
    labels_below = settings.labels if settings.labels is not None else (pandas_corner or text_below)
    values = first[1:] if labels_below else first  # the first row's cells right of any label column
    choices = []
    if settings.header is not None:
        header = settings.header
    elif pandas_corner or (values and all(number(c) is None for c in values)):
        header = True  # (with no rows below, the reader says the header has no rows)
    elif below and values == [str(i) for i in range(len(values))]:
        written_otherwise = any(
            not PLAIN_INTEGER.fullmatch(c) for _, cells in below for c in (cells[1:] if labels_below else cells)
        )
        header = written_otherwise
        choices.append(pandas_header(header, source, first_line))
    else:
        header = False
    if settings.labels is not None:
        labels = settings.labels
    elif header:
        labels = pandas_corner or text_below
    else:
        labels = number(first[0]) is None and (text_below or not below)
    return Layout(header, labels, choices)
