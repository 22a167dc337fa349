"""Colours of a value: the viridis scale for weights (0 to 1), the diverging
scale for signed values such as gradients (blue below 0, neutral at 0, red
above, symmetric), the ink that reads on them, and what each kind of
terminal can show (24-bit colour, 256 colours, or no colour).

Only Rich's colour types here; the views pick a colour per cell through
``heat`` and ``shade`` when they know the console they are printed on. A
position on a scale is x in [0, 1], or with ``signed`` x in [−1, 1] (the
value divided by the largest |value|, so ±1 are the two ends and 0 is neutral).
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
    (68, 1, 84),
    (72, 40, 120),
    (62, 74, 137),
    (49, 104, 142),
    (38, 130, 142),
    (31, 158, 137),
    (53, 183, 121),
    (109, 205, 89),
    (180, 222, 44),
    (253, 231, 37),
]

# Viridis in the xterm 256-colour cube, chosen by hand: Rich's nearest colour
# maps 0.2-0.4 onto the same greyish slate (60), so low weights all looked alike.
# Purple -> blue -> teal -> green -> yellow, no greys, each step distinct.
VIRIDIS_256 = [53, 54, 55, 25, 31, 30, 36, 35, 78, 113, 148, 184, 220]

# Under NO_COLOR (or a terminal with 8/16 colours): a shade per fifth of the scale.
SHADES = " ░▒▓█"

# The diverging scale of signed values, ColorBrewer's RdBu sampled at eleven even
# steps from −1 to +1: dark blue, light blue, near-white at 0, light red, dark red.
# Each side's luminance falls alike, so |x| reads the same on either side.
DIVERGING: list[RGB] = [
    (5, 48, 97),
    (33, 102, 172),
    (67, 147, 195),
    (146, 197, 222),
    (209, 229, 240),
    (247, 247, 247),
    (253, 219, 199),
    (244, 165, 130),
    (214, 96, 77),
    (178, 24, 43),
    (103, 0, 31),
]
# The same in the xterm 256-colour cube: blues, white (231) at 0, reds, of like luminance pairwise.
DIVERGING_256 = [18, 25, 67, 110, 153, 231, 224, 210, 167, 124, 88]

# Signed values without colour: a glyph per seventh of [−1, 1]; more bars the
# more negative, heavier marks the more positive, blank near 0.
SIGNED_SHADES = "≡=- +*#"

BLACK: RGB = (0, 0, 0)
WHITE: RGB = (255, 255, 255)


def colour(x: float, signed: bool = False) -> RGB:
    """The viridis colour at x in [0, 1]; with ``signed`` the diverging colour at x in [−1, 1]."""
    stops = DIVERGING if signed else VIRIDIS
    x = unit(x, signed) * (len(stops) - 1)
    i = min(int(x), len(stops) - 2)
    t = x - i
    a, b = stops[i], stops[i + 1]
    return tuple(round(a[c] + (b[c] - a[c]) * t) for c in range(3))  # type: ignore[return-value]


def unit(x: float, signed: bool = False) -> float:
    """Where x sits along its scale, from 0 (the bottom, or −1) to 1 (the top, +1); clipped."""
    return (min(max(x, -1.0), 1.0) + 1.0) / 2.0 if signed else min(max(x, 0.0), 1.0)


def xterm_entry(x: float, signed: bool = False) -> int:
    """The xterm palette entry of x on the 256-colour ramp of its scale."""
    ramp = DIVERGING_256 if signed else VIRIDIS_256
    return ramp[round(unit(x, signed) * (len(ramp) - 1))]


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


def heat_colour(x: float, colours: str, signed: bool = False) -> Color:
    """The colour of x in [0, 1] (``signed``: [−1, 1]) on a console showing ``colours`` ("truecolor" or "256")."""
    from rich.color import Color

    if colours == "256":
        return Color.from_ansi(xterm_entry(x, signed))
    return Color.from_rgb(*colour(x, signed))


def heat_rgb(x: float, colours: str, signed: bool = False) -> RGB:
    """The RGB the console actually shows for x (the 256-colour entry, or the scale itself)."""
    if colours == "256":
        return xterm_rgb(xterm_entry(x, signed))
    return colour(x, signed)


def heat(x: float, colours: str, signed: bool = False) -> Style:
    """A cell showing x in [0, 1] (``signed``: [−1, 1]): the background from the
    scale, and black or white ink, whichever reads better on it, as explicit RGB
    (never the terminal theme's "black" or "white", which a dark theme makes grey).
    Styles are kept per thousandth of the scale (a big table has few distinct ones)."""
    return _heat(round(unit(x, signed) * 1000), colours, signed)


@functools.lru_cache(maxsize=4096)
def _heat(thousandths: int, colours: str, signed: bool) -> Style:
    from rich.color import Color
    from rich.style import Style

    x = thousandths / 1000 * 2 - 1 if signed else thousandths / 1000
    return Style(color=Color.from_rgb(*ink(heat_rgb(x, colours, signed))), bgcolor=heat_colour(x, colours, signed))


def shade(x: float, signed: bool = False) -> str:
    """The shade character of x in [0, 1] (``signed``: the glyph of x in [−1, 1]), for terminals without colour."""
    glyphs = SIGNED_SHADES if signed else SHADES
    return glyphs[min(int(unit(x, signed) * len(glyphs)), len(glyphs) - 1)]


class HeatCell:
    """A number on its value's colour, chosen for the console it is printed on
    (see ``heat``); plain under NO_COLOR. ``x`` is the place on the scale, in
    [0, 1] (``signed``: [−1, 1]), or None for a pair the mask forbids, shown as a dim dash."""

    def __init__(self, text: str, x: float | None, signed: bool = False) -> None:
        self.text, self.x, self.signed = text, x, signed

    def choose(self, console: Console):
        from rich.text import Text

        if self.x is None:
            return Text("– ", style="dim")
        colours = depth(console)
        return Text(f" {self.text} ", style=heat(self.x, colours, self.signed) if colours else "")

    def __rich_console__(self, console, options):
        yield self.choose(console)


class Legend:
    """The colour scale of a heatmap, from 0 to ``top``: twenty colour cells
    where colours show, the five shades under NO_COLOR when ``shades`` (the
    compact view draws with them), else nothing (a numbers table needs none).
    ``signed``: from −top through 0 to +top, twenty-one cells with 0 in the
    middle, the seven signed glyphs under NO_COLOR when ``shades``, else the
    range in words (the numbers carry their signs)."""

    def __init__(
        self, top: float, top_text: str, *, shades: bool = False, note: str = "", signed: bool = False
    ) -> None:
        self.top, self.top_text, self.shades, self.note, self.signed = top, top_text, shades, note, signed

    def text(self, console: Console):
        from rich.text import Text

        colours = depth(console)
        if colours is None and not self.shades and not self.signed:
            return None
        if self.signed:
            return self.signed_text(colours)
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

    def signed_text(self, colours: str | None):
        """−top ▕blues 0 reds▏ +top: the diverging scale, symmetric around 0."""
        from rich.text import Text

        text = Text(f"−{self.top_text} ▕")
        if colours is not None:
            for i in range(-10, 11):
                text.append("0" if i == 0 else " ", style=heat(i / 10, colours, signed=True))
            what = "blue below 0, red above"
        elif self.shades:
            text.append(SIGNED_SHADES)
            what = f"a glyph for each seventh: {SIGNED_SHADES[:3]} below 0, {SIGNED_SHADES[4:]} above, blank near 0"
        else:
            text = Text(f"−{self.top_text} … 0 … +{self.top_text}")
            what = "no colour: read the signs"
        if colours is not None or self.shades:
            text.append(f"▏ +{self.top_text}")
        text.append(f"  ({what})", style="dim")
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
