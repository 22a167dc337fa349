"""Bytes from a file or stdin -> labelled matrices.

Readers take the whole input as bytes plus the name to use in errors, so tests
can pass literals; only the CLI knows about paths and ``-``. Formats: CSV, TSV,
whitespace-separated text, NPY, NPZ, YAML and JSON. Every problem is an
``AttnError`` that names the source and, for text, the line.
"""

from __future__ import annotations

import re

from attncli.errors import AttnError
from attncli.readers.arrays import NPY_MAGIC, load_npy, matrix_from_array, read_npz
from attncli.readers.base import Bundle, Matrix, decode_text
from attncli.readers.limits import check_text
from attncli.readers.text import read_delimited, read_delimited_fast
from attncli.readers.trees import (
    Scalar,
    line_of,
    load_tree,
    matrix_from_tree,
)

__all__ = ["Bundle", "Matrix", "detect_format", "read_bundle", "read_matrix", "sniff"]

FORMATS = ("csv", "tsv", "txt", "npy", "npz", "yaml", "json")
EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": None, ".dat": None,
    ".npy": "npy", ".npz": "npz", ".yaml": "yaml", ".yml": "yaml", ".json": "json",
}


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

def read_matrix(data: bytes, source: str, fmt: str | None = None, *, mask: bool = False) -> Matrix:
    """One matrix from any format; an NPZ or bundle must hold exactly one.

    ``mask=True`` also accepts booleans and -inf (for attention masks).
    """
    fmt = fmt or detect_format(source, data)
    if fmt == "npy":
        return matrix_from_array(load_npy(data, source), source, "", mask)
    if fmt == "npz":
        bundle = read_npz(data, source, mask)
        if len(bundle.matrices) != 1:
            names = ", ".join(bundle.matrices) or "none"
            raise AttnError(f"holds several arrays ({names}), expected one matrix", source=source,
                            hint="pass it as the only file to read it as a bundle")
        return next(iter(bundle.matrices.values()))
    check_text(data, fmt, source)
    if fmt in ("yaml", "json"):
        return matrix_from_tree(load_tree(data, source, fmt), source, "", mask)
    return read_delimited_fast(data, fmt, mask) or read_delimited(decode_text(data, source), source, fmt, mask)


def read_bundle(data: bytes, source: str, fmt: str | None = None) -> Bundle:
    """Named matrices from a YAML/JSON mapping or an NPZ archive.

    YAML/JSON: each top-level entry holding a list or mapping is a matrix (see
    ``matrix_from_tree``); scalar entries (``description: ...``) are kept as meta.
    NPZ: each array is a matrix; ``<name>_labels`` and ``<name>_columns``
    string arrays name its rows and columns.
    """
    fmt = fmt or detect_format(source, data)
    if fmt == "npz":
        return read_npz(data, source, mask_names={"mask"})
    if fmt not in ("yaml", "json"):
        raise AttnError(f"a {fmt.upper()} file holds one matrix, not a bundle", source=source,
                        hint="give three files Q K V, or one YAML/JSON/NPZ bundle with q, k and v")
    check_text(data, fmt, source)
    tree = load_tree(data, source, fmt)
    if not isinstance(tree, dict):
        raise AttnError("a bundle must be a mapping of names to matrices (q:, k:, v:)",
                        source=source, line=line_of(tree))
    bundle = Bundle({})
    for name, entry in tree.items():
        if isinstance(entry, (list, dict)):
            bundle.matrices[name] = matrix_from_tree(entry, source, name, mask=name == "mask")
        else:
            bundle.meta[name] = entry.value() if isinstance(entry, Scalar) else entry
    return bundle

