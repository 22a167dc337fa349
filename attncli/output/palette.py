"""Colours of a weight: the viridis scale, the ink that reads on it, and what
each kind of terminal can show (24-bit colour, 256 colours, or no colour).

Only Rich's colour types here; the views pick a colour per cell through
``heat`` and ``shade`` when they know the console they are printed on.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.color import Color
    from rich.console import Console
    from rich.style import Style

RGB = tuple[int, int, int]

# Viridis, sampled at ten even steps: perceptually even, readable in grey.
VIRIDIS: list[RGB] = [
    (68, 1, 84), (72, 40, 120), (62, 74, 137), (49, 104, 142), (38, 130, 142),
    (31, 158, 137), (53, 183, 121), (109, 205, 89), (180, 222, 44), (253, 231, 37),
]

# Viridis in the xterm 256-colour cube, chosen by hand: Rich's nearest colour
# maps 0.2-0.4 onto the same greyish slate (60), so low weights all looked alike.
# Purple -> blue -> teal -> green -> yellow, no greys, each step distinct.
VIRIDIS_256 = [53, 54, 55, 25, 31, 30, 36, 35, 78, 113, 148, 184, 220]

# Under NO_COLOR (or a terminal with 8/16 colours): a shade per fifth of the scale.
SHADES = " ░▒▓█"

BLACK: RGB = (0, 0, 0)
WHITE: RGB = (255, 255, 255)


def colour(x: float) -> RGB:
    """The viridis colour at x in [0, 1]."""
    x = min(max(x, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(x), len(VIRIDIS) - 2)
    t = x - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    return tuple(round(a[c] + (b[c] - a[c]) * t) for c in range(3))  # type: ignore[return-value]


def xterm_rgb(number: int) -> RGB:
    """The colour of xterm palette entry 16-231 (the 6×6×6 cube)."""
    levels = (0, 95, 135, 175, 215, 255)
    n = number - 16
    return levels[n // 36], levels[n // 6 % 6], levels[n % 6]


def luminance(rgb: RGB) -> float:
    """Relative luminance (WCAG 2), 0 for black to 1 for white."""
    def linear(c: int) -> float:
        c8 = c / 255
        return c8 / 12.92 if c8 <= 0.04045 else ((c8 + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ink(background: RGB) -> RGB:
    """Black or white, whichever contrasts more with the background (WCAG contrast ratio)."""
    light = luminance(background)
    return BLACK if (light + 0.05) / 0.05 >= 1.05 / (light + 0.05) else WHITE


def depth(console: Console) -> str | None:
    """What colours the console shows: "truecolor", "256", or None (no colour,
    NO_COLOR, or only 8/16 theme colours, whose look no one can predict)."""
    if console.no_color:
        return None
    return {"truecolor": "truecolor", "256": "256"}.get(console.color_system or "")


def heat_colour(x: float, colours: str) -> Color:
    """The colour of x in [0, 1] on a console showing ``colours`` ("truecolor" or "256")."""
    from rich.color import Color

    if colours == "256":
        return Color.from_ansi(VIRIDIS_256[round(min(max(x, 0.0), 1.0) * (len(VIRIDIS_256) - 1))])
    return Color.from_rgb(*colour(x))


def heat_rgb(x: float, colours: str) -> RGB:
    """The RGB the console actually shows for x (the 256-colour entry, or viridis itself)."""
    if colours == "256":
        return xterm_rgb(VIRIDIS_256[round(min(max(x, 0.0), 1.0) * (len(VIRIDIS_256) - 1))])
    return colour(x)


def heat(x: float, colours: str) -> Style:
    """A cell showing x in [0, 1]: the background from the scale, and black or
    white ink, whichever reads better on it, as explicit RGB (never the
    terminal theme's "black" or "white", which a dark theme makes grey).
    Styles are kept per thousandth of the scale (a big table has few distinct ones)."""
    return _heat(round(min(max(x, 0.0), 1.0) * 1000), colours)


@functools.lru_cache(maxsize=4096)
def _heat(thousandths: int, colours: str) -> Style:
    from rich.color import Color
    from rich.style import Style

    x = thousandths / 1000
    return Style(color=Color.from_rgb(*ink(heat_rgb(x, colours))), bgcolor=heat_colour(x, colours))


def shade(x: float) -> str:
    """The shade character of x in [0, 1], for terminals without colour."""
    return SHADES[min(int(min(max(x, 0.0), 1.0) * len(SHADES)), len(SHADES) - 1)]


class HeatCell:
    """A number on its weight's colour, chosen for the console it is printed on
    (see ``heat``); plain under NO_COLOR. ``x`` is None for a pair the mask
    forbids, shown as a dim dash."""

    def __init__(self, text: str, x: float | None) -> None:
        self.text, self.x = text, x

    def choose(self, console: Console):
        from rich.text import Text

        if self.x is None:
            return Text("– ", style="dim")
        colours = depth(console)
        return Text(f" {self.text} ", style=heat(self.x, colours) if colours else "")

    def __rich_console__(self, console, options):
        yield self.choose(console)


class Legend:
    """The colour scale of a heatmap, from 0 to ``top``: twenty colour cells
    where colours show, the five shades under NO_COLOR when ``shades`` (the
    compact view draws with them), else nothing (a numbers table needs none)."""

    def __init__(self, top: float, top_text: str, *, shades: bool = False, note: str = "") -> None:
        self.top, self.top_text, self.shades, self.note = top, top_text, shades, note

    def text(self, console: Console):
        from rich.text import Text

        colours = depth(console)
        if colours is None and not self.shades:
            return None
        text = Text("0 ▕")
        if colours is None:
            text.append(SHADES)
        else:
            from rich.style import Style

            for i in range(20):
                text.append(" ", style=Style(bgcolor=heat_colour(i / 19, colours)))
        text.append(f"▏ {self.top_text}")
        if colours is None:
            text.append("  (a shade for each fifth)", style="dim")
        if self.note:
            text.append(f"  {self.note}", style="dim")
        return text

    def __rich_console__(self, console, options):
        text = self.text(console)
        if text is not None:
            yield text

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        text = self.text(console)
        return Measurement(0, 0) if text is None else Measurement.get(console, options, text)
