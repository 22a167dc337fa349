"""Writing a command's result once: a Rich view on a terminal, else one of the
data formats of the WRITERS registry (JSON, or one array as CSV/TSV/NPY);
pictures first, so that their errors stop the command before anything is
printed."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from attncli.cli.io import STDIN
from attncli.errors import UsageError
from attncli.output.writers import WRITERS, Emitted

__all__ = ["MATRIX_FORMATS", "Emitted", "Format", "Result", "choose_format", "emit", "is_terminal"]

TABLE = "table"  # the Rich view; every other format is a writer
DATA = "json"  # the format of a pipe when none is chosen

# The --format choices: the Rich view and every writer, in registry order.
Format = Enum("Format", [(name, name) for name in (TABLE, *WRITERS)], type=str)  # type: ignore[misc]

# The formats that write one array (--emit), not the whole result.
MATRIX_FORMATS = tuple(Format(name) for name, writer in WRITERS.items() if not writer.whole)


@dataclass
class Result:
    """What a command produced, ready for any output format."""

    data: dict  # the JSON object
    view: Any  # a Rich renderable for the terminal, or a function that builds it when needed
    matrices: dict[str, Emitted] = field(default_factory=dict)  # for --emit
    maps: Any = None  # the weights to draw (AttentionMaps, or a function that makes them): head view, figures


def is_terminal() -> bool:
    """Is stdout a person's terminal (tables) rather than a pipe or file (data)?"""
    return sys.stdout.isatty()


def choose_format(fmt: Format | None) -> Format:
    if fmt is not None:
        return fmt
    return Format(TABLE) if is_terminal() else Format(DATA)


def emit(
    result: Result,
    fmt: Format | None,
    which: str = "output",
    *,
    svg: str | None = None,
    html: str | None = None,
    png: str | None = None,
    pdf: str | None = None,
    title: str = "attn",
) -> None:
    """Save the pictures asked for, then write the result to stdout once, in
    the chosen format (a picture error thus stops the command before output)."""
    fmt = choose_format(fmt)
    table = fmt.value == TABLE
    if not table and not WRITERS[fmt.value].whole and which not in result.matrices:
        raise UsageError(f"--emit {which}: this command writes {' or '.join(result.matrices)}")
    pictures = [path for path in (svg, html, png, pdf) if path is not None]
    if STDIN in pictures:
        raise UsageError("a picture needs a file name, not '-'", hint="stdout gets the --format output")
    if png is not None or pdf is not None:
        from attncli.output.figures import require

        require("--png" if png is not None else "--pdf")  # before any file is written
    view = None
    if table or svg is not None or html is not None:
        view = result.view() if callable(result.view) else result.view
    maps = (result.maps() if callable(result.maps) else result.maps) if pictures else None
    if png is not None or pdf is not None:
        from attncli.output.figures import save_figures

        if maps is None:
            raise UsageError("--png and --pdf draw attention weights, and this command has none")
        save_figures(maps, png, pdf, title)
    if svg is not None or html is not None:
        from attncli.output.pictures import PICTURE_WIDTH, save_pictures

        width = _console().width if is_terminal() else int(os.environ.get("COLUMNS", 0)) or PICTURE_WIDTH
        for note in save_pictures(view, svg, html, title=title, width=width, maps=maps):
            sys.stderr.write(f"attn: note: {note}\n")
    if table:
        _console().print(view)
        return
    writer = WRITERS[fmt.value]
    what = result.data if writer.whole else replace(result.matrices[which], name=which)
    if writer.binary and is_terminal():
        raise UsageError(f"refusing to write binary {writer.name.upper()} to a terminal",
                         hint=f"redirect it: > out.{writer.name}")
    stream = sys.stdout.buffer if writer.binary else sys.stdout
    writer.write(stream, what)
    stream.flush()


def _console():
    """A terminal console; for an explicit ``--format table`` into a pipe, a
    plain one wide enough that nothing wraps or is cut, unless FORCE_COLOR asks
    for colours there (``FORCE_COLOR=1 attn … -f table | less -R``, as Rich
    documents: then as wide as the terminal that stdin or stderr is)."""
    from rich.console import Console

    if is_terminal() or os.environ.get("FORCE_COLOR"):
        return Console(file=sys.stdout, highlight=False, force_terminal=True)
    width = int(os.environ.get("COLUMNS", 0)) or 1000
    return Console(file=sys.stdout, width=width, highlight=False, color_system=None)


