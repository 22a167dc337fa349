"""The compact heatmap: one terminal cell per weight, two queries per line
(the upper and lower halves of a block, ▀, in two colours), so 300 keys × 50
queries fit one screen; and the grid of small heatmaps, layers × heads, that
gives a whole model at a glance (bertviz's model view).

Past the width, neighbouring keys share a cell that shows their largest weight
(a peak is never averaged away); past MAX_LINES lines, neighbouring queries do
the same. Without colour (NO_COLOR, a pipe, a 16-colour terminal) each cell is
a shade, ░▒▓█, one query per line. Signed values (gradients) are drawn on the
diverging scale (``palette``); a shared cell shows the value of largest |value|,
with its sign, and without colour each cell is a signed glyph, ≡=- +*#.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from attncli.output.labels import abbreviate
from attncli.output.palette import depth, heat_colour, shade

MAX_LINES = 50  # lines of cells a compact heatmap may take before queries share them
MAX_LABEL = 16  # characters of a row label, at most
THUMBNAIL = 24  # cells across (and rows down) of one small heatmap in the grid, at most
MIN_THUMBNAIL = 6  # cells across below which the grid wraps its heads onto more rows
KEY_LEGEND = 60  # keys named under the heatmap, at most (each key with its own cell)


def pool(values: Any, group: int, axis: int, signed: bool = False) -> Any:
    """The largest value of each run of ``group`` along ``axis`` (``signed``: the
    value of largest |value|, its sign kept; NaN, a forbidden pair, only when the
    whole run is NaN): [..., n, ...] -> [..., ⌈n/group⌉, ...]."""
    import numpy as np

    if group <= 1:
        return values
    values = np.moveaxis(values, axis, -1)
    n = values.shape[-1]
    padded = np.full((*values.shape[:-1], math.ceil(n / group) * group), np.nan)
    padded[..., :n] = values
    runs = padded.reshape(*values.shape[:-1], -1, group)  # [..., ⌈n/group⌉, group]
    if signed:
        size = np.where(np.isnan(runs), -1.0, np.abs(runs))  # a NaN is chosen only when all are
        pooled = np.take_along_axis(runs, np.argmax(size, axis=-1)[..., None], axis=-1)[..., 0]
    else:
        pooled = np.fmax.reduce(runs, axis=-1)
    return np.moveaxis(pooled, -1, axis)


def scaled(weights: Any, allowed: Any, top: float) -> Any:
    """Weights divided by the top of the scale, forbidden pairs NaN (float64)."""
    import numpy as np

    x = np.asarray(weights, dtype=np.float64) / top
    return x if allowed is None else np.where(allowed, x, np.nan)


class Cells:
    """Draws rows of scaled weights (NaN = forbidden) as lines of cells, for one
    console; ``signed``: values in [−1, 1] on the diverging scale."""

    def __init__(self, console, signed: bool = False) -> None:
        self.colours, self.signed = depth(console), signed
        self.halves = self.colours is not None
        self._styles: dict[tuple[float, float], Any] = {}

    def style(self, upper: float, lower: float):
        """Foreground = the upper half's colour, background = the lower half's (NaN: none)."""
        from rich.style import Style

        key = (upper, lower)
        style = self._styles.get(key)
        if style is None:
            assert self.colours is not None
            fg = None if upper != upper else heat_colour(upper, self.colours, self.signed)
            bg = None if lower != lower else heat_colour(lower, self.colours, self.signed)
            style = self._styles[key] = Style(color=fg, bgcolor=bg)
        return style

    def line(self, upper: Any, lower: Any | None, width: int = 1):
        """One line of cells: two rows in half blocks, or one row in shades."""
        from rich.text import Text

        text = Text()
        if not self.halves:
            for x in upper.tolist():
                text.append(("·" if x != x else shade(x, self.signed)) * width)
            return text
        lows = [math.nan] * len(upper) if lower is None else lower.tolist()
        for a, b in zip(upper.tolist(), lows, strict=True):
            if a != a and b != b:
                text.append(" " * width)
            elif a != a:
                text.append("▄" * width, style=self.style(b, math.nan))
            else:
                text.append("▀" * width, style=self.style(a, b))
        return text

    def lines(self, x: Any, width: int = 1) -> list:
        """Every line of a [rows, cells] matrix."""
        step = 2 if self.halves else 1
        return [
            self.line(x[i], x[i + 1] if self.halves and i + 1 < len(x) else None, width) for i in range(0, len(x), step)
        ]


class CompactHeatmap:
    """Weights [n_q, n_k] as a compact heatmap with row labels, a key index
    along the top (and the keys' names below when few enough), and a legend.
    ``x`` is the weights divided by the top of the scale, NaN where forbidden;
    ``signed``: values divided by their largest |value|, in [−1, 1]; ``axes``
    names what runs across and down."""

    def __init__(
        self,
        x: Any,
        rows: Sequence[str],
        cols: Sequence[str],
        *,
        named_keys: bool = True,
        signed: bool = False,
        axes: tuple[str, str] = ("keys", "queries"),
    ) -> None:
        self.x, self.rows, self.cols, self.named_keys = x, [str(r) for r in rows], [str(c) for c in cols], named_keys
        self.signed, self.axes = signed, axes

    def layout(self, console, width: int):
        """(cells, rows pooled, keys per cell, queries per row, label width, cell width)."""
        cells = Cells(console, self.signed)
        n_q, n_k = self.x.shape
        per_line = 2 if cells.halves else 1
        row_group = math.ceil(n_q / (MAX_LINES * per_line))
        label = min(max(len(r) for r in self.row_labels(row_group)), MAX_LABEL, max(4, width // 5))
        room = max(width - (2 * label + 2 if cells.halves else label + 1), 1)
        key_group = math.ceil(n_k / room)
        cell_width = 1 if key_group > 1 else max(1, min(3, room // n_k))
        return cells, row_group, key_group, label, cell_width

    def row_labels(self, row_group: int) -> list[str]:
        if row_group == 1:
            return self.rows
        n = len(self.rows)
        return [f"{i}–{min(i + row_group, n) - 1}" for i in range(0, n, row_group)]

    def __rich_console__(self, console, options):
        from rich.text import Text

        width = options.max_width
        cells, row_group, key_group, label, cell_width = self.layout(console, width)
        x = pool(pool(self.x, row_group, 0, self.signed), key_group, 1, self.signed)
        labels = abbreviate(self.row_labels(row_group), label)
        n_q, n_k = self.x.shape
        yield Text(self.describe(cells.halves, row_group, key_group, n_q, n_k), style="dim")
        yield Text(" " * (label + 1) + ruler(x.shape[1], key_group, cell_width))
        for i, line in enumerate(cells.lines(x, cell_width)):
            if cells.halves:
                upper = labels[2 * i]
                lower = labels[2 * i + 1] if 2 * i + 1 < len(labels) else ""
                yield Text.assemble(upper.rjust(label), " ", line, " ", lower)
            else:
                yield Text.assemble(labels[i].rjust(label), " ", line)
        if key_group == 1 and self.named_keys and n_k <= KEY_LEGEND:
            names = abbreviate(self.cols, MAX_LABEL)
            yield Text(f"{self.axes[0]}: " + " · ".join(f"{j} {name}" for j, name in enumerate(names)), style="dim")

    def describe(self, halves: bool, row_group: int, key_group: int, n_q: int, n_k: int) -> str:
        """What a cell is: which keys and queries it holds."""
        across, down = self.axes
        largest = "the largest |value|, its sign kept" if self.signed else "their largest weight"
        keys = f"{n_k} {across} across" + (f", {key_group} to a cell ({largest})" if key_group > 1 else "")
        queries = f"{n_q} {down} down" + (f", {row_group} to a row ({largest})" if row_group > 1 else "")
        if halves:
            queries += ", two rows a line (▀ the row named on the left, ▄ the one on the right)"
        return f"{keys} · {queries}"

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        return Measurement(min(20, options.max_width), options.max_width)


def ruler(cells: int, key_group: int, cell_width: int) -> str:
    """Key numbers above the cells, as many as fit without touching."""
    digits = len(str((cells - 1) * key_group))
    step = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10**9) if s * cell_width >= digits + 1)
    line = ""
    for c in range(0, cells, step):
        start = c * cell_width
        number = str(c * key_group)
        if start + len(number) <= cells * cell_width:
            line = line.ljust(start) + number
    return line


class HeatmapGrid:
    """Small compact heatmaps in a grid, a row per layer and a column per head
    (bertviz's model view). Each is as wide as lets every head of a layer sit
    side by side, at most THUMBNAIL cells; neighbouring tokens share a cell
    (their largest weight) past that. Below MIN_THUMBNAIL cells the heads wrap
    onto more rows instead. ``x`` is [layers, heads, n_q, n_k], scaled, NaN where forbidden."""

    def __init__(self, x: Any, layers: Sequence[str], heads: Sequence[str]) -> None:
        self.x, self.layers, self.heads = x, list(layers), list(heads)

    def layout(self, width: int) -> tuple[int, int, int, int]:
        """(label width, heads per row, keys per cell, queries per cell row)."""
        n_q, n_k = self.x.shape[-2:]
        label = max(len(layer) for layer in self.layers) + 1
        caption = max(len(h) for h in self.heads)
        fit = (width - label) // len(self.heads) - 1
        cells = min(n_k, THUMBNAIL, max(fit, MIN_THUMBNAIL))
        cells = max(cells, min(caption, n_k))
        per_row = len(self.heads) if fit >= cells else max(1, (width - label) // (cells + 1))
        key_group = math.ceil(n_k / cells)
        return label, per_row, key_group, math.ceil(n_q / max(cells, 1))

    def __rich_console__(self, console, options):
        from rich.text import Text

        cells = Cells(console)
        label, per_row, key_group, row_group = self.layout(options.max_width)
        x = pool(pool(self.x, row_group, 2), key_group, 3)
        thumb = x.shape[3]
        if key_group > 1 or row_group > 1:
            yield Text(
                f"a cell holds {row_group} queries × {key_group} keys (their largest weight); "
                "--layer L --head H shows one head in full",
                style="dim",
            )
        for start in range(0, len(self.heads), per_row):
            shown = range(start, min(start + per_row, len(self.heads)))
            yield Text(" " * label + " ".join(self.heads[b][:thumb].ljust(thumb) for b in shown), style="dim")
            for a, layer in enumerate(self.layers):
                thumbs = [cells.lines(x[a, b]) for b in shown]
                for i in range(len(thumbs[0])):
                    line = Text((layer if i == 0 else "").ljust(label), style="bold")
                    for n, lines in enumerate(thumbs):
                        line.append_text(lines[i])
                        line.append(" " if n < len(thumbs) - 1 else "")
                    yield line
                if a < len(self.layers) - 1:
                    yield Text("")

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        label, per_row, key_group, _ = self.layout(options.max_width)
        thumb = math.ceil(self.x.shape[-1] / key_group)
        return Measurement(min(label + thumb, options.max_width), min(label + per_row * (thumb + 1), options.max_width))
