"""Files and bytes -> labelled matrices.

One call reads any input: ``read_input(source)`` takes a path (read when
needed, a float NPY file memory-mapped) or bytes plus the name to use in
errors (stdin, tests), finds its format in the ``FORMATS`` registry and
returns a ``Bundle`` (a single matrix is a one-entry bundle); ``read_matrix``
and ``read_bundle`` are shorthands. Formats: CSV, TSV, whitespace-separated
text, NPY, NPZ, YAML, JSON and JSON Lines; ``TextSettings`` say how to read
text where the file could be read two ways (see ``readers.layout``), and a
matrix's ``choices`` say where the reader chose. Every problem is an ``AttnError`` that names
the source and, for text, the line, in data terms: readers know nothing of
the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attncli.readers.base import Bundle, Choice, Input, Matrix, NotABundle, TextSettings
    from attncli.readers.formats import (
        FORMATS,
        Format,
        detect,
        detect_format,
        read_bundle,
        read_input,
        read_matrix,
        sniff,
    )

__all__ = [
    "FORMATS",
    "Bundle",
    "Choice",
    "Format",
    "Input",
    "Matrix",
    "NotABundle",
    "TextSettings",
    "detect",
    "detect_format",
    "read_bundle",
    "read_input",
    "read_matrix",
    "sniff",
]

# Imported on first use, so that naming a reader's type (attn --help) loads no reader.
_LAZY = {name: "attncli.readers.base" for name in ("Bundle", "Choice", "Input", "Matrix", "NotABundle", "TextSettings")}


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        return getattr(importlib.import_module(_LAZY.get(name, "attncli.readers.formats")), name)
    raise AttributeError(f"module 'attncli.readers' has no attribute {name!r}")
