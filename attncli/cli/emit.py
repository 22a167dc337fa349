"""Writing a command's result once: a Rich view on a terminal, else JSON or
one matrix as CSV/TSV/NPY; pictures first, so that their errors stop the
command before anything is printed."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from attncli.cli.io import STDIN
from attncli.errors import UsageError


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    tsv = "tsv"
    npy = "npy"


MATRIX_FORMATS = (Format.csv, Format.tsv, Format.npy)  # write one matrix (--emit), not the whole result

@dataclass
class Emitted:
    """One matrix a data format may write: values and optional labels."""

    values: Any
    row_labels: list[str] | None = None
    col_labels: list[str] | None = None


@dataclass
class Result:
    """What a command produced, ready for any output format."""

    data: dict  # the JSON object
    view: Any  # a Rich renderable for the terminal, or a function that builds it when needed
    matrices: dict[str, Emitted] = field(default_factory=dict)  # for --emit


def is_terminal() -> bool:
    """Is stdout a person's terminal (tables) rather than a pipe or file (data)?"""
    return sys.stdout.isatty()


def choose_format(fmt: Format | None) -> Format:
    if fmt is not None:
        return fmt
    return Format.table if is_terminal() else Format.json


def emit(
    result: Result,
    fmt: Format | None,
    which: str = "output",
    *,
    svg: str | None = None,
    html: str | None = None,
    title: str = "attn",
) -> None:
    """Save the pictures asked for, then write the result to stdout once, in
    the chosen format (a picture error thus stops the command before output)."""
    from attncli.output import writers

    fmt = choose_format(fmt)
    view = None
    if fmt is Format.table or svg is not None or html is not None:
        view = result.view() if callable(result.view) else result.view
    if svg is not None or html is not None:
        if STDIN in (svg, html):
            raise UsageError("a picture needs a file name, not '-'", hint="stdout gets the --format output")
        from attncli.output.pictures import PICTURE_WIDTH, save_pictures

        width = _console().width if is_terminal() else int(os.environ.get("COLUMNS", 0)) or PICTURE_WIDTH
        save_pictures(view, svg, html, title=title, width=width)
    if fmt is Format.table:
        _console().print(view)
        return
    if fmt is Format.json:
        writers.write_json(sys.stdout, result.data)
        sys.stdout.flush()
        return
    matrix = result.matrices[which]
    if fmt is Format.npy:
        if is_terminal():
            raise UsageError("refusing to write binary NPY to a terminal", hint="redirect it: > out.npy")
        writers.write_npy(sys.stdout.buffer, matrix.values)
        sys.stdout.buffer.flush()
        return
    delimiter = "," if fmt is Format.csv else "\t"
    writers.write_delimited(sys.stdout, matrix.values, matrix.row_labels, matrix.col_labels, delimiter)
    sys.stdout.flush()


def _console():
    """A terminal console, or for an explicit ``--format table`` into a pipe,
    a plain one wide enough that nothing wraps or is cut."""
    from rich.console import Console

    if is_terminal():
        return Console(highlight=False, force_terminal=True)
    width = int(os.environ.get("COLUMNS", 0)) or 1000
    return Console(file=sys.stdout, width=width, highlight=False, color_system=None)


