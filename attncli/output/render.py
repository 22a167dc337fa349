"""Rich renderables for the terminal: heatmaps, number tables, header lines.

Functions return renderables and never print; the command prints once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.output import terminal
from attncli.output.blocks import ColumnBlocks, IfColour, Label, fmt
from attncli.output.labels import value_columns
from attncli.output.summary import first_lines, shown_part
from attncli.text import printable

if TYPE_CHECKING:
    from attncli.output.heatmap import ViewStyle


def heatmap(
    weights: Any,
    rows: Sequence[Label],
    cols: Sequence[Label],
    *,
    precision: int = 3,
    title: str | None = None,
    allowed: Any = None,
    style: ViewStyle | None = None,
) -> RenderableType:
    """Weights [n_q, n_k] as a heatmap, in the view ``style`` asks for (see
    ``attncli.output.heatmap``): numbers on their colours, wrapped into blocks
    of columns, when they fit, else the compact view; or the top keys of each
    query. Pairs the mask forbids (``allowed`` False) show as a dim dash."""
    from attncli.output.heatmap import Heatmap, ViewStyle

    return _titled(
        title, Heatmap(weights, rows, cols, precision=precision, allowed=allowed, style=style or ViewStyle())
    )


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
    body = [
        (label, [fmt(x, precision) for x in row]) for label, row in zip(part.rows, part.values.tolist(), strict=True)
    ]
    table = ColumnBlocks(part.cols, body)
    return _titled(title, Group(table, part.note) if part.note else table)


def vector_lines(vectors: Sequence[str], rows: Sequence[Label], *, title: str | None = None) -> RenderableType:
    """Rows too wide for a table, one a line: the label, then the row as written
    (its first numbers); the first ``SHOWN_ROWS`` of them, and a line for the rest."""
    shown, more = first_lines(len(vectors))
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column()
    for i in shown:
        table.add_row(terminal.label(rows[i]), vectors[i])
    return _titled(title, Group(table, more) if more is not None else table)


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
    return [
        IfColour(Text.assemble(swatch(rgb), " ", printable(label)), terminal.label(label))
        for label, rgb in zip(labels, colours, strict=True)
    ]


def swatched_headers(labels: Sequence[str], colours: Sequence[tuple[int, int, int]] | None) -> list[Label]:
    """Column headers with a swatch under each (as wide as the name), when the columns are colours."""
    if colours is None:
        return list(labels)
    shown = [printable(label) for label in labels]
    return [
        IfColour(Text.assemble(name, "\n", swatch(rgb, max(len(name), 2))), terminal.label(label))
        for name, label, rgb in zip(shown, labels, colours, strict=True)
    ]


def bar(x: float, width: int = 20) -> Text:
    """A horizontal bar of x in [0, 1], in eighths of a character."""
    eighths = round(min(max(x, 0.0), 1.0) * width * 8)
    from attncli.output.palette import colour

    r, g, b = colour(x)
    return Text("█" * (eighths // 8) + " ▏▎▍▌▋▊▉"[eighths % 8].strip(), style=f"rgb({r},{g},{b})")


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
    columns = [] if values is None else (values.col_labels or value_columns(values.shape[1]))
    for name in columns:
        table.add_column(terminal.label(name), justify="right", no_wrap=True)
    shown, rest = first_lines(len(keys))
    for i in shown:
        key = keys[i]
        cells = [fmt(float(x), precision) for x in values.values[i]] if values is not None else []
        table.add_row(
            terminal.label(key),
            fmt(float(scores[i]), precision),
            f"{weights[i]:.{precision}f}",
            bar(float(weights[i])),
            *cells,
        )
    title = Text.assemble(("query ", "bold"), (printable(query), "bold cyan"))
    parts: list[RenderableType] = [title, table, *([rest] if rest else [])]
    if output is not None:
        sums = [fmt(float(x), precision) for x in output]
        named = [f"{printable(name)} {x}" for name, x in zip(columns, sums, strict=True)]
        total = sums[0] if len(sums) == 1 else ", ".join(named)
        parts.append(Text.assemble(("weighted sum: ", "bold"), total))
    return Group(*parts)
