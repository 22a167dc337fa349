"""CSV, TSV and whitespace-separated text, with line numbers in every error.

Where the cells, decimals, names and comments are is decided in
``readers.layout``; this module splits the lines and reads the numbers, at C
speed when the text is plain numbers (``read_delimited_fast``), else cell by
cell (``read_delimited``), with the same arrays and errors either way.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import Any

from attncli.errors import AttnError
from attncli.readers.base import LONE, NUMBERS, Bundle, Input, Matrix, Request, decode_text, first_bad, not_finite
from attncli.readers.layout import (
    SEP_LINE,
    THOUSANDS,
    WHITESPACE,
    Numbers,
    Row,
    find_decimal,
    find_delimiter,
    find_layout,
    is_comment,
    pandas_header,
    sep_line,
)
from attncli.readers.limits import LINE, check_text
from attncli.text import plural

SEPARATORS = {"csv": b",;\t", "tsv": b"\t", "txt": b" \t"}  # counted by the size limits
DEFAULT_DELIMITER = {"csv": ",", "tsv": "\t", "txt": WHITESPACE}
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", WHITESPACE: "space"}


def read_csv(source: Input, request: Request) -> Bundle:
    return described(read_text(source.data(), source.name, "csv", request), source.data())


def read_tsv(source: Input, request: Request) -> Bundle:
    return described(read_text(source.data(), source.name, "tsv", request), source.data())


def read_txt(source: Input, request: Request) -> Bundle:
    return described(read_text(source.data(), source.name, "txt", request), source.data())


def described(matrix: Matrix, data: bytes) -> Bundle:
    """The one matrix of a text file, with the comment lines it starts with as its
    description ("# Made-up vectors: …"), as a bundle's ``description`` is."""
    from attncli.readers.encodings import head_text

    said = []
    for line in head_text(data).splitlines():
        if not line.strip():
            continue
        if not is_comment(line):
            break
        said.append(line.strip().lstrip("#").strip())
    description = " ".join(s for s in said if s)
    return Bundle({LONE: matrix}, {"description": description} if description else {})


def read_text(data: bytes, source: str, fmt: str, request: Request) -> Matrix:
    """One matrix from CSV, TSV or whitespace-separated text (``fmt``):
    at C speed when the text is plain numbers, else cell by cell."""
    check_text(data, source, SEPARATORS[fmt])
    return read_delimited_fast(data, fmt, request, source) or read_delimited(
        decode_text(data, source), source, fmt, request
    )


def read_delimited(text: str, source: str, fmt: str, request: Request = NUMBERS) -> Matrix:
    """Rows of numbers; an optional header row and first column of labels
    (see ``readers.layout`` for how each is decided)."""
    settings = request.text
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # CR-only files (old Mac Excel) too
    content = [i for i, line in enumerate(lines) if line.strip()]
    named = sep_line(lines[content[0]]) if content else None
    if named is not None:
        lines[content[0]] = ""  # Excel's sep= line names the delimiter; it is not data
    lines = ["" if is_comment(line) else line for line in lines]
    sample = [line for line in lines if line.strip()]
    delimiter = find_delimiter(sample, named or DEFAULT_DELIMITER[fmt], settings)
    rows = [(n, cells) for n, cells in _split_lines(lines, delimiter, source) if any(cells)]
    if not rows:
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    number = Numbers(find_decimal(rows, delimiter, settings), booleans=request.mask)
    layout = find_layout(rows, number, settings, source)
    header = rows.pop(0) if layout.header else None
    if header is not None and not rows:
        raise AttnError("has a header but no rows of numbers", source=source, line=header[0])
    labelled = layout.labels
    width = len(rows[0][1])
    for n, cells in rows:
        if len(cells) != width:
            raise AttnError(
                f"row has {plural(len(cells), 'value')}, expected {width} like the first row",
                source=source,
                line=n,
                hint=_width_hint(delimiter, fmt),
            )
    if labelled and width == 1:
        raise AttnError(
            f"{rows[0][1][0]!r} is not a number",
            source=source,
            line=rows[0][0],
            hint="a label column needs numbers beside it",
        )
    row_labels = [cells[0] for _, cells in rows] if labelled else None
    body = [cells[1:] for _, cells in rows] if labelled else [cells for _, cells in rows]
    n_cols = width - labelled
    col_labels = None
    if header is not None:
        names = header[1]
        if len(names) == n_cols + 1 and labelled:
            names = names[1:]  # the corner cell above the labels
        if len(names) != n_cols:
            raise AttnError(
                f"header has {plural(len(names), 'name')} but rows have {plural(n_cols, 'value')}",
                source=source,
                line=header[0],
            )
        col_labels = names
    values = _cells_to_array(body, rows, labelled, source, request, number)
    bad = first_bad(values, request.special)
    if bad:
        i, j = bad
        raise AttnError(
            f"column {j + 1 + labelled}: {not_finite(values[i, j], request.special)}", source=source, line=rows[i][0]
        )
    return Matrix(values, row_labels, col_labels, choices=layout.choices)


def _width_hint(delimiter: str, fmt: str) -> str:
    """The usual hint, and which delimiter split the cells when it is not the format's own."""
    hint = "every row needs the same number of columns"
    if delimiter == DEFAULT_DELIMITER[fmt]:
        return hint
    return f"{hint}; cells are split at each {DELIMITER_NAMES.get(delimiter, repr(delimiter))}"


NUMBER_BYTES = b"0123456789.eE+-"
BLANK_BYTES = b" \t\r\n"
FAST_DELIMITERS = {"csv": b",", "tsv": b"\t"}


def read_delimited_fast(data: bytes, fmt: str, request: Request = NUMBERS, source: str = "") -> Matrix | None:
    """CSV/TSV of plain numbers (and an optional header row) at C speed, or None.

    numpy's C text parser (``np.loadtxt``) reads the numbers; this returns
    None, for ``read_delimited`` to read the text cell by cell and report the
    exact line and column, whenever the input is anything but clean: bytes
    other than digits, signs, points, exponents and the format's separator in
    the body (so no NaN, inf, hex, labels, comments, semicolons or decimal
    commas, which the cell-by-cell reader decides), quotes, a header it cannot
    vouch for, lone carriage returns, settings it does not apply, or anything
    loadtxt itself refuses. So both paths give the same arrays, choices
    (a first row 0,1,…,n-1 is pandas' names when the rest is not whole
    numbers: ``layout.find_layout``'s rule) and errors.
    """
    import warnings

    settings = request.text
    sep = FAST_DELIMITERS.get(fmt)
    if sep is None or settings.header or settings.labels or settings.decimal not in (None, "."):
        return None
    if settings.delimiter not in (None, sep.decode()) or (b"," if sep == b"\t" else b"\t") in data:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.count(b"\r") != data.count(b"\r\n"):  # a lone \r ends a line
        return None
    first = data[: data.find(b"\n") % (len(data) + 1)]  # the first line (no copy of the rest)
    col_labels = None
    choices = []
    if first.translate(None, NUMBER_BYTES + BLANK_BYTES + sep):  # not a row of numbers: a header?
        col_labels = None if settings.header is False else _header(first, sep)
        if col_labels is None:
            return None
        data = data[len(first) + 1 :]
    elif settings.header is None and _counts_up(first, sep):  # 0,1,…,n-1: pandas' names, or data
        rest = data[len(first) + 1 :]
        if not rest.strip():
            return None
        if rest.translate(None, b"0123456789+-" + BLANK_BYTES + sep):  # a point or an exponent: not whole numbers
            col_labels = [c.strip().decode() for c in first.split(sep)]
            data = rest
        choices.append(pandas_header(col_labels is not None, source, 1))
    if not first.strip() or data.translate(None, NUMBER_BYTES + BLANK_BYTES + sep):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # loadtxt only warns on input with no rows
            values = _loadtxt_in_chunks(data, sep.decode())
    except ValueError:
        return None
    if (
        values.size == 0
        or col_labels is not None
        and len(col_labels) != values.shape[1]
        or first_bad(values, request.special)
    ):
        return None
    return Matrix(values, None, col_labels, choices=choices)


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
        block = np.loadtxt(
            io.BytesIO(data[start:end]), delimiter=sep, comments=None, ndmin=2, dtype=np.float64, encoding="ascii"
        )
        if block.size:
            blocks.append(block)
        start = end
    if len({block.shape[1] for block in blocks}) > 1:
        raise ValueError("rows of different lengths")
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0] if blocks else np.zeros((0, 0))


def _counts_up(line: bytes, sep: bytes) -> bool:
    """Is the line 0,1,…,n-1, as pandas names unnamed columns?"""
    return [c.strip() for c in line.split(sep)] == [str(i).encode() for i in range(line.count(sep) + 1)]


def _header(line: bytes, sep: bytes) -> list[str] | None:
    """The names in a header line, or None unless every cell is a plain,
    non-empty name (the cell-by-cell reader decides every other case)."""
    if b'"' in line or b"#" in line:
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    names = [c.strip() for c in text.split(sep.decode())]
    if not all(names) or SEP_LINE.match(text) or any(Numbers()(c) is not None for c in names):
        return None
    return names


def _split_lines(lines: Sequence[str], delimiter: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, stripped cells) for each record of the lines."""
    if delimiter == WHITESPACE:
        for n, line in enumerate(lines, 1):
            yield n, line.split()
        return
    csv.field_size_limit(LINE.value())  # a cell can be as long as a line may be
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter, strict=True)
    start = 1
    try:
        for cells in reader:
            yield start, [c.strip() for c in cells]
            start = reader.line_num + 1
    except csv.Error as e:
        problem = "a quote is opened but never closed" if "end of data" in str(e) else str(e)
        raise AttnError(
            f"cannot split the line: {problem}",
            source=source,
            line=start,
            hint=f'quote a label that holds a {DELIMITER_NAMES.get(delimiter, repr(delimiter))}: "a{delimiter} b"',
        ) from None


def _cells_to_array(
    body: list[list[str]], rows: list[Row], labelled: bool, source: str, request: Request, number: Numbers
) -> Any:
    """Strings -> float64 array; on failure, find the first bad cell's line and column."""
    import numpy as np

    step = max(1, CELLS_PER_BLOCK // max(1, len(body[0])))  # rows converted at a time: Ctrl-C is honoured between

    def converted(rows: list[list[str]]) -> Any:
        blocks = [np.array(rows[i : i + step], dtype=np.float64) for i in range(0, len(rows), step)]
        return np.concatenate(blocks).reshape(len(rows), -1)

    try:  # at C speed when every cell is already in Python's float syntax
        if number.decimal == ".":
            return converted(body)
    except ValueError:
        pass
    texts = [[number.text(c) or "x" for c in cells] for cells in body]  # decimal commas, U+2212, true/false
    try:
        return converted(texts)
    except ValueError:
        pass
    for (n, _), cells in zip(rows, body, strict=True):
        for j, cell in enumerate(cells):
            if number(cell) is None:
                what = "is empty" if cell == "" else f"{cell!r} is not a number"
                raise AttnError(
                    f"column {j + 1 + labelled}: {what}",
                    source=source,
                    line=n,
                    hint=_number_hint(cell, number, request),
                )
    raise AttnError("cannot read the numbers", source=source)  # pragma: no cover


def _number_hint(cell: str, number: Numbers, request: Request) -> str | None:
    """Why a cell that looks like a number is not one here."""
    grouped = THOUSANDS.fullmatch(cell.strip())
    if grouped:
        separator = grouped.group("sep")
        plain = cell.strip().replace(separator, "")
        other = "," if number.decimal == "." else "."
        as_decimal = Numbers(other)(cell) if separator == other else None  # 1,234: a thousand, or 1.234?
        if as_decimal is not None:
            return (
                f"thousands separators are not read ({cell.strip()!r} would be {plain}), and {other!r} is not "
                f"this file's decimal mark ({as_decimal:g} if it were)"
            )
        return f"thousands separators are not read: write it as {plain}"
    if (
        number.decimal == "."
        and "," in cell
        and Numbers(",")(cell) is not None
        or number.decimal == ","
        and "." in cell
        and Numbers()(cell) is not None
    ):
        return f"the decimal mark of this file is {number.decimal!r}"
    if request.bias and cell.lower() in ("true", "false"):
        return "a bias holds numbers to add to the scores; true/false cells make a mask"
    return None
