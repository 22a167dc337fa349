"""CSV, TSV and whitespace-separated text, with line numbers in every error."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from attncli.errors import AttnError
from attncli.readers.base import Bundle, Input, Matrix, Request, decode_text, first_bad, not_finite
from attncli.readers.limits import LINE, check_text
from attncli.text import parse_number, plural

SEPARATORS = {"csv": b",", "tsv": b"\t", "txt": b" \t"}  # counted by the size limits


def read_csv(source: Input, request: Request) -> Bundle:
    return Bundle.of(read_text(source.data(), source.name, "csv", request.mask))


def read_tsv(source: Input, request: Request) -> Bundle:
    return Bundle.of(read_text(source.data(), source.name, "tsv", request.mask))


def read_txt(source: Input, request: Request) -> Bundle:
    return Bundle.of(read_text(source.data(), source.name, "txt", request.mask))


def read_text(data: bytes, source: str, fmt: str, mask: bool) -> Matrix:
    """One matrix from CSV, TSV or whitespace-separated text (``fmt``):
    at C speed when the text is clean, else cell by cell."""
    check_text(data, source, SEPARATORS[fmt])
    return read_delimited_fast(data, fmt, mask) or read_delimited(decode_text(data, source), source, fmt, mask)


def read_delimited(text: str, source: str, fmt: str, mask: bool) -> Matrix:
    """Rows of numbers; an optional header row and first column of labels.

    The first row is a header when none of its cells is a number; the first
    column holds labels when none of its data cells is a number.
    """

    rows = [(n, cells) for n, cells in _split_lines(text, fmt, source) if any(cells)]
    if not rows:
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    header = None
    if all(parse_number(c) is None for c in rows[0][1]):
        header = rows.pop(0)
        if not rows:
            raise AttnError("has a header but no rows of numbers", source=source, line=header[0])
    labelled = all(parse_number(cells[0]) is None for _, cells in rows)
    width = len(rows[0][1])
    for n, cells in rows:
        if len(cells) != width:
            raise AttnError(f"row has {plural(len(cells), 'value')}, expected {width} like the first row",
                            source=source, line=n, hint="every row needs the same number of columns")
    if labelled and width == 1:
        raise AttnError(f"{rows[0][1][0]!r} is not a number", source=source, line=rows[0][0])
    row_labels = [cells[0] for _, cells in rows] if labelled else None
    body = [cells[1:] for _, cells in rows] if labelled else [cells for _, cells in rows]
    n_cols = width - labelled
    col_labels = None
    if header is not None:
        names = header[1]
        if len(names) == n_cols + 1 and labelled:
            names = names[1:]  # the corner cell above the labels
        if len(names) != n_cols:
            raise AttnError(f"header has {plural(len(names), 'name')} but rows have {plural(n_cols, 'value')}",
                            source=source, line=header[0])
        col_labels = names
    values = _cells_to_array(body, rows, labelled, source, mask)
    bad = first_bad(values, mask)
    if bad:
        i, j = bad
        raise AttnError(f"column {j + 1 + labelled}: {not_finite(values[i, j], mask)}",
                        source=source, line=rows[i][0])
    return Matrix(values, row_labels, col_labels)


NUMBER_BYTES = b"0123456789.eE+-"
BLANK_BYTES = b" \t\r\n"


def read_delimited_fast(data: bytes, fmt: str, mask: bool) -> Matrix | None:
    """CSV/TSV of plain numbers (and an optional header row) at C speed, or None.

    numpy's C text parser (``np.loadtxt``) reads the numbers; this returns
    None, for ``read_delimited`` to read the text cell by cell and report the
    exact line and column, whenever the input is anything but clean: bytes
    other than digits, signs, points, exponents and separators in the body
    (so no NaN, inf, hex or labels, which loadtxt would judge differently),
    quotes, a header it cannot vouch for, lone carriage returns, or anything
    loadtxt itself refuses. So both paths give the same arrays and errors.
    """
    import warnings


    sep = b"," if fmt == "csv" else b"\t"
    if fmt not in ("csv", "tsv") or (fmt == "tsv" and b"," in data):
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.count(b"\r") != data.count(b"\r\n"):  # a lone \r ends a line for csv
        return None
    first = data[: data.find(b"\n") % (len(data) + 1)]  # the first line (no copy of the rest)
    col_labels = None
    if first.translate(None, NUMBER_BYTES + BLANK_BYTES + sep):  # not a row of numbers: a header?
        col_labels = _header(first, fmt)
        if col_labels is None:
            return None
        data = data[len(first) + 1 :]
    if not first.strip() or data.translate(None, NUMBER_BYTES + BLANK_BYTES + sep):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # loadtxt only warns on input with no rows
            values = _loadtxt_in_chunks(data, sep.decode())
    except ValueError:
        return None
    if values.size == 0 or col_labels is not None and len(col_labels) != values.shape[1] or first_bad(values, mask):
        return None
    return Matrix(values, None, col_labels)


PARSE_CHUNK = 1 << 23  # bytes of text parsed at a time (about 0.2 s)
CELLS_PER_BLOCK = 1 << 18  # strings converted to numbers at a time (about 0.2 s)


def _loadtxt_in_chunks(data: bytes, sep: str) -> Any:
    """``np.loadtxt`` of the data, a chunk of whole lines at a time: numpy's
    parser holds the interpreter for a whole call, so one call on a 600 MB
    file would hold Ctrl-C back for seconds. Rows of different lengths in
    different chunks are a ValueError, as loadtxt raises within one."""
    import io

    import numpy as np

    blocks, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start + PARSE_CHUNK)
        end = len(data) if end < 0 else end + 1
        block = np.loadtxt(io.BytesIO(data[start:end]), delimiter=sep, comments=None, ndmin=2,
                           dtype=np.float64, encoding="ascii")
        if block.size:
            blocks.append(block)
        start = end
    if len({block.shape[1] for block in blocks}) > 1:
        raise ValueError("rows of different lengths")
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0] if blocks else np.zeros((0, 0))


def _header(line: bytes, fmt: str) -> list[str] | None:
    """The names in a header line, or None unless every cell is a plain,
    non-empty name (the cell-by-cell reader decides every other case)."""
    if b'"' in line:
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    names = [c.strip() for c in text.split("," if fmt == "csv" else "\t")]
    if not all(names) or any(parse_number(c) is not None for c in names):
        return None
    return names


def _split_lines(text: str, fmt: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, stripped cells) for each record of the text."""
    if fmt == "txt":
        for n, line in enumerate(text.splitlines(), 1):
            yield n, line.split()
        return
    csv.field_size_limit(LINE.value())  # a cell can be as long as a line may be
    reader = csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ",", strict=True)
    start = 1
    try:
        for cells in reader:
            yield start, [c.strip() for c in cells]
            start = reader.line_num + 1
    except csv.Error as e:
        problem = "a quote is opened but never closed" if "end of data" in str(e) else str(e)
        raise AttnError(f"cannot split the line: {problem}", source=source, line=start,
                        hint='quote a label that holds a comma: "a, b"') from None


def _cells_to_array(body: list[list[str]], rows: list[tuple[int, list[str]]], labelled: bool, source: str,
                    mask: bool) -> Any:
    """Strings -> float64 array; on failure, find the first bad cell's line and column."""
    import numpy as np

    step = max(1, CELLS_PER_BLOCK // max(1, len(body[0])))  # rows converted at a time: Ctrl-C is honoured between
    try:
        blocks = [np.array(body[i : i + step], dtype=np.float64) for i in range(0, len(body), step)]
        return np.concatenate(blocks).reshape(len(body), -1)
    except ValueError:
        pass
    for (n, _), cells in zip(rows, body, strict=True):
        for j, cell in enumerate(cells):
            if parse_number(cell) is None:
                what = "is empty" if cell == "" else f"{cell!r} is not a number"
                if mask and cell.lower() in ("true", "false"):
                    what = f"{cell!r}: write mask cells as 1 (may attend) or 0"
                raise AttnError(f"column {j + 1 + labelled}: {what}", source=source, line=n)
    raise AttnError("cannot read the numbers", source=source)  # pragma: no cover

