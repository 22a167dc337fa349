"""Pictures of a terminal view: SVG and HTML files, written whole or not at all."""

from __future__ import annotations

import os
from typing import Any

from attncli.errors import file_error

PICTURE_WIDTH = 100  # columns of a picture when no terminal says otherwise


def save_pictures(view: Any, svg: str | None = None, html: str | None = None, *,
                  title: str = "attn", width: int = PICTURE_WIDTH) -> None:
    """Write the terminal view to ``--svg``/``--html`` files, before stdout gets
    its output, so that a picture error stops the command with nothing printed.

    The picture is as wide as the view needs, at most ``width`` columns (the
    CLI passes the terminal's width, ``COLUMNS``, else 100), and keeps its
    colours even under NO_COLOR: it is a file to share, not terminal output.
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


