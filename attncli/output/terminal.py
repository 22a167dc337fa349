"""Text from files on a terminal: labels, words and file names are shown as
plain text (never read as Rich markup) with their control characters escaped
(``attncli.text.printable``), so that a label holding an ESC sequence or
``[/bold]`` can neither drive the terminal nor break the view.

``label`` is applied where labels enter the views (``output/render.py``);
``Escaped`` wraps a whole view once more before it is printed or saved, so
that text which reached a view some other way is escaped as well.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from attncli.text import CONTROL, clip, printable

LABEL_WIDTH = 80  # characters of a label a table shows: a document used as a row label is cut


def label(name: Any) -> Any:
    """A row or column name ready for a table: a string becomes plain Text
    (no markup) with controls escaped, cut at LABEL_WIDTH; Rich objects
    built by attn pass."""
    return Text(clip(printable(name), LABEL_WIDTH)) if isinstance(name, str) else name


class Escaped:
    """A view whose every line of text has its control characters escaped;
    the terminal's own codes (colours, cursor) are Rich's control segments and
    styles, which pass untouched."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            text = segment.text
            if segment.control or not CONTROL.search(text):
                yield segment
            else:
                yield Segment(printable(text, keep="\n"), segment.style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)
