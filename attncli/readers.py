"""Bytes from a file or stdin -> labelled matrices.

Readers take the whole input as bytes plus the name to use in errors, so tests
can pass literals; only the CLI knows about paths and ``-``. Formats: CSV, TSV,
whitespace-separated text, NPY, NPZ, YAML and JSON. Every problem is an
``AttnError`` that names the source and, for text, the line.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from attncli.errors import AttnError

FORMATS = ("csv", "tsv", "txt", "npy", "npz", "yaml", "json")
EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": None, ".dat": None,
    ".npy": "npy", ".npz": "npz", ".yaml": "yaml", ".yml": "yaml", ".json": "json",
}
MAX_TREE_ELEMENTS = 10_000_000  # YAML/JSON numbers and lists, after aliases expand
MAX_DEPTH = 8  # a bundle of labelled matrices is at most 4 deep
NPY_MAGIC = b"\x93NUMPY"
SPEC_KEYS = {"rows", "labels", "columns", "divide"}


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


# ---------------------------------------------------------------- format choice


def detect_format(name: str, data: bytes) -> str:
    """The format from the file's extension, else from its first bytes."""
    suffix = name[name.rfind(".") :].lower() if "." in name.rsplit("/", 1)[-1] else ""
    return EXTENSIONS.get(suffix) or sniff(data)


def sniff(data: bytes) -> str:
    """Guess a format from content: magic bytes, then the first text line."""
    if data.startswith(NPY_MAGIC):
        return "npy"
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    text = data[:4096].decode("utf-8-sig", errors="replace")
    lines = [ln for ln in text.splitlines() if ln.strip() and not re.match(r"\s*#(\s|$)", ln)]
    first = lines[0].strip() if lines else ""
    if first[:1] in ("[", "{"):
        return "json"
    if re.match(r"(-(\s|$)|---|[^,\t]*:(\s|$))", first):
        return "yaml"
    if "\t" in first:
        return "tsv"
    return "csv" if "," in first else "txt"


# ---------------------------------------------------------------- entry points


def read_matrix(data: bytes, source: str, fmt: str | None = None, *, mask: bool = False) -> Matrix:
    """One matrix from any format; an NPZ or bundle must hold exactly one.

    ``mask=True`` also accepts booleans and -inf (for attention masks).
    """
    fmt = fmt or detect_format(source, data)
    if fmt == "npy":
        return _from_array(_load_npy(data, source), source, "", mask)
    if fmt == "npz":
        bundle = _read_npz(data, source, mask)
        if len(bundle.matrices) != 1:
            names = ", ".join(bundle.matrices) or "none"
            raise AttnError(f"holds several arrays ({names}), expected one matrix", source=source,
                            hint="pass it as the only file to read it as a bundle")
        return next(iter(bundle.matrices.values()))
    if fmt in ("yaml", "json"):
        return _from_tree(_load_tree(data, source, fmt), source, "", mask)
    return _read_delimited(_decode(data, source), source, fmt, mask)


def read_bundle(data: bytes, source: str, fmt: str | None = None) -> Bundle:
    """Named matrices from a YAML/JSON mapping or an NPZ archive.

    YAML/JSON: each top-level entry holding a list or mapping is a matrix (see
    ``_from_tree``); scalar entries (``description: ...``) are kept as meta.
    NPZ: each array is a matrix; ``<name>_labels`` and ``<name>_columns``
    string arrays name its rows and columns.
    """
    fmt = fmt or detect_format(source, data)
    if fmt == "npz":
        return _read_npz(data, source, mask_names={"mask"})
    if fmt not in ("yaml", "json"):
        raise AttnError(f"a {fmt.upper()} file holds one matrix, not a bundle", source=source,
                        hint="give three files Q K V, or one YAML/JSON/NPZ bundle with q, k and v")
    tree = _load_tree(data, source, fmt)
    if not isinstance(tree, dict):
        raise AttnError("a bundle must be a mapping of names to matrices (q:, k:, v:)",
                        source=source, line=_line(tree))
    bundle = Bundle({})
    for name, entry in tree.items():
        if isinstance(entry, (list, dict)):
            bundle.matrices[name] = _from_tree(entry, source, name, mask=name == "mask")
        else:
            bundle.meta[name] = entry.value() if isinstance(entry, _Scalar) else entry
    return bundle


# ---------------------------------------------------------------- text helpers


def _decode(data: bytes, source: str) -> str:
    if not data.strip():
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise AttnError("is not UTF-8 text", source=source, line=line,
                        hint="a binary file? NPY files start with \\x93NUMPY") from None


def _number(text: str) -> float | None:
    """Python float syntax, or None when the text is not a number."""
    try:
        return float(text)
    except ValueError:
        return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _first_bad(values: Any, mask: bool) -> tuple[int, int] | None:
    """(row, col) of the first NaN/inf (a mask may hold -inf), or None."""
    import numpy as np

    if values.dtype == bool:
        return None
    bad = np.isnan(values) | (np.isposinf(values) if mask else np.isinf(values))
    if not bad.any():
        return None
    i, j = np.argwhere(bad)[0]
    return int(i), int(j)


def _not_finite(value: float, mask: bool) -> str:
    allowed = " (a mask may hold -inf)" if mask else ""
    return f"{value} is not a finite number{allowed}"


# ---------------------------------------------------------------- CSV / TSV / text


def _read_delimited(text: str, source: str, fmt: str, mask: bool) -> Matrix:
    """Rows of numbers; an optional header row and first column of labels.

    The first row is a header when none of its cells is a number; the first
    column holds labels when none of its data cells is a number.
    """
    import numpy as np

    rows = [(n, cells) for n, cells in _split_lines(text, fmt, source) if any(cells)]
    if not rows:
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    header = None
    if all(_number(c) is None for c in rows[0][1]):
        header = rows.pop(0)
        if not rows:
            raise AttnError("has a header but no rows of numbers", source=source, line=header[0])
    labelled = all(_number(cells[0]) is None for _, cells in rows)
    width = len(rows[0][1])
    for n, cells in rows:
        if len(cells) != width:
            raise AttnError(f"row has {_count(len(cells), 'value')}, expected {width} like the first row",
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
            raise AttnError(f"header has {_count(len(names), 'name')} but rows have {_count(n_cols, 'value')}",
                            source=source, line=header[0])
        col_labels = names
    values = _cells_to_array(body, rows, labelled, source, mask)
    bad = _first_bad(values, mask)
    if bad:
        i, j = bad
        raise AttnError(f"column {j + 1 + labelled}: {_not_finite(values[i, j], mask)}",
                        source=source, line=rows[i][0])
    return Matrix(values, row_labels, col_labels)


def _split_lines(text: str, fmt: str, source: str):
    """Yield (line number, stripped cells) for each record of the text."""
    if fmt == "txt":
        for n, line in enumerate(text.splitlines(), 1):
            yield n, line.split()
        return
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


def _cells_to_array(body: list[list[str]], rows, labelled: bool, source: str, mask: bool):
    """Strings -> float64 array; on failure, find the first bad cell's line and column."""
    import numpy as np

    try:
        return np.array(body, dtype=np.float64).reshape(len(body), -1)
    except ValueError:
        pass
    for (n, _), cells in zip(rows, body):
        for j, cell in enumerate(cells):
            if _number(cell) is None:
                what = "is empty" if cell == "" else f"{cell!r} is not a number"
                if mask and cell.lower() in ("true", "false"):
                    what = f"{cell!r}: write mask cells as 1 (may attend) or 0"
                raise AttnError(f"column {j + 1 + labelled}: {what}", source=source, line=n)
    raise AttnError("cannot read the numbers", source=source)  # pragma: no cover


# ---------------------------------------------------------------- NPY / NPZ


def _load_npy(data: bytes, source: str):
    """An ndarray from NPY bytes, without ever unpickling."""
    import numpy as np

    if not data.startswith(NPY_MAGIC):
        raise AttnError("is not an NPY file (it does not start with \\x93NUMPY)", source=source,
                        hint="name CSV/YAML/JSON files by their extension")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise AttnError("holds Python objects (pickled data), which attn never loads",
                            source=source, hint="save a float array: np.save(f, a.astype(float))") from None
        raise AttnError(f"is truncated or damaged ({e})", source=source) from None
    except (EOFError, OSError, SyntaxError) as e:
        raise AttnError(f"is truncated or damaged ({e})", source=source) from None


def _read_npz(data: bytes, source: str, mask: bool = False, mask_names: set[str] = frozenset()) -> Bundle:
    import zipfile

    import numpy as np

    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        arrays = {name: archive[name] for name in archive.files}
        for name, array in arrays.items():
            if not isinstance(array, np.ndarray):
                raise AttnError(f"holds {name}, which is not an NPY array", source=source)
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise AttnError("holds Python objects (pickled data), which attn never loads",
                            source=source) from None
        raise AttnError(f"is damaged ({e})", source=source) from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as e:
        raise AttnError(f"is not a readable NPZ archive ({e})", source=source) from None
    names = {}
    for name, array in arrays.items():
        base, _, kind = name.rpartition("_")
        if kind in ("labels", "columns") and base in arrays:
            if array.dtype.kind not in "US" or array.ndim != 1:
                raise AttnError(f"{name} must be a 1-D array of strings", source=source)
            names[base, kind] = [str(s) for s in array.tolist()]
    bundle = Bundle({})
    for name, array in arrays.items():
        if name.rpartition("_")[2] in ("labels", "columns") and name.rpartition("_")[0] in arrays:
            continue
        m = _from_array(array, source, name, mask or name in mask_names)
        m.row_labels = _checked_labels(names.get((name, "labels")), m.shape[0], source, f"{name}_labels")
        m.col_labels = _checked_labels(names.get((name, "columns")), m.shape[1], source, f"{name}_columns")
        bundle.matrices[name] = m
    if not bundle.matrices:
        raise AttnError("the archive holds no arrays", source=source)
    return bundle


def _from_array(array, source: str, where: str, mask: bool) -> Matrix:
    """Check an ndarray is a finite 2-D float matrix (a 1-D vector is one row)."""
    import numpy as np

    prefix = f"{where}: " if where else ""
    kind = array.dtype.kind
    if kind == "b" and mask:
        pass
    elif kind == "f":
        array = array.astype(np.float64 if array.dtype.itemsize > 4 else np.float32, copy=False)
    elif kind in "iu" and mask:
        array = array.astype(np.float64)
    else:
        raise AttnError(f"{prefix}holds {array.dtype} data; attn reads float arrays",
                        source=source, hint="save it with a.astype(np.float32) or float64")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        shape = "×".join(map(str, array.shape)) or "a scalar"
        raise AttnError(f"{prefix}is {array.ndim}-D ({shape}), expected a 2-D matrix", source=source)
    if array.size == 0:
        raise AttnError(f"{prefix}is empty ({array.shape[0]}×{array.shape[1]})", source=source)
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    bad = _first_bad(array, mask)
    if bad:
        i, j = bad
        raise AttnError(f"{prefix}row {i + 1}, column {j + 1}: {_not_finite(array[i, j], mask)}",
                        source=source)
    return Matrix(array)


# ---------------------------------------------------------------- YAML / JSON


class _Seq(list):
    line: int | None = None


class _Map(dict):
    line: int | None = None


class _Scalar:
    """A YAML scalar as written (we parse numbers ourselves: no YAML 1.1 traps)."""

    def __init__(self, text: str, line: int, plain: bool, tag: str) -> None:
        self.text, self.line, self.plain, self.tag = text, line, plain, tag

    def value(self) -> Any:
        if self.plain and self.tag.endswith(("int", "float")):
            return _number(self.text.replace("_", ""))
        if self.plain and self.tag.endswith("bool"):
            return self.text.lower() in ("true", "yes", "on", "y")
        return None if self.tag.endswith("null") else self.text


def _line(node: Any) -> int | None:
    return getattr(node, "line", None)


def _load_tree(data: bytes, source: str, fmt: str) -> Any:
    """Parse YAML or JSON into lists, dicts and scalars that know their line."""
    text = _decode(data, source)
    try:
        return _load_json(text) if fmt == "json" else _load_yaml(text)
    except AttnError as e:
        raise e.located(source) from None
    except RecursionError:
        raise AttnError("is nested too deeply to be a matrix", source=source) from None


def _load_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant)
    except json.JSONDecodeError as e:
        raise AttnError(f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None


def _load_yaml(text: str) -> Any:
    import yaml

    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if mark is None:
            raise AttnError(f"invalid YAML: {problem}") from None
        raise AttnError(f"invalid YAML: {problem} (column {mark.column + 1})", line=mark.line + 1) from None
    if node is None:
        raise AttnError("the file is empty", hint="expected rows of numbers")
    return _YamlTree().convert(node, 0)


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    result = _Map()
    for key, value in pairs:
        if key in result:
            raise AttnError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _json_constant(name: str) -> float:
    raise AttnError(f"{name} is not a finite number")


class _YamlTree:
    """YAML nodes -> _Seq/_Map/_Scalar, refusing tags, cycles and alias bombs.

    An alias reuses its anchor's node, so a tiny file can describe a huge tree;
    sizes are counted per distinct node and refused past MAX_TREE_ELEMENTS
    before anything is expanded.
    """

    SAFE_TAGS = {
        f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map")
    }

    def __init__(self) -> None:
        self.done: dict[int, tuple[Any, int]] = {}
        self.open: set[int] = set()

    def convert(self, node: Any, depth: int) -> Any:
        return self._convert(node, depth)[0]

    def _convert(self, node: Any, depth: int) -> tuple[Any, int]:
        key = id(node)
        if key in self.done:
            return self.done[key]
        line = node.start_mark.line + 1
        if key in self.open:
            raise AttnError("a YAML alias refers to itself", line=line)
        if node.tag not in self.SAFE_TAGS:
            raise AttnError(f"the tag {node.tag} is not allowed", line=line,
                            hint="attn reads plain YAML: numbers, lists and mappings")
        if depth > MAX_DEPTH:
            raise AttnError("is nested too deeply to be a matrix", line=line)
        self.open.add(key)
        size = 1
        if node.id == "scalar":
            result: Any = _Scalar(node.value, line, not node.style, node.tag)
        elif node.id == "sequence":
            result = _Seq()
            for child in node.value:
                item, n = self._convert(child, depth + 1)
                result.append(item)
                size += n
        else:
            result = _Map()
            for key_node, value_node in node.value:
                if key_node.id != "scalar":
                    raise AttnError("a mapping key must be a plain name", line=key_node.start_mark.line + 1)
                name = key_node.value
                if name in result:
                    raise AttnError(f"duplicate key {name!r}", line=key_node.start_mark.line + 1)
                result[name], n = self._convert(value_node, depth + 1)
                size += n
        if isinstance(result, (_Seq, _Map)):
            result.line = line
        if size > MAX_TREE_ELEMENTS:
            raise AttnError(f"expands to more than {MAX_TREE_ELEMENTS:,} elements", line=line,
                            hint="YAML aliases repeat whole subtrees; write the numbers out")
        self.open.discard(key)
        self.done[key] = (result, size)
        return result, size


def _from_tree(tree: Any, source: str, where: str, mask: bool) -> Matrix:
    """A matrix from a parsed YAML/JSON value.

    Accepted shapes: a list of rows; one flat list (one row); a mapping of
    label -> row (a row may be one number); or an explicit mapping with
    ``rows`` (either of those) and optional ``labels``, ``columns`` (names)
    and ``divide`` (every value is divided by it, e.g. 255 for RGB).
    """
    import numpy as np

    prefix = f"{where}: " if where else ""

    def fail(message: str, node: Any = None, hint: str | None = None) -> AttnError:
        return AttnError(prefix + message, source=source, line=_line(node) or _line(tree), hint=hint)

    spec = {}
    if isinstance(tree, dict) and "rows" in tree and set(tree) <= SPEC_KEYS:
        spec, tree = tree, tree["rows"]
    row_labels = None
    if isinstance(tree, dict):
        row_labels, rows = list(tree.keys()), list(tree.values())
    elif isinstance(tree, list):
        rows = tree if tree and all(isinstance(r, list) for r in tree) else [tree]
    else:
        raise fail("expected a list of rows or a mapping of label: row", tree)
    if not rows or rows == [[]]:
        raise fail("is empty", tree, hint="expected rows of numbers")

    numbers: list[list[float]] = []
    for i, row in enumerate(rows):
        name = f"row {row_labels[i]!r}" if row_labels else f"row {i + 1}"
        cells = row if isinstance(row, list) else [row]
        if not cells:
            raise fail(f"{name} is empty", row)
        numbers.append([_cell(c, mask, lambda msg, c=c, j=j, name=name: fail(f"{name}, column {j + 1}: {msg}", c))
                        for j, c in enumerate(cells)])
        if len(cells) != len(numbers[0]):
            raise fail(f"{name} has {_count(len(cells), 'value')}, expected {len(numbers[0])} like the first row",
                       row, hint="every row needs the same number of columns")
    values = np.array(numbers, dtype=np.float64)

    if "divide" in spec:
        divisor = _cell(spec["divide"], False, lambda msg: fail(f"divide: {msg}", spec["divide"]))
        if divisor == 0:
            raise fail("divide must not be 0", spec["divide"])
        values = values / divisor
    bad = _first_bad(values, mask)
    if bad:
        i, j = bad
        raise fail(f"row {i + 1}, column {j + 1}: {_not_finite(values[i, j], mask)}", rows[i])
    labels = spec.get("labels")
    return Matrix(
        values,
        _checked_labels(_names(labels, fail), len(rows), source, f"{prefix}labels") if labels else row_labels,
        _checked_labels(_names(spec.get("columns"), fail), values.shape[1], source, f"{prefix}columns"),
    )


def _cell(node: Any, mask: bool, fail: Callable[[str], AttnError]) -> float:
    """One number from YAML/JSON; refuse text, booleans and nulls, never guess."""
    if isinstance(node, _Scalar):
        if not node.plain:
            raise fail(f"{node.text!r} is quoted, so it is text, not a number (remove the quotes)")
        text = node.text.strip()
        bare = text.lstrip("+-").lower()
        if bare in (".inf", "inf", ".nan", "nan"):
            return float(text.replace(".", ""))
        value = node.value()
        if isinstance(value, bool):
            if mask:
                return float(value)
            raise fail(f"{text!r} is not a number (YAML reads it as true/false)")
        if value is None and node.tag.endswith("null"):
            raise fail("a value is missing")
        value = _number(text.replace("_", ""))
        if value is None:
            raise fail(f"{text!r} is not a number")
        return value
    if isinstance(node, bool):
        if mask:
            return float(node)
        raise fail(f"{str(node).lower()} is not a number")
    if isinstance(node, (int, float)):
        try:
            return float(node)
        except OverflowError:
            raise fail(f"{node} is too large") from None
    if node is None:
        raise fail("a value is missing")
    if isinstance(node, str):
        raise fail(f"{node!r} is text, not a number")
    raise fail(f"expected a number, found a {'list' if isinstance(node, list) else 'mapping'}")


def _names(node: Any, fail: Callable[..., AttnError]) -> list[str] | None:
    if node is None:
        return None
    if not isinstance(node, list):
        raise fail("labels and columns must be lists of names", node)
    return [n.text if isinstance(n, _Scalar) else str(n) for n in node]


def _checked_labels(labels: list[str] | None, count: int, source: str, what: str) -> list[str] | None:
    if labels is not None and len(labels) != count:
        raise AttnError(f"{what} has {len(labels)} names for {count} entries", source=source)
    return labels
