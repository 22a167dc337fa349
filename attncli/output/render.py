"""Rich renderables for the terminal: heatmaps, number tables, header lines.

Functions return renderables and never print; the command prints once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from attncli.output import terminal
from attncli.output.summary import first_lines, shown_part
from attncli.text import printable

Label = Union[str, Text, "IfColour"]  # a row or column name, perhaps with a colour swatch

# Viridis, sampled at ten even steps: perceptually even, readable in grey.
VIRIDIS = [
    (68, 1, 84), (72, 40, 120), (62, 74, 137), (49, 104, 142), (38, 130, 142),
    (31, 158, 137), (53, 183, 121), (109, 205, 89), (180, 222, 44), (253, 231, 37),
]


def colour(x: float) -> tuple[int, int, int]:
    """The viridis colour at x in [0, 1]."""
    x = min(max(x, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(x), len(VIRIDIS) - 2)
    t = x - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    return tuple(round(a[c] + (b[c] - a[c]) * t) for c in range(3))  # type: ignore[return-value]


def background(x: float) -> str:
    r, g, b = colour(x)
    return f"on rgb({r},{g},{b})"


def cell_style(x: float) -> str:
    """Background from the scale, with black or white text, whichever reads better."""
    r, g, b = colour(x)
    ink = "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 120 else "white"
    return f"{ink} {background(x)}"


def fmt(x: float, precision: int) -> str:
    """Fixed point, or scientific when fixed would hide the number."""
    if x != 0 and (abs(x) < 0.5 * 10.0**-precision or abs(x) >= 1e7):
        return f"{x:.{precision}e}"
    return f"{x:.{precision}f}"


def short(x: float, precision: int = 3) -> str:
    """A number as a person writes it: rounded to ``precision`` decimals, no
    trailing zeros (1, 0.5, 0.522), or scientific when that would hide it."""
    text = fmt(x, precision)
    if "e" in text or "." not in text:
        return text
    text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def heatmap(
    weights: Any,
    rows: Sequence[Label],
    cols: Sequence[Label],
    *,
    precision: int = 3,
    title: str | None = None,
    allowed: Any = None,
) -> RenderableType:
    """Weights [n_q, n_k] as a table whose cell backgrounds show the weight,
    with the colour scale below it (where colours show); pairs the mask
    forbids (``allowed`` False) show as a dim dash. Wraps into blocks of
    columns when the keys do not fit the width. A big matrix shows its first
    rows and columns (``summary.shown_part``)."""
    top = float(weights.max()) or 1.0
    part = shown_part(weights, rows, cols, allowed)
    weights, rows, cols, allowed = part.values, part.rows, part.cols, part.allowed
    body = [
        (label, [
            Text(f" {fmt(w, precision)} ", style=cell_style(w / top))
            if allowed is None or allowed[i][j] else Text("– ", style="dim")
            for j, w in enumerate(row)
        ])
        for i, (label, row) in enumerate(zip(rows, weights.tolist(), strict=True))
    ]
    return _titled(title, Group(ColumnBlocks(cols, body), ColourOnly(legend(top, precision)),
                                *([part.note] if part.note else [])))


def legend(top: float, precision: int = 3) -> Text:
    """A colour bar from 0 to the largest weight, the scale of ``heatmap``."""
    text = Text("0 ")
    for i in range(20):
        text.append(" ", style=background(i / 19))
    text.append(f" {fmt(top, precision)}")
    return text


def number_table(
    values: Any,
    rows: Sequence[Label],
    cols: Sequence[Label],
    *,
    precision: int = 3,
    title: str | None = None,
) -> RenderableType:
    """A plain matrix of numbers, right-aligned, labelled on both axes; wraps
    into blocks of columns when it is wider than the terminal. A big matrix
    shows its first rows and columns (``summary.shown_part``)."""
    part = shown_part(values, rows, cols)
    body = [(label, [fmt(x, precision) for x in row])
            for label, row in zip(part.rows, part.values.tolist(), strict=True)]
    table = ColumnBlocks(part.cols, body)
    return _titled(title, Group(table, part.note) if part.note else table)


def _table(cols: Sequence[Label]) -> Table:
    """A borderless table: row labels down the left, right-aligned numbers."""
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("", style="bold", no_wrap=True)
    for name in cols:
        table.add_column(name, justify="right", no_wrap=True)
    return table


def _titled(title: str | None, body: RenderableType) -> RenderableType:
    """A title line above a table (a Table title would wrap to the table's width)."""
    return body if title is None else Group(Text(title, style="bold"), body)


def stack(*parts: RenderableType | None) -> Group:
    """Renderables one under another, with a blank line between them."""
    items: list[RenderableType] = []
    for part in parts:
        if part is not None:
            items.extend([part, Text("")])
    return Group(*items[:-1])


class ColumnBlocks:
    """A labelled matrix that fits the width it is given: when all the columns
    do not fit side by side, it prints them in blocks of about equal size, as
    many columns as fit, each block with the row labels again, rather than
    squeezing cells into "…".

    Widths come from the cells' text (label + Σ(column + 3) for the borderless
    table), so nothing is rendered twice.
    """

    def __init__(self, cols: Sequence[Label], body: Sequence[tuple[Label, Sequence[Label]]]) -> None:
        self.cols = [terminal.label(name) for name in cols]
        self.body = [(terminal.label(label), list(cells)) for label, cells in body]

    def widths(self, console: Console) -> tuple[int, list[int]]:
        """The label column's width and each column's, as this console shows them."""
        label = max([_width(label, console) for label, _ in self.body] + [0])
        return label, [max([_width(name, console)] + [_width(cells[j], console) for _, cells in self.body])
                       for j, name in enumerate(self.cols)]

    @staticmethod
    def blocks(label: int, widths: list[int], width: int) -> list[range]:
        """Runs of column indices that fit ``width`` (at least one column each):
        as few runs as the greedy fill needs, evened out when they still fit."""
        greedy: list[range] = []
        start, used = 0, label
        for j, w in enumerate(widths):
            if j > start and used + w + 3 > width:
                greedy.append(range(start, j))
                start, used = j, label
            used += w + 3
        greedy.append(range(start, len(widths)))
        n, size = len(widths), -(-len(widths) // len(greedy))
        even = [range(i, min(i + size, n)) for i in range(0, n, size)]
        fits = all(label + sum(widths[j] + 3 for j in run) <= width for run in even)
        return even if fits and len(even) == len(greedy) else greedy

    def table(self, columns: Iterable[int]) -> Table:
        columns = list(columns)
        table = _table([self.cols[j] for j in columns])
        for label, cells in self.body:
            table.add_row(label, *(cells[j] for j in columns))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        runs = self.blocks(*self.widths(console), options.max_width)
        if len(runs) == 1:
            yield self.table(runs[0])
            return
        for n, run in enumerate(runs):
            if n:
                yield Text("")
            which = f"s {run.start + 1}–{run.stop}" if len(run) > 1 else f" {run.start + 1}"
            yield Text(f"column{which} of {len(self.cols)}", style="dim")
            yield self.table(run)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        label, widths = self.widths(console)
        full = label + sum(w + 3 for w in widths)
        narrow = label + (max(widths) + 3 if widths else 0)
        return Measurement(min(narrow, full), full).clamp(max_width=options.max_width)


def _width(cell: Label, console: Console) -> int:
    """Cells a label or number takes on screen (the widest line of a multi-line header)."""
    if isinstance(cell, IfColour):
        cell = cell.choose(console)
    text = cell if isinstance(cell, Text) else Text(str(cell))
    return max((line.cell_len for line in text.split()), default=0)


class IfColour:
    """One of two texts, chosen by the console it is printed on: ``coloured``
    where colours show, ``plain`` under NO_COLOR or into a pipe, so a swatch
    never leaves a blank gap where there is no colour to see."""

    def __init__(self, coloured: Text, plain: Label) -> None:
        self.coloured, self.plain = coloured, plain

    def choose(self, console: Console) -> Label:
        return self.coloured if ColourOnly.shown(console) else self.plain

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.choose(console)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.choose(console))


class ColourOnly:
    """A renderable shown only where colours show: a colour scale means
    nothing under NO_COLOR or in a pipe, so it takes no line there."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    @staticmethod
    def shown(console: Console) -> bool:
        return console.color_system is not None and not console.no_color

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.shown(console):
            yield self.renderable

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        if self.shown(console):
            return Measurement.get(console, options, self.renderable)
        return Measurement(0, 0)


def swatch(rgb: tuple[int, int, int], width: int = 2) -> Text:
    """A block of the colour itself."""
    r, g, b = rgb
    # a full block in the colour on the colour: a table strips trailing blanks, so spaces alone
    # would vanish from a header's swatch line
    return Text("█" * width, style=f"rgb({r},{g},{b}) on rgb({r},{g},{b})")


def swatched(labels: Sequence[str], colours: Sequence[tuple[int, int, int]] | None) -> list[Label]:
    """Row labels with a swatch beside each, when the rows are colours."""
    if colours is None:
        return list(labels)
    return [IfColour(Text.assemble(swatch(rgb), " ", printable(label)), terminal.label(label))
            for label, rgb in zip(labels, colours, strict=True)]


def swatched_headers(labels: Sequence[str], colours: Sequence[tuple[int, int, int]] | None) -> list[Label]:
    """Column headers with a swatch under each (as wide as the name), when the columns are colours."""
    if colours is None:
        return list(labels)
    shown = [printable(label) for label in labels]
    return [IfColour(Text.assemble(name, "\n", swatch(rgb, max(len(name), 2))), terminal.label(label))
            for name, label, rgb in zip(shown, labels, colours, strict=True)]


def bar(x: float, width: int = 20) -> Text:
    """A horizontal bar of x in [0, 1], in eighths of a character."""
    eighths = round(min(max(x, 0.0), 1.0) * width * 8)
    return Text("█" * (eighths // 8) + " ▏▎▍▌▋▊▉"[eighths % 8].strip(), style=background(x).replace("on ", ""))


def lookup_table(
    query: str,
    keys: Sequence[str],
    scores: Any,
    weights: Any,
    values: Any = None,
    output: Any = None,
    *,
    precision: int = 3,
) -> RenderableType:
    """One query against its keys: similarity, weight (with a bar) and value per key,
    then the weighted sum of the values."""
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("weight", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    columns = [] if values is None else (values.col_labels or [f"d{j}" for j in range(values.shape[1])])
    for name in columns:
        table.add_column(terminal.label(name), justify="right", no_wrap=True)
    shown, rest = first_lines(len(keys))
    for i in shown:
        key = keys[i]
        cells = [fmt(float(x), precision) for x in values.values[i]] if values is not None else []
        table.add_row(terminal.label(key), fmt(float(scores[i]), precision), f"{weights[i]:.{precision}f}",
                      bar(float(weights[i])), *cells)
    title = Text.assemble(("query ", "bold"), (printable(query), "bold cyan"))
    parts: list[RenderableType] = [title, table, *([rest] if rest else [])]
    if output is not None:
        sums = [fmt(float(x), precision) for x in output]
        named = [f"{printable(name)} {x}" for name, x in zip(columns, sums, strict=True)]
        total = sums[0] if len(sums) == 1 else ", ".join(named)
        parts.append(Text.assemble(("weighted sum: ", "bold"), total))
    return Group(*parts)
