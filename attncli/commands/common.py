"""What every command shares: reading named inputs (``-`` is stdin), choosing
the output format, and writing a result once, as a table or as data."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, Optional

import typer

from attncli.errors import UsageError, file_error

STDIN = "-"


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    tsv = "tsv"
    npy = "npy"


MATRIX_FORMATS = (Format.csv, Format.tsv, Format.npy)  # write one matrix (--emit), not the whole result

FormatOption = Annotated[
    Optional[Format],
    typer.Option(
        "--format", "-f",
        help="table, json, csv, tsv or npy. Default: table on a terminal, json in a pipe. "
             "csv/tsv/npy write the one matrix chosen by --emit.",
        show_default=False,
    ),
]
SvgOption = Annotated[Optional[str], typer.Option(
    "--svg", metavar="FILE", show_default=False,
    help="Also save the terminal view as an SVG picture, whatever --format writes to stdout.",
)]
HtmlOption = Annotated[Optional[str], typer.Option(
    "--html", metavar="FILE", show_default=False,
    help="Also save the terminal view as a standalone HTML page, whatever --format writes to stdout.",
)]
PrecisionOption = Annotated[
    int, typer.Option("--precision", "-p", min=0, max=17, help="Decimals shown in tables (data formats are exact).")
]


def read_bytes(name: str) -> bytes:
    """The whole input named on the command line; ``-`` is stdin."""
    if name == STDIN:
        return sys.stdin.buffer.read()
    try:
        with open(name, "rb") as f:
            return f.read()
    except OSError as e:
        raise file_error(name, e) from None


def read_matrix_arg(name: str, *, mask: bool = False):
    """The one matrix in the input named on the command line (``-`` is stdin).

    A float NPY file is memory-mapped rather than read, so a K or V larger
    than memory can still be streamed through the kernel.
    """
    from attncli.readers import detect_format, read_matrix
    from attncli.readers.arrays import NPY_MAGIC, map_npy, matrix_from_array

    if name != STDIN and detect_format(name, NPY_MAGIC) == "npy":
        mapped = map_npy(name, name)
        if mapped is not None:
            return matrix_from_array(mapped, name, "", mask)
    return read_matrix(read_bytes(name), source_name(name), mask=mask)


def source_name(name: str) -> str:
    return "<stdin>" if name == STDIN else name


def check_stdin_once(names: list[Optional[str]]) -> None:
    """stdin can be read once: refuse a command line that names it twice."""
    if sum(1 for n in names if n == STDIN) > 1:
        raise UsageError("stdin ('-') is named more than once, but can be read only once",
                         hint="save all but one input to a file")


@dataclass
class Emitted:
    """One matrix a data format may write: values and optional labels."""

    values: Any
    row_labels: Optional[list[str]] = None
    col_labels: Optional[list[str]] = None


@dataclass
class Result:
    """What a command produced, ready for any output format."""

    data: dict  # the JSON object
    view: Any  # a Rich renderable for the terminal, or a function that builds it when needed
    matrices: dict[str, Emitted] = field(default_factory=dict)  # for --emit


def is_terminal() -> bool:
    """Is stdout a person's terminal (tables) rather than a pipe or file (data)?"""
    return sys.stdout.isatty()


def choose_format(fmt: Optional[Format]) -> Format:
    if fmt is not None:
        return fmt
    return Format.table if is_terminal() else Format.json


def emit(
    result: Result,
    fmt: Optional[Format],
    which: str = "output",
    *,
    svg: Optional[str] = None,
    html: Optional[str] = None,
    title: str = "attn",
) -> None:
    """Save the pictures asked for, then write the result to stdout once, in
    the chosen format (a picture error thus stops the command before output)."""
    from attncli import writers

    fmt = choose_format(fmt)
    view = None
    if fmt is Format.table or svg is not None or html is not None:
        view = result.view() if callable(result.view) else result.view
    save_pictures(view, svg, html, title=title)
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


PICTURE_WIDTH = 100  # columns of a picture when no terminal says otherwise


def save_pictures(view: Any, svg: Optional[str] = None, html: Optional[str] = None, *,
                  title: str = "attn") -> None:
    """Write the terminal view to ``--svg``/``--html`` files, before stdout gets
    its output, so that a picture error stops the command with nothing printed.

    A command adds pictures with its two options (``svg: SvgOption = None,
    html: HtmlOption = None``) passed on to ``emit``.
    The picture is as wide as the view needs, at most the terminal's width
    (``COLUMNS``, else 100), and keeps its colours even under NO_COLOR: it is
    a file to share, not terminal output.
    """
    if svg is None and html is None:
        return
    import io
    from html import escape as html_escape

    from rich.console import Console

    for name in (svg, html):
        if name == STDIN:
            raise UsageError("a picture needs a file name, not '-'", hint="stdout gets the --format output")
    limit = _console().width if is_terminal() else int(os.environ.get("COLUMNS", 0)) or PICTURE_WIDTH
    console = Console(file=io.StringIO(), record=True, width=limit, force_terminal=True,
                      color_system="truecolor", no_color=False, highlight=False)
    console.width = min(max(console.measure(view).maximum, 20), limit)  # no empty margin on the right
    console.print(view)
    if svg is not None:
        write_atomically(svg, console.export_svg(title=title, clear=False))
    if html is not None:
        page = console.export_html(clear=False)
        write_atomically(html, page.replace("<head>", f"<head>\n<title>{html_escape(title)}</title>", 1))


def write_atomically(name: str, text: str) -> None:
    """Write a file whole or not at all: a temporary file in the same directory,
    renamed over the target, so an interrupted run leaves no half-written file."""
    import tempfile

    if os.path.isdir(name):
        raise file_error(name, IsADirectoryError())
    directory = os.path.dirname(os.path.abspath(name))
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(name)}.", suffix=".tmp")
    except OSError as e:
        raise file_error(name, e, writing=True) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, name)
    except BaseException as e:
        os.unlink(temporary)
        if isinstance(e, OSError):
            raise file_error(name, e, writing=True) from None
        raise


def _umask() -> int:
    """The process umask (mkstemp makes files 0600; a picture should get the usual mode)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


PROGRESS_AFTER = 1.0  # seconds of work before a progress bar appears


@contextmanager
def progress_bar(label: str):
    """A ``progress(done, total)`` callback that shows a Rich bar on stderr once
    the work has taken more than a second; None when stderr is not a terminal
    (pipes, CI, tests), so no work is done for it."""
    if not sys.stderr.isatty():
        yield None
        return
    import time

    start, bar = time.monotonic(), {}

    def progress(done: int, total: int) -> None:
        if not bar and time.monotonic() - start > PROGRESS_AFTER:
            from rich.console import Console
            from rich.progress import Progress

            bar["progress"] = Progress(console=Console(stderr=True), transient=True)
            bar["progress"].start()
            bar["task"] = bar["progress"].add_task(label, total=total)
        if bar:
            bar["progress"].update(bar["task"], completed=done)

    try:
        yield progress
    finally:
        if bar:
            bar["progress"].stop()
