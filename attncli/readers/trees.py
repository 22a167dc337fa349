"""YAML and JSON: lists and mappings of numbers, parsed without YAML 1.1
guesses, tags or alias bombs, with the line of each problem."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from attncli.errors import AttnError
from attncli.readers.base import (
    NUMBERS,
    Bundle,
    Input,
    Matrix,
    Request,
    check_distinct,
    checked_labels,
    decode_text,
    entry_key,
    first_bad,
    not_finite,
)
from attncli.readers.limits import TREE_NODES, check_text
from attncli.text import clip, parse_number, plural

MAX_DEPTH = 8  # a bundle of labelled matrices is at most 4 deep
DEPTH_HINT = f"a matrix needs at most {MAX_DEPTH} levels of lists and mappings"
SPEC_KEYS = {"rows", "labels", "columns", "divide"}
YAML_TAG = "tag:yaml.org,2002:"  # what !! stands for
NUMBER_TAGS = {YAML_TAG + "int", YAML_TAG + "float"}


def read_yaml(source: Input, request: Request) -> Bundle:
    return read_tree(source, request, "yaml")


def read_json(source: Input, request: Request) -> Bundle:
    return read_tree(source, request, "json")


def read_json_lines(source: Input, request: Request) -> Bundle:
    """JSON Lines: one row per line (a list of numbers, a mapping of column
    name: number, or one number), as ``jq -c '.[]'`` or pandas'
    ``to_json(orient="records", lines=True)`` write them."""
    data = source.data()
    check_text(data, source.name, b",", tree=True)
    try:
        rows = _load_json_lines(decode_text(data, source.name))
    except AttnError as e:
        raise e.located(source.name) from None
    return Bundle.of(matrix_from_tree(rows, source.name, "", request))


def read_tree(source: Input, request: Request, fmt: str) -> Bundle:
    """YAML or JSON: one matrix (see ``matrix_from_tree``) or, when the request
    asks for named matrices, a mapping of them.

    Each top-level entry holding a list or mapping is a matrix (the entry
    ``mask`` a mask, ``bias`` a bias); scalar entries (``description: ...``,
    ``causal: true``) are kept as meta, for the caller to use or refuse.
    Entry names that differ only in case (q and Q) are refused.
    """
    data = source.data()
    check_text(data, source.name, b",", tree=True)
    tree = load_tree(data, source.name, fmt)
    if isinstance(tree, dict) and request.is_bundle(tree) and not is_pandas_frame(tree):
        bundle = Bundle({})
        for name, entry in tree.items():
            line = line_of(entry)
            if line is not None:
                bundle.lines[name] = line
            if isinstance(entry, (list, dict)) and entry_key(name) not in request.settings:
                bundle.matrices[name] = matrix_from_tree(entry, source.name, name, request.entry(name))
            else:
                bundle.meta[name] = plain(entry)
        check_distinct(tree, source.name, bundle.lines)
        return bundle
    if request.bundle:
        raise AttnError(
            "a bundle must be a mapping of names to matrices (q:, k:, v:)", source=source.name, line=line_of(tree)
        )
    return Bundle.of(matrix_from_tree(tree, source.name, "", request))


class _Seq(list):
    line: int | None = None


class _Map(dict):
    line: int | None = None


class Scalar:
    """A YAML scalar as written (we parse numbers ourselves: no YAML 1.1 traps).

    ``tagged``: the explicit tag (``!!str 2``, ``! 2``, ``!!timestamp …``) of a
    plain scalar that it makes something other than what it reads as, except
    ``!!int`` and ``!!float``; None for the rest. A cell so tagged is not a
    number, as a quoted one is not."""

    tagged: str | None = None

    def __init__(self, text: str, line: int, plain: bool, tag: str) -> None:
        self.text, self.line, self.plain, self.tag = text, line, plain, tag

    def value(self) -> Any:
        if self.plain and self.tag.endswith(("int", "float")):
            text = self.text.replace("_", "")
            if text.lstrip("+-").isascii() and text.lstrip("+-").isdigit() and len(text) <= MAX_DIGITS:
                return int(text)  # a whole number keeps its digits (a seed, a RoPE offset), as JSON's do
            return parse_number(text)
        if self.plain and self.tag.endswith("bool"):
            return self.text.lower() in ("true", "yes", "on", "y")
        return None if self.tag.endswith("null") else self.text


def plain(node: Any) -> Any:
    """A tree's node as plain Python values: a scalar's value, lists and mappings of them."""
    if isinstance(node, Scalar):
        return node.value()
    if isinstance(node, list):
        return [plain(x) for x in node]
    if isinstance(node, dict):
        return {key: plain(value) for key, value in node.items()}
    return node


def line_of(node: Any) -> int | None:
    return getattr(node, "line", None)


def load_tree(data: bytes, source: str, fmt: str) -> Any:
    """Parse YAML or JSON into lists, dicts and scalars that know their line."""
    text = decode_text(data, source)
    try:
        return _load_json(text) if fmt == "json" else _load_yaml(text)
    except AttnError as e:
        raise e.located(source) from None
    except RecursionError:  # JSON's parser checks its depth and raises this
        raise too_deep().located(source) from None


PYTHON_FLOATS_PAST = 1 << 22  # characters of JSON past which numbers are parsed by Python code


def _load_json(text: str) -> Any:
    """JSON with our own hooks: a 5,000-digit whole number is too large (bad
    data, not Python's ValueError); a long text parses its decimals through
    a Python function too (28% slower), because json's C parser holds the
    interpreter, and with it Ctrl-C, for the whole call otherwise."""
    floats = _json_float if len(text) > PYTHON_FLOATS_PAST else None
    try:
        return json.loads(
            text, object_pairs_hook=_json_object, parse_constant=_json_constant, parse_int=_json_int, parse_float=floats
        )
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and "\n" in text[len(text[: e.pos].rstrip()) : e.pos]:
            return _load_json_lines(text)  # another value on the next line: JSON Lines, one row per line
        raise AttnError(f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None


def _load_json_lines(text: str) -> _Seq:
    """One row per non-blank line; each line is a whole JSON value."""
    rows = _Seq()
    rows.line = 1
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_json_object, parse_constant=_json_constant)
        except json.JSONDecodeError as e:
            raise AttnError(
                f"invalid JSON Lines: {e.msg} (column {e.colno})",
                line=n,
                hint="JSON Lines holds one whole JSON value per line",
            ) from None
        except AttnError as e:
            raise e.located(line=n) from None
        if isinstance(row, list):
            row = _Seq(row)
        elif not isinstance(row, dict):
            row = _Seq([row])  # one number: a row of one value
        row.line = n
        rows.append(row)
    if not rows:
        raise AttnError("the file is empty", hint="expected rows of numbers")
    return rows


def _load_yaml(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        tree = _YamlTree().build(yaml.parse(text, Loader=loader))
    except yaml.YAMLError as e:
        if loader is not yaml.SafeLoader:
            _refuse_if_too_deep(text, e, loader)
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if mark is None:
            raise AttnError(f"invalid YAML: {problem}") from None
        raise AttnError(f"invalid YAML: {problem} (column {mark.column + 1})", line=mark.line + 1) from None
    if tree is None:
        raise AttnError("the file is empty", hint="expected rows of numbers")
    return tree


def too_deep(line: int | None = None) -> AttnError:
    return AttnError("is nested too deeply to be a matrix", line=line, hint=DEPTH_HINT)


def _refuse_if_too_deep(text: str, error: Any, loader: Any) -> None:
    """Raise attn's own depth error where the C parser stopped before attn's
    depth check could see the levels past MAX_DEPTH.

    libyaml reads ahead while a flow collection (``[[[…``) might still turn
    out to be a mapping key, and from PyYAML 6.0.4 on it stops at 1,000
    levels with its own message, before attn has seen one event of them. If
    what it read ahead opens more levels than attn allows (brackets counted
    as written), the text up to the bracket past the limit is parsed again:
    the read-ahead ends there, so the events reach attn's checks, which raise
    attn's error (too deep, or a mapping key that is a collection: ``{{…``)
    before the parser's own complaint about the cut-off end, as they do with
    PyYAML 6.0.3. The cut falls just after a bracket, so every scalar before
    it is whole. Any other outcome leaves the parser's error as it was.
    """
    import yaml

    after, depth = getattr(error, "attn_state", (0, 0))  # where the last event attn saw ended; its depth
    mark = getattr(error, "problem_mark", None)
    end = len(text) if mark is None else min(len(text), mark.index + 1)
    level = 0
    for bracket in _BRACKETS.finditer(text, after, end):
        level += 1 if bracket.group() in "[{" else -1
        if level > MAX_DEPTH + 1 - depth:  # a collection opened inside MAX_DEPTH + 1 others
            break
    else:
        return
    try:
        _YamlTree().build(yaml.parse(text[: bracket.end()], Loader=loader))
    except AttnError as e:  # attn's first objection, as a parser without the limit would have let it say
        raise e from None
    except yaml.YAMLError:
        pass


_BRACKETS = re.compile(r"[\[\]{}]")


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    result = _Map()
    for key, value in pairs:
        if key in result:
            raise AttnError(f"duplicate key {key!r}")
        result[key] = value
    return result


MAX_DIGITS = 4000  # Python refuses int() of more than 4,300 digits; a float holds 309 at most anyway


def _json_int(text: str) -> int:
    """A JSON whole number, refused past MAX_DIGITS as too large (bad data, not Python's ValueError)."""
    if len(text) > MAX_DIGITS:
        raise AttnError(f"{clip(text)} is too large ({len(text.lstrip('-')):,} digits)")
    return int(text)


def _json_float(text: str) -> float:
    return float(text)


def _json_constant(name: str) -> float:
    if name == "-Infinity":  # as Python's json writes -inf: a mask or bias may hold it, checked later
        return float("-inf")
    raise AttnError(f"{name} is not a finite number")


class _YamlTree:
    """YAML parser events -> _Seq/_Map/Scalar, refusing tags, cycles, deep
    nesting and alias bombs.

    The tree is built here from the parser's events, with a stack of the
    collections still open, rather than by PyYAML's composer: its C version
    recurses once per level (a file nested 50,000 deep crashed it) and holds
    the interpreter, and with it Ctrl-C, for the whole file. So depth is
    checked as each node opens, and Ctrl-C is honoured between events.

    An alias reuses its anchor's result, so a tiny file can describe a huge
    tree; sizes are counted per distinct node and refused past the
    TREE_NODES limit before anything is expanded.
    """

    SAFE_TAGS = {YAML_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map")}

    def __init__(self) -> None:
        from yaml.resolver import Resolver

        self.resolver = Resolver()  # the implicit tags (int, float, bool, null...) of untagged nodes
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (its result, its size)
        self.limit = TREE_NODES.value()

    def build(self, events: Iterable[Any]) -> Any:
        """The tree of the one document in ``events`` (None for an empty stream)."""
        import yaml

        stack: list[_Open] = []  # the collections still open, outermost first
        documents: list[Any] = []
        event = None
        try:
            for event in events:
                line = event.start_mark.line + 1 if event.start_mark else None
                if isinstance(event, yaml.DocumentStartEvent):
                    if documents:
                        column = event.start_mark.column + 1 if event.start_mark else 1
                        raise AttnError(f"invalid YAML: but found another document (column {column})", line=line)
                    documents.append(None)
                elif isinstance(event, yaml.AliasEvent):
                    if event.anchor not in self.anchors:
                        if any(o.anchor == event.anchor for o in stack):
                            raise AttnError("a YAML alias refers to itself", line=line)
                        column = event.start_mark.column + 1 if event.start_mark else 1
                        raise AttnError(f"invalid YAML: found undefined alias (column {column})", line=line)
                    self._add(stack, documents, *self.anchors[event.anchor], line)
                elif isinstance(event, yaml.ScalarEvent):
                    key = bool(stack) and stack[-1].wants_key
                    tag = self._tag(event, yaml.ScalarNode, event.value, line, check=not key, depth=len(stack))
                    scalar = Scalar(event.value, line or 0, not event.style, tag)
                    if event.tag is not None and not event.style:
                        scalar.tagged = self._retagged(event.tag, tag, event.value)
                    if event.anchor:
                        self.anchors[event.anchor] = (scalar, 1)
                    self._add(stack, documents, scalar, 1, line)
                elif isinstance(event, yaml.CollectionStartEvent):
                    if stack and stack[-1].wants_key:
                        raise AttnError("a mapping key must be a plain name", line=line)
                    sequence = isinstance(event, yaml.SequenceStartEvent)
                    self._tag(
                        event,
                        yaml.SequenceNode if sequence else yaml.MappingNode,
                        None,
                        line,
                        check=True,
                        depth=len(stack),
                    )
                    container: Any = _Seq() if sequence else _Map()
                    container.line = line
                    stack.append(_Open(container, event.anchor))
                elif isinstance(event, yaml.CollectionEndEvent):
                    done = stack.pop()
                    if done.size > self.limit:
                        raise AttnError(
                            f"expands to more than {self.limit:,} elements",
                            line=done.value.line,
                            hint=f"YAML aliases repeat whole subtrees; write the numbers out, "
                            f"or set {TREE_NODES.variable} to raise the limit",
                        )
                    if done.anchor:
                        self.anchors[done.anchor] = (done.value, done.size)
                    self._add(stack, documents, done.value, done.size, done.value.line)
        except yaml.YAMLError as e:  # where the parser stopped, for _refuse_if_too_deep
            after = event.end_mark.index if event is not None and event.end_mark else 0
            e.attn_state = (after, len(stack))  # type: ignore[attr-defined]
            raise
        return documents[0] if documents else None

    def _tag(self, event: Any, kind: Any, value: Any, line: int | None, check: bool, depth: int) -> str:
        """The node's tag (resolved when implicit), refused unless plain; its depth checked."""
        tag = event.tag
        if tag is None or tag == "!":
            implicit = getattr(event, "implicit", None)
            tag = self.resolver.resolve(kind, value, implicit if isinstance(implicit, tuple) else (implicit, False))
        if check and tag not in self.SAFE_TAGS:
            raise AttnError(
                f"the tag {tag} is not allowed", line=line, hint="attn reads plain YAML: numbers, lists and mappings"
            )
        if check and depth > MAX_DEPTH:
            raise too_deep(line)
        return tag

    def _retagged(self, written: str, tag: str, text: str) -> str | None:
        """The tag as written (``!!str``), unless it is ``!!int``, ``!!float`` or the tag the text has anyway.
        ``! 2`` is text to the YAML spec and a number to PyYAML: it is kept, to be refused."""
        import yaml

        implicit = self.resolver.resolve(yaml.ScalarNode, text, (True, False))
        if written != "!" and (tag in NUMBER_TAGS or tag == implicit):
            return None
        return "!!" + written.removeprefix(YAML_TAG) if written.startswith(YAML_TAG) else written

    @staticmethod
    def _add(stack: list[_Open], documents: list[Any], value: Any, size: int, line: int | None) -> None:
        """Put a finished node into the collection open around it (or make it the document)."""
        if not stack:
            documents[-1:] = [value]
            return
        parent = stack[-1]
        if isinstance(parent.value, _Seq):
            parent.value.append(value)
            parent.size += size
        elif parent.wants_key:
            if not isinstance(value, Scalar):
                raise AttnError("a mapping key must be a plain name", line=line)
            if value.text in parent.value:
                raise AttnError(f"duplicate key {value.text!r}", line=line)
            parent.key, parent.wants_key = value.text, False
        else:
            parent.value[parent.key] = value
            parent.size += size
            parent.wants_key = True


@dataclass
class _Open:
    """A collection being built: its value, its anchor, its size so far, and
    for a mapping whether the next node is a key (or the value of ``key``)."""

    value: Any  # _Seq or _Map
    anchor: str | None
    size: int = 1
    key: str = ""
    wants_key: bool = True

    def __post_init__(self) -> None:
        self.wants_key = isinstance(self.value, _Map)


def matrix_from_tree(tree: Any, source: str, where: str, request: Request = NUMBERS) -> Matrix:
    """A matrix from a parsed YAML/JSON value.

    Accepted shapes: a list of rows; one flat list (one row, marked a
    ``vector``); a list of records (mappings of column name: number, as
    pandas' ``to_json(orient="records")`` writes); a mapping of label -> row
    (a row may be one number); or an explicit mapping with ``rows`` (any of
    those) and optional ``labels``, ``columns`` (names) and ``divide`` (every
    value is divided by it, e.g. 255 for RGB); or what pandas' ``to_json()``
    writes with ``orient="split"`` or ``orient="table"`` (see ``_pandas_frame``).
    A mapping of mappings (pandas' default orient, or ``orient="index"``) is
    refused: columns of rows or rows of columns, the file cannot say.
    """
    import numpy as np

    prefix = f"{where}: " if where else ""

    def fail(message: str, node: Any = None, hint: str | None = None) -> AttnError:
        return AttnError(prefix + message, source=source, line=line_of(node) or line_of(tree), hint=hint)

    def cell_fail(where: str, node: Any) -> Callable[[str], AttnError]:
        return lambda message: fail(f"{where}: {message}", node)

    spec = {}
    if isinstance(tree, dict) and "rows" in tree and set(tree) <= SPEC_KEYS:
        spec, tree = tree, tree["rows"]
    row_labels = None
    columns = None
    vector = False
    frame = _pandas_frame(tree, fail)
    if frame is not None:
        row_labels, columns, rows = frame
    elif isinstance(tree, dict):
        _refuse_nested_mappings(tree, fail)
        row_labels, rows = list(tree.keys()), list(tree.values())
    elif isinstance(tree, list) and tree and all(isinstance(r, dict) for r in tree):
        columns, rows = _records(tree, fail)
    elif isinstance(tree, list):
        vector = not all(isinstance(r, list) for r in tree)
        rows = [tree] if vector else tree
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
        numbers.append([_cell(c, request.mask, cell_fail(f"{name}, column {j + 1}", c)) for j, c in enumerate(cells)])
        if len(cells) != len(numbers[0]):
            raise fail(
                f"{name} has {plural(len(cells), 'value')}, expected {len(numbers[0])} like the first row",
                row,
                hint="every row needs the same number of columns",
            )
    values = np.array(numbers, dtype=np.float64)

    if "divide" in spec:
        divisor = _cell(spec["divide"], False, cell_fail("divide", spec["divide"]))
        if divisor == 0:
            raise fail("divide must not be 0", spec["divide"])
        values = values / divisor
    bad = first_bad(values, request.special)
    if bad:
        i, j = bad
        raise fail(f"row {i + 1}, column {j + 1}: {not_finite(values[i, j], request.special)}", rows[i])
    labels = spec.get("labels")
    return Matrix(
        values,
        checked_labels(_names(labels, fail), len(rows), source, f"{prefix}labels") if labels else row_labels,
        checked_labels(_names(spec.get("columns"), fail) or columns, values.shape[1], source, f"{prefix}columns"),
        vector=vector,
    )


SPLIT_KEYS = ({"columns", "data"}, {"columns", "index", "data"}, {"name", "index", "data"})  # DataFrame, Series
TABLE_KEYS = {"schema", "data"}
ORIENT_HINT = "write it with to_json(orient='split') or orient='records'"


def _pandas_frame(tree: Any, fail: Callable[..., AttnError]) -> tuple[list[str] | None, list[str] | None, list] | None:
    """Row labels, column names and rows of what pandas' ``to_json()`` writes
    with ``orient="split"`` (``columns``, ``index``, ``data``; a Series:
    ``name``, ``index``, ``data``) or ``orient="table"`` (a ``schema`` whose
    ``fields`` name the columns, the ``primaryKey`` field being the index, and
    ``data``, a list of records); None for anything else.

    The index becomes the row labels, whatever it holds (0, 1, … included),
    as pandas' index column does in a CSV file. A Series is one column.
    """
    if not is_pandas_frame(tree):
        return None
    return _split(tree, fail) if set(tree) in SPLIT_KEYS else _table(tree, fail)


def is_pandas_frame(tree: Any) -> bool:
    """Is it pandas' ``to_json()`` with ``orient="split"`` or ``orient="table"``?"""
    if not isinstance(tree, dict) or not isinstance(tree.get("data"), list):
        return False
    schema = tree.get("schema")
    return set(tree) in SPLIT_KEYS or (
        set(tree) == TABLE_KEYS and isinstance(schema, dict) and isinstance(schema.get("fields"), list)
    )


def _split(tree: dict, fail: Callable[..., AttnError]) -> tuple[list[str] | None, list[str] | None, list]:
    what = "pandas' orient='split'"
    series = "name" in tree
    rows = [[c] for c in tree["data"]] if series else tree["data"]
    if not all(isinstance(r, list) for r in rows):
        raise fail(f"{what}: data must be a list of rows", tree["data"])
    name = tree.get("name")
    name = name.value() if isinstance(name, Scalar) else name
    columns = ([] if name is None else [name]) if series else tree["columns"]
    if not isinstance(columns, list):
        raise fail(f"{what}: columns must be a list of names", tree)
    names = _names(columns, fail) or None
    if names is not None and rows and len(names) != len(rows[0]):
        raise fail(f"{what}: {plural(len(names), 'column name')} for rows of {plural(len(rows[0]), 'value')}", tree)
    index = tree.get("index")
    labels = None if index is None else _labels(index, len(rows), what, fail)
    return labels, names, rows


def _table(tree: dict, fail: Callable[..., AttnError]) -> tuple[list[str] | None, list[str] | None, list]:
    what = "pandas' orient='table'"
    schema = tree["schema"]
    fields = [f.get("name") if isinstance(f, dict) else None for f in schema["fields"]]
    if any(f is None or isinstance(f, Scalar) and f.value() is None for f in fields):
        raise fail(f"{what}: every schema field needs a name", schema)
    key = schema.get("primaryKey") or []
    key = key if isinstance(key, list) else [key]
    if len(key) > 1:
        raise fail(
            f"{what}: the index has {len(key)} levels; attn reads one level of row labels",
            schema,
            hint="reset_index() the other levels first",
        )
    names = _names(fields, fail) or []
    records = tree["data"]
    if not all(isinstance(r, dict) for r in records):
        raise fail(f"{what}: data must be a list of records", records)
    _, rows = _records(records, fail, expected=names)
    index = [j for j, n in enumerate(names) if n in (_names(key, fail) or [])]
    keep = [j for j in range(len(names)) if j not in index]
    labels = _labels([row[index[0]] for row in rows], len(rows), what, fail) if index else None
    kept_rows = []
    for row in rows:
        kept = _Seq(row[j] for j in keep)
        kept.line = line_of(row)
        kept_rows.append(kept)
    return labels, [names[j] for j in keep], kept_rows


def _labels(index: Any, count: int, what: str, fail: Callable[..., AttnError]) -> list[str]:
    """pandas' index as row labels: one name per row, none of them a list (a MultiIndex)."""
    if not isinstance(index, list):
        raise fail(f"{what}: the index must be a list of row labels", index)
    if any(isinstance(n, (list, dict)) for n in index):
        raise fail(
            f"{what}: the index has several levels; attn reads one level of row labels",
            index,
            hint="reset_index() the other levels first",
        )
    if len(index) != count:
        raise fail(f"{what}: the index has {plural(len(index), 'label')} for {plural(count, 'row')}", index)
    missing = [i for i, n in enumerate(index) if n is None or isinstance(n, Scalar) and n.value() is None]
    if missing:
        raise fail(
            f"{what}: row {missing[0] + 1} has no label (its index is null)",
            index,
            hint="give every row a label, or write it with index=False",
        )
    return [n.text if isinstance(n, Scalar) else str(n) for n in index]


def _refuse_nested_mappings(tree: dict, fail: Callable[..., AttnError]) -> None:
    """A mapping of mappings is pandas' default ``to_json()`` (columns of rows)
    and also its ``orient="index"`` (rows of columns): never guess which."""
    nested = [name for name, value in tree.items() if isinstance(value, dict)]
    if nested and len(nested) == len(tree):
        raise fail(
            "is a mapping of mappings, as pandas' to_json() writes by default: it could be columns of "
            "rows or rows of columns",
            tree,
            hint=ORIENT_HINT,
        )
    if nested:
        raise fail(
            f"row {nested[0]!r} is a mapping, other rows are not",
            tree[nested[0]],
            hint="write every row as a list of numbers",
        )


def _records(
    tree: list, fail: Callable[..., AttnError], expected: list[str] | None = None
) -> tuple[list[str], list[Any]]:
    """Column names and rows of a list of records, each a mapping of the same
    column names (``expected``, else the first record's) to numbers."""
    columns = expected if expected is not None else [str(name) for name in tree[0]]
    rows = []
    for i, record in enumerate(tree):
        names = [str(name) for name in record]
        if names != columns:
            like = "like the first row" if expected is None else "as the schema's fields name them"
            raise fail(
                f"row {i + 1} has the columns {', '.join(names)}, expected {', '.join(columns)} {like}",
                record,
                hint="every record needs the same names, in the same order",
            )
        row = _Seq(record.values())
        row.line = line_of(record)
        rows.append(row)
    return columns, rows


def _cell(node: Any, mask: bool, fail: Callable[[str], AttnError]) -> float:
    """One number from YAML/JSON; refuse text, booleans and nulls, never guess."""
    if isinstance(node, Scalar):
        if not node.plain:
            raise fail(f"{node.text!r} is quoted, so it is text, not a number (remove the quotes)")
        if node.tagged:
            raise fail(f"{node.text!r} is tagged {node.tagged}, so it is not a number (remove the tag)")
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
        value = parse_number(text.replace("_", ""))
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
            raise fail(f"{clip(str(node))} is too large") from None
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
    return [n.text if isinstance(n, Scalar) else str(n) for n in node]
