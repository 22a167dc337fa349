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

from attncli.errors import AttnError, UsageError

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
    except FileNotFoundError:
        raise AttnError("no such file", source=name) from None
    except IsADirectoryError:
        raise AttnError("is a directory, expected a file", source=name) from None
    except PermissionError:
        raise AttnError("permission denied", source=name) from None
    except OSError as e:
        raise AttnError(f"cannot read: {e.strerror or e}", source=name) from None


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
    view: Any  # a Rich renderable for the terminal, or a function making one (built only for tables)
    matrices: dict[str, Emitted] = field(default_factory=dict)  # for --emit


def is_terminal() -> bool:
    """Is stdout a person's terminal (tables) rather than a pipe or file (data)?"""
    return sys.stdout.isatty()


def choose_format(fmt: Optional[Format]) -> Format:
    if fmt is not None:
        return fmt
    return Format.table if is_terminal() else Format.json


def emit(result: Result, fmt: Optional[Format], which: str = "output") -> None:
    """Write the result to stdout once, in the chosen format."""
    from attncli import writers

    fmt = choose_format(fmt)
    if fmt is Format.table:
        console = _console()
        console.print(result.view() if callable(result.view) else result.view)
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
        return Console(highlight=False)
    width = int(os.environ.get("COLUMNS", 0)) or 1000
    return Console(file=sys.stdout, width=width, highlight=False, color_system=None)


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
