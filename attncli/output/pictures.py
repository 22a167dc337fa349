"""Pictures of a terminal view: SVG and HTML files, written whole or not at all."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnError, file_error

if TYPE_CHECKING:
    from attncli.output.maps import AttentionMaps

PICTURE_WIDTH = 100  # columns of a picture when no terminal says otherwise

# Rich's SVG template with the fonts on this machine: Rich's own links Fira Code
# from a CDN, which offline falls back and which a picture should not fetch.
LOCAL_FONTS = '"DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", "Courier New", monospace'
SVG_FORMAT = """\
<svg class="rich-terminal" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
    <style>
    .{unique_id}-matrix {{
        font-family: @FONTS@;
        font-size: {char_height}px;
        line-height: {line_height}px;
        font-variant-east-asian: full-width;
    }}
    .{unique_id}-title {{
        font-size: 18px;
        font-weight: bold;
        font-family: system-ui, "DejaVu Sans", Arial, sans-serif;
    }}
    {styles}
    </style>
    <defs>
    <clipPath id="{unique_id}-clip-terminal">
      <rect x="0" y="0" width="{terminal_width}" height="{terminal_height}" />
    </clipPath>
    {lines}
    </defs>
    {chrome}
    <g transform="translate({terminal_x}, {terminal_y})" clip-path="url(#{unique_id}-clip-terminal)">
    {backgrounds}
    <g class="{unique_id}-matrix">
    {matrix}
    </g>
    </g>
</svg>
""".replace("@FONTS@", LOCAL_FONTS)
HTML_TERMINAL = '<pre style="color:{foreground};background-color:{background}"><code>{code}</code></pre>'


def save_pictures(
    view: Any,
    svg: str | None = None,
    html: str | None = None,
    *,
    title: str = "attn",
    width: int = PICTURE_WIDTH,
    maps: AttentionMaps | None = None,
    write: Callable[[str, str], None] | None = None,
) -> list[str]:
    """Write the terminal view to ``--svg``/``--html`` files, before stdout gets
    its output, so that a picture error stops the command with nothing printed.

    The picture is as wide as the view needs, at most ``width`` columns (the
    CLI passes the terminal's width, ``COLUMNS``, else 100), and keeps its
    colours even under NO_COLOR: it is a file to share, not terminal output.

    With ``maps`` (attention between tokens), the HTML page is the head view
    (output/headview.py) with the terminal view below it, and the SVG starts
    with the head view of the heads shown when there are at most a few.
    ``write(name, text)`` saves each picture (default ``write_file``).
    Returns the remarks for the user (a head view left out, and why).
    """
    notes: list[str] = []
    if svg is None and html is None:
        return notes
    if maps is not None:
        from attncli.output.headview import MAX_WEIGHTS

        if maps.weights.size > MAX_WEIGHTS:
            notes.append(
                f"{maps.weights.size:,} weights are too many to draw a line each (at most "
                f"{MAX_WEIGHTS:,}): the picture shows the terminal view only; --png draws them all"
            )
            maps = None
    import io
    from html import escape as html_escape

    from rich.console import Console

    console = Console(
        file=io.StringIO(),
        record=True,
        width=width,
        force_terminal=True,
        color_system="truecolor",
        no_color=False,
        highlight=False,
    )
    console.width = min(max(console.measure(view).maximum, 20), width)  # no empty margin on the right
    console.print(view)
    write = write or write_file
    if svg is not None:
        terminal = console.export_svg(title=title, clear=False, code_format=SVG_FORMAT)
        write(svg, terminal if maps is None else with_head_view(terminal, maps, title))
    if html is not None:
        if maps is None:
            page = console.export_html(clear=False)
            page = page.replace("<head>", f"<head>\n<title>{html_escape(title)}</title>", 1)
            page = page.replace(
                "font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace",
                f"font-family:{LOCAL_FONTS.replace(chr(34), chr(39))}",
            )
        else:
            from attncli.output.headview import page as head_view_page

            terminal = console.export_html(clear=False, inline_styles=True, code_format=HTML_TERMINAL)
            page = head_view_page(maps, title, terminal)
        write(html, page)
    return notes


def write_file(name: str, text: str | bytes) -> None:
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


def write_directly(name: str, text: str | bytes) -> None:
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
                raise AttnError(
                    f"cannot write: no program read from this pipe within {FIFO_WAIT:g} s",
                    source=name,
                    hint="start the reader first",
                ) from None
            time.sleep(0.05)
    try:
        os.set_blocking(fd, True)
        data = text.encode("utf-8") if isinstance(text, str) else text
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as e:
        raise file_error(name, e, writing=True) from None


def with_head_view(terminal: str, maps: AttentionMaps, title: str) -> str:
    """One SVG: the head view of the heads shown (at most MAX_SVG_HEADS), then the terminal view."""
    import re

    from attncli.output.headview import MAX_SVG_HEADS, static_svg

    if maps.count > MAX_SVG_HEADS:
        return terminal
    drawing, width, height = static_svg(maps, maps.title or title)
    box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', terminal)
    if box is None:  # not Rich's picture as SVG_FORMAT makes it
        return terminal
    view_width, view_height = float(box.group(1)), float(box.group(2))
    margin = 16
    top = height + 2 * margin
    total_width, total_height = max(width + 2 * margin, view_width), top + view_height
    nested = terminal.replace(
        '<svg class="rich-terminal" ',
        f'<svg class="rich-terminal" x="0" y="{top:.1f}" width="{view_width:.1f}" height="{view_height:.1f}" ',
        1,
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_width:.1f}" height="{total_height:.1f}" '
        f'viewBox="0 0 {total_width:.1f} {total_height:.1f}">\n'
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n'
        f'<g transform="translate({margin},{margin})">{drawing}</g>\n{nested}</svg>\n'
    )


def write_atomically(name: str, text: str | bytes) -> None:
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
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as binary:
                binary.write(text)
        else:
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
