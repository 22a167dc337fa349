"""Writing a command's result once: a Rich view on a terminal, else one of the
data formats of the WRITERS registry (JSON, or one array as CSV/TSV/NPY);
pictures first, so that their errors stop the command before anything is
printed."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import IO, TYPE_CHECKING, Any, cast

from attncli.errors import AttnError, UsageError, file_error
from attncli.output.writers import WRITERS, Emitted
from attncli.text import printable

if TYPE_CHECKING:
    from attncli.cli.outputs import OutputFlags

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
    failure: AttnError | None = None  # raised once the result is written (attn check's disagreement, exit 3)


def is_terminal() -> bool:
    """Is stdout a person's terminal (tables) rather than a pipe or file (data)?"""
    return sys.stdout.isatty()


def stderr_is_terminal() -> bool:
    """Is a person watching stderr (notes meant for a person, not a script)?"""
    return sys.stderr.isatty()


def choose_format(fmt: Format | None) -> Format:
    if fmt is not None:
        return fmt
    return Format(TABLE) if is_terminal() else Format(DATA)


def emit(result: Result, flags: OutputFlags, title: str = "attn") -> None:
    """Save the pictures asked for, then write the result to stdout once, in
    the chosen format (a picture error thus stops the command before output).
    The command class calls this, once, with the command's output flags."""
    fmt, svg, html, png, pdf = flags.fmt, flags.svg, flags.html, flags.png, flags.pdf
    which = flags.emit or next(iter(result.matrices), "output")
    fmt = choose_format(fmt)
    table = fmt.value == TABLE
    if not table and not WRITERS[fmt.value].whole and which not in result.matrices:
        raise UsageError(f"--emit {which}: this command writes {' or '.join(result.matrices)}")
    pictures = [path for path in (svg, html, png, pdf) if path is not None]
    if png is not None or pdf is not None:
        from attncli.output.figures import require

        require("--png" if png is not None else "--pdf")  # before any file is written
    view = None
    if table or svg is not None or html is not None:
        from attncli.output.terminal import Escaped

        view = Escaped(result.view() if callable(result.view) else result.view)
    maps = (result.maps() if callable(result.maps) else result.maps) if pictures else None
    if png is not None or pdf is not None:
        from attncli.output.figures import save_figures

        if maps is None:
            raise UsageError("--png and --pdf draw attention weights, and this command has none")
        save_figures(maps, png, pdf, title)
    if svg is not None or html is not None:
        from attncli.output.pictures import PICTURE_WIDTH, save_pictures

        width = _terminal_width() if is_terminal() else columns() or PICTURE_WIDTH
        for remark in save_pictures(view, svg, html, title=title, width=width, maps=maps, write=_write_picture):
            sys.stderr.write(f"attn: note: {remark}\n")
    if table:
        console = _console()
        with writing_stdout():
            console.print(view)
            sys.stdout.flush()
        return
    writer = WRITERS[fmt.value]
    what = result.data if writer.whole else replace(result.matrices[which], name=which)
    if writer.binary and is_terminal():
        raise UsageError(
            f"refusing to write binary {writer.name.upper()} to a terminal", hint=f"redirect it: > out.{writer.name}"
        )
    stream = sys.stdout.buffer if writer.binary else sys.stdout
    with writing_stdout():
        writer.write(cast(IO[Any], _Printable(stream)) if is_terminal() else stream, what)
        stream.flush()


STDOUT_NAME = "<stdout>"


def _write_picture(name: str, text: str) -> None:
    """A picture to its file; to stdout itself when the name is stdout's file
    (``--svg /dev/stdout > out.txt``), so that it is neither renamed over the
    file stdout writes to nor written at the same place as the output."""
    from attncli.cli.paths import same_as
    from attncli.output.pictures import write_file

    if same_as(name, sys.stdout):
        with writing_stdout():
            sys.stdout.write(text)
            sys.stdout.flush()
    else:
        write_file(name, text)


@contextmanager
def writing_stdout() -> Iterator[None]:
    """Turn a failed write to stdout (a full disk, a closed descriptor, an
    encoding without '×') into one line, exit 1; a reader that went away
    (BrokenPipeError) is left to the CLI, which stops quietly with 141."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as e:
        silence_stdout()
        raise file_error(STDOUT_NAME, e, writing=True) from None
    except UnicodeEncodeError as e:
        silence_stdout()
        raise AttnError(
            f"cannot write {e.object[e.start : e.end]!r}: stdout's encoding is {e.encoding}",
            source=STDOUT_NAME,
            hint="set PYTHONIOENCODING=utf-8, or use a UTF-8 locale",
        ) from None


def silence_stdout() -> None:
    """Point stdout at /dev/null after it failed, so that Python's own flush
    at exit neither fails again nor prints a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (tests), or no stdout at all
        pass


class _Printable:
    """A text stream to a terminal that escapes control characters (a CSV
    label holding ESC), keeping the newlines and tabs that lay the data out."""

    def __init__(self, stream: IO[Any]) -> None:
        self.stream = stream

    def write(self, text: Any) -> Any:
        return self.stream.write(printable(text, keep="\n\t") if isinstance(text, str) else text)

    def flush(self) -> None:
        self.stream.flush()


MAX_COLUMNS = 10_000  # a wider COLUMNS is taken as this


def columns() -> int | None:
    """The width COLUMNS asks for, or None when it is unset, empty, 0 or not
    a number in ASCII digits (as Rich ignores such a value)."""
    raw = os.environ.get("COLUMNS", "").strip()
    if not (raw.isascii() and raw.isdigit()):
        return None
    return min(int(raw[:6]) if len(raw) <= 6 else MAX_COLUMNS, MAX_COLUMNS) or None


def _terminal_width() -> int:
    """COLUMNS, else the terminal's own width, else 80."""
    try:
        return columns() or os.get_terminal_size(sys.stdout.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def _console() -> Any:
    """A terminal console; for an explicit ``--format table`` into a pipe, a
    plain one wide enough that nothing wraps or is cut, unless FORCE_COLOR asks
    for colours there (``FORCE_COLOR=1 attn … -f table | less -R``, as Rich
    documents: then as wide as the terminal that stdin or stderr is). A reader
    that goes away mid-table is a BrokenPipeError for the CLI (exit 141), not
    Rich's exit 1."""
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    if is_terminal():
        return StdoutConsole(file=sys.stdout, highlight=False, force_terminal=True, width=_terminal_width())
    if os.environ.get("FORCE_COLOR"):
        return StdoutConsole(file=sys.stdout, highlight=False, force_terminal=True)
    return StdoutConsole(file=sys.stdout, width=columns() or 1000, highlight=False, color_system=None)
