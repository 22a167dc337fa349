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
    "FORMATS", "Bundle", "Choice", "Format", "Input", "Matrix", "NotABundle", "TextSettings",
    "detect", "detect_format", "read_bundle", "read_input", "read_matrix", "sniff",
]
