"""The input formats: one registry line each, and ``read_input``, the one way
every command reads an input.

A format is found from the input's extension, else from its first bytes
(``magic``), else, for text, from its content (``sniff_text``). Adding a
format is one module with a reader and one line in ``FORMATS``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from attncli.readers.base import (
    BY_FILE,
    NPY_MAGIC,
    NPZ_MAGIC,
    Bundle,
    Input,
    Matrix,
    NotABundle,
    Request,
    TextSettings,
    entry_key,
)
from attncli.readers.encodings import head_text
from attncli.readers.foreign import refuse_foreign

Reader = Callable[[Input, Request], Bundle]


def _named(where: str) -> Any:
    """The function a registry line names, "module:function" in attncli.readers, imported when first used."""
    import importlib

    module, name = where.split(":")
    return getattr(importlib.import_module(f"attncli.readers.{module}"), name)


@dataclass(frozen=True)
class Format:
    """An input format: how to recognise it and how to read it. Its reader (and
    ``recognise``) are named "module:function" and imported when first used, so
    reading a YAML file loads no CSV or NPY reader."""

    name: str
    extensions: tuple[str, ...]  # lowercase, with the dot
    reader: str  # "module:function" of attncli.readers
    magic: tuple[bytes, ...] = ()  # first bytes that mark it, whatever the name
    bundles: bool = False  # can hold named matrices (q, k, v, ...), not only one matrix
    recogniser: str | None = None  # "module:function" (bytes -> bool), when no fixed first bytes mark it

    def read(self, source: Input, request: Request) -> Bundle:
        reader: Reader = _named(self.reader)
        return reader(source, request)

    def recognise(self, data: bytes) -> bool:
        return self.recogniser is not None and bool(_named(self.recogniser)(data))


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("csv", (".csv",), "text:read_csv"),
        Format("tsv", (".tsv", ".tab"), "text:read_tsv"),
        Format("txt", (), "text:read_txt"),  # .txt and .dat may hold CSV or TSV too: recognised by content
        Format("npy", (".npy",), "arrays:read_npy", magic=(NPY_MAGIC,)),
        Format("npz", (".npz",), "arrays:read_npz", magic=NPZ_MAGIC, bundles=True),
        Format(
            "safetensors",
            (".safetensors",),
            "tensors:read_safetensors",
            bundles=True,
            recogniser="tensors:looks_like_safetensors",
        ),
        Format("yaml", (".yaml", ".yml"), "trees:read_yaml", bundles=True),
        Format("json", (".json",), "trees:read_json", bundles=True),
        Format("jsonl", (".jsonl", ".ndjson"), "trees:read_json_lines"),  # one row per line, as `jq -c '.[]'` does
    )
}


def read_input(
    source: Input | bytes | str | os.PathLike[str],
    name: str | None = None,
    fmt: str | None = None,
    *,
    mask: bool = False,
    bias: bool = False,
    bundle: bool | Iterable[str] = False,
    settings: Iterable[str] = (),
    text: TextSettings = BY_FILE,
    tensors: bool = False,
    finite: bool = True,
) -> Bundle:
    """Read a file (a path) or bytes (named ``name`` in errors) in any format.

    The input holds one matrix (a one-entry Bundle, see ``Bundle.single``)
    unless ``bundle``: True asks for named matrices (q, k, v, ...; a format
    that holds one matrix is refused), a set of names asks for named matrices
    when the input has an entry of one of those names, and one matrix otherwise.
    ``mask`` accepts booleans, true/false and -inf (an attention mask),
    ``bias`` -inf (added to the scores). ``text`` says how to read CSV/TSV/text
    where the file could be read two ways. ``tensors`` accepts arrays of any
    rank ≥ 2 in their stored float dtype (NPY, NPZ, safetensors);
    ``finite=False`` lets NaN and infinities through (NPY, NPZ, safetensors).
    ``settings`` names a bundle's entries that are settings whatever they
    hold (``window: [3, 0]`` is kept in ``meta`` as [3, 0], not read as a
    matrix). ``fmt`` overrides the detected format.
    """
    src = Input.of(source, name)
    form = FORMATS[fmt] if fmt else detect(src)
    names = frozenset() if isinstance(bundle, bool) else frozenset(n.lower() for n in bundle)
    request = Request(
        mask=mask,
        bias=bias,
        bundle=bundle is True,
        bundle_if=names,
        text=text,
        tensors=tensors,
        finite=finite,
        settings=frozenset(entry_key(name) for name in settings),
    )
    if request.bundle and not form.bundles:
        holders = "/".join(f.name.upper() for f in FORMATS.values() if f.bundles)
        raise NotABundle(
            f"a {form.name.upper()} file holds one matrix, not a bundle",
            source=src.name,
            hint=f"named matrices come in {holders} files",
        )
    return form.read(src, request)


def read_matrix(
    source: Input | bytes | str | os.PathLike[str],
    name: str | None = None,
    fmt: str | None = None,
    *,
    mask: bool = False,
    bias: bool = False,
    text: TextSettings = BY_FILE,
    tensors: bool = False,
    finite: bool = True,
) -> Matrix:
    """The one matrix an input holds; an NPZ archive must hold exactly one array."""
    return read_input(source, name, fmt, mask=mask, bias=bias, text=text, tensors=tensors, finite=finite).matrix()


def read_bundle(
    source: Input | bytes | str | os.PathLike[str],
    name: str | None = None,
    fmt: str | None = None,
    *,
    text: TextSettings = BY_FILE,
    tensors: bool = False,
) -> Bundle:
    """Named matrices from a YAML/JSON mapping, an NPZ archive or a safetensors file."""
    return read_input(source, name, fmt, bundle=True, text=text, tensors=tensors)


EXTENSIONS = {ext: f for f in FORMATS.values() for ext in f.extensions}


def detect(source: Input) -> Format:
    """The format of an input: from its extension, else from its bytes. A file
    attn does not read (a workbook, a pickle, …: ``foreign.FOREIGN``) is refused
    with how to save it, rather than read as text."""
    if source.suffix in EXTENSIONS:
        return EXTENSIONS[source.suffix]
    refuse_foreign(source.suffix, source.data, source.name)
    return FORMATS[sniff(source.data())]


def detect_format(name: str, data: bytes) -> str:
    """The name of the format of ``data`` named ``name``."""
    return detect(Input.of(data, name)).name


def sniff(data: bytes) -> str:
    """The format of bytes: a format's magic bytes, else ``sniff_text``."""
    for form in FORMATS.values():
        if form.magic and data.startswith(form.magic) or form.recognise(data):
            return form.name
    return sniff_text(data)


def sniff_text(data: bytes) -> str:
    """The text format from the first line that is not blank or a comment
    (UTF-16 with a byte-order mark too): JSON, JSON Lines (a whole JSON value
    on the first line, and more lines), YAML, TSV, CSV (commas, semicolons or
    Excel's sep= line) or whitespace-separated text."""
    from attncli.readers.layout import is_comment, sep_line

    lines = [ln.strip() for ln in head_text(data).splitlines() if ln.strip() and not is_comment(ln)]
    first = lines[0] if lines else ""
    if first[:1] in ("[", "{"):
        return "jsonl" if len(lines) > 1 and lines[1][:1] in ("[", "{") and _whole_json(first) else "json"
    if sep_line(first):
        return "csv"
    if re.match(r"(-(\s|$)|---|[^,;\t]*:(\s|$))", first):
        return "yaml"
    if "\t" in first:
        return "tsv"
    return "csv" if "," in first or ";" in first else "txt"


def _whole_json(line: str) -> bool:
    import json

    try:
        json.loads(line)
    except ValueError:
        return False
    return True
