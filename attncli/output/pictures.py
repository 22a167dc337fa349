"""Pictures of a terminal view: SVG and HTML files, written whole or not at all."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import Any

from attncli.errors import AttnError, file_error

PICTURE_WIDTH = 100  # columns of a picture when no terminal says otherwise


def save_pictures(view: Any, svg: str | None = None, html: str | None = None, *,
                  title: str = "attn", width: int = PICTURE_WIDTH,
                  write: Callable[[str, str], None] | None = None) -> None:
    """Write the terminal view to ``--svg``/``--html`` files, before stdout gets
    its output, so that a picture error stops the command with nothing printed.

    The picture is as wide as the view needs, at most ``width`` columns (the
    CLI passes the terminal's width, ``COLUMNS``, else 100), and keeps its
    colours even under NO_COLOR: it is a file to share, not terminal output.
    ``write(name, text)`` saves each picture (default ``write_file``).
    """
    if svg is None and html is None:
        return
    import io
    from html import escape as html_escape

    from rich.console import Console

    console = Console(file=io.StringIO(), record=True, width=width, force_terminal=True,
                      color_system="truecolor", no_color=False, highlight=False)
    console.width = min(max(console.measure(view).maximum, 20), width)  # no empty margin on the right
    console.print(view)
    write = write or write_file
    if svg is not None:
        write(svg, console.export_svg(title=title, clear=False))
    if html is not None:
        page = console.export_html(clear=False)
        write(html, page.replace("<head>", f"<head>\n<title>{html_escape(title)}</title>", 1))


def write_file(name: str, text: str) -> None:
    """Write a picture to ``name``: a regular file (or a new one) whole or not
    at all (``write_atomically``); anything else that exists (a device such
    as /dev/null, a FIFO) directly, as it is, never renamed over; a
    directory is refused."""
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:  # a new file (or a symlink to one)
        mode = stat.S_IFREG
    except OSError as e:
        raise file_error(name, e, writing=True) from None
    if stat.S_ISDIR(mode):
        raise file_error(name, IsADirectoryError())
    if stat.S_ISREG(mode):
        write_atomically(name, text)
    else:
        write_directly(name, text)


FIFO_WAIT = 5.0  # seconds a FIFO may take to get a reader (one started alongside attn, as `cat f &`)


def write_directly(name: str, text: str) -> None:
    """Write to a device or FIFO that exists. A FIFO waits FIFO_WAIT seconds
    for a reader, then is an error (opening it blocking would wait for ever)."""
    import time

    deadline = time.monotonic() + FIFO_WAIT
    while True:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise file_error(name, e, writing=True) from None
            if time.monotonic() > deadline:
                raise AttnError(f"cannot write: no program read from this pipe within {FIFO_WAIT:g} s",
                                source=name, hint="start the reader first") from None
            time.sleep(0.05)
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise file_error(name, e, writing=True) from None


def write_atomically(name: str, text: str) -> None:
    """Write a file whole or not at all: a temporary file in the same directory,
    renamed over the target, so an interrupted run leaves no half-written file.
    A symlink stays a symlink: the file it points to is the one replaced."""
    import tempfile

    if os.path.isdir(name):
        raise file_error(name, IsADirectoryError())
    target = os.path.realpath(name)
    directory = os.path.dirname(target)
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    except OSError as e:
        raise file_error(name, e, writing=True) from None
    TEMPORARY.add(temporary)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException as e:
        os.unlink(temporary)
        if isinstance(e, OSError):
            raise file_error(name, e, writing=True) from None
        raise
    finally:
        TEMPORARY.discard(temporary)


TEMPORARY: set[str] = set()  # temporary files being written, for remove_temporaries


def remove_temporaries() -> None:
    """Remove the temporary files of writes still under way (the CLI calls this
    when Ctrl-C stops a command inside a long write)."""
    for temporary in list(TEMPORARY):
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _umask() -> int:
    """The process umask (mkstemp makes files 0600; a picture should get the usual mode)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


