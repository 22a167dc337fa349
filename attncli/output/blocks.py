"""How numbers and labelled matrices are laid out on a terminal: numbers
written as tables show them (``fmt``, ``short``), ``ColumnBlocks`` (a labelled
matrix in blocks of columns that fit the width), and labels chosen by whether
colours show (``IfColour``, ``ColourOnly``). The views (heatmaps, top keys,
number tables) are built on these."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Union

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from attncli.output import terminal

if TYPE_CHECKING:
    from attncli.output.palette import HeatCell

Label = Union[str, Text, "IfColour", "HeatCell"]  # a row or column name (perhaps with a swatch), or a cell


def fmt(x: float, precision: int) -> str:
    """Fixed point, or scientific when fixed would hide the number."""
    if x != 0 and (abs(x) < 0.5 * 10.0**-precision or abs(x) >= 1e7):
        return f"{x:.{precision}e}"
    return f"{x:.{precision}f}"


def distinct(x: float, precision: int) -> str:
    """As ``fmt``, with more decimals where rounding would make a number that is not
    1 read as 1 (softmax's 0.99995 of seed 000 is not 1.0000): as many as it takes."""
    text = fmt(x, precision)
    digits = precision
    while x != 1 and float(text) == 1 and digits < 17:
        digits += 1
        text = f"{x:.{digits}f}"
    return text


def short(x: float, precision: int = 3) -> str:
    """A number as a person writes it: rounded to ``precision`` decimals, no
    trailing zeros (1, 0.5, 0.522), or scientific when that would hide it."""
    text = fmt(x, precision)
    if "e" in text or "." not in text:
        return text
    text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def plain_table(cols: Sequence[Label]) -> Table:
    """A borderless table: row labels down the left, right-aligned numbers."""
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("", style="bold", no_wrap=True)
    for name in cols:
        table.add_column(name, justify="right", no_wrap=True)
    return table


class ColumnBlocks:
    """A labelled matrix that fits the width it is given: when all the columns
    do not fit side by side, it prints them in blocks of about equal size, as
    many columns as fit, each block with the row labels again, rather than
    squeezing cells into "…". Long row labels, and column names much wider
    than their numbers, are shortened in the middle (labels that differ stay
    different) so that a label and a column always fit.

    Widths come from the cells' text (label + Σ(column + 3) for the borderless
    table), so nothing is rendered twice.
    """

    def __init__(self, cols: Sequence[Label], body: Sequence[tuple[Label, Sequence[Label]]]) -> None:
        self.cols = [terminal.label(name) for name in cols]
        self.body = [(terminal.label(label), list(cells)) for label, cells in body]

    def resolved(self, console: Console, width: int | None = None) -> ColumnBlocks:
        """The table as this console shows it (swatches and colours chosen), its
        labels shortened to fit ``width`` when given."""
        cols = [_chosen(c, console) for c in self.cols]
        body = [(_chosen(label, console), [_chosen(c, console) for c in cells]) for label, cells in self.body]
        table = ColumnBlocks(cols, body)
        if width is not None:
            table.fit_labels(console, width)
        return table

    def fit_labels(self, console: Console, width: int) -> None:
        """Shorten plain-text row labels to a third of the width (and so that one
        column still fits beside them), and, when the columns do not all fit in
        one block, plain-text column names to the width of their numbers."""
        from attncli.output.labels import abbreviate

        label, widths = self.widths(console)
        cells = [max([_width(cells[j], console) for _, cells in self.body] + [1]) for j in range(len(self.cols))]
        if len(widths) > 1 and label + sum(w + 3 for w in widths) > width:
            room = max(max(cells, default=1), 10)
            plain = [j for j, c in enumerate(self.cols) if _plain(c) is not None and len(str(_plain(c))) > room]
            for j, short in zip(plain, abbreviate([str(_plain(self.cols[j])) for j in plain], room), strict=True):
                self.cols[j] = Text(short)
            label, widths = self.widths(console)
        budget = max(4, min(max(8, width // 3), width - max(widths, default=0) - 4))
        if label > budget:
            plain = [i for i, (row, _) in enumerate(self.body) if _plain(row) is not None]
            shorts = abbreviate([str(_plain(self.body[i][0])) for i in plain], budget)
            for i, short in zip(plain, shorts, strict=True):
                self.body[i] = (Text(short), self.body[i][1])

    def widths(self, console: Console) -> tuple[int, list[int]]:
        """The label column's width and each column's, as this console shows them."""
        label = max([_width(label, console) for label, _ in self.body] + [0])
        return label, [
            max([_width(name, console)] + [_width(cells[j], console) for _, cells in self.body])
            for j, name in enumerate(self.cols)
        ]

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

    def count_blocks(self, console: Console, width: int) -> int:
        """How many blocks the table takes at ``width``."""
        table = self.resolved(console, width)
        return len(self.blocks(*table.widths(console), width))

    def table(self, columns: Iterable[int]) -> Table:
        columns = list(columns)
        table = plain_table([self.cols[j] for j in columns])
        for label, cells in self.body:
            table.add_row(label, *(cells[j] for j in columns))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.resolved(console, options.max_width)
        runs = self.blocks(*table.widths(console), options.max_width)
        if len(runs) == 1:
            yield table.table(runs[0])
            return
        for n, run in enumerate(runs):
            if n:
                yield Text("")
            which = f"s {run.start + 1}–{run.stop}" if len(run) > 1 else f" {run.start + 1}"
            yield Text(f"column{which} of {len(self.cols)}", style="dim")
            yield table.table(run)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        label, widths = self.resolved(console).widths(console)
        full = label + sum(w + 3 for w in widths)
        narrow = label + (max(widths) + 3 if widths else 0)
        return Measurement(min(narrow, full), full).clamp(max_width=options.max_width)


def _chosen(cell: Label, console: Console) -> Label:
    """A cell as this console shows it: swatched or plain, coloured or not."""
    choose = getattr(cell, "choose", None)
    return choose(console) if choose is not None else cell


def _plain(label: Any) -> str | None:
    """The text of a plain label (a string, or Text without styles), which may be
    shortened; None for a label with a swatch or styles."""
    if isinstance(label, str):
        return label
    if isinstance(label, Text) and not label.spans and not label.style:
        return label.plain
    return None


def _width(cell: Label, console: Console) -> int:
    """Cells a label or number takes on screen (the widest line of a multi-line header)."""
    cell = _chosen(cell, console)
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
