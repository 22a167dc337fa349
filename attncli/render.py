"""Rich renderables for the terminal: heatmaps, number tables, header lines.

Functions return renderables and never print; the command prints once.
"""

from __future__ import annotations

from typing import Any, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

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


def default_labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def heatmap(
    weights: Any,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    precision: int = 3,
    title: str | None = None,
    allowed: Any = None,
) -> RenderableType:
    """Weights [n_q, n_k] as a table whose cell backgrounds show the weight;
    pairs the mask forbids (``allowed`` False) show as a dim dash."""
    top = float(weights.max()) or 1.0
    table = _table(cols)
    for i, (label, row) in enumerate(zip(rows, weights.tolist())):
        cells = [
            Text(f" {fmt(w, precision)} ", style=cell_style(w / top))
            if allowed is None or allowed[i][j] else Text("– ", style="dim")
            for j, w in enumerate(row)
        ]
        table.add_row(label, *cells)
    return _titled(title, table)


def legend(top: float, precision: int = 3) -> Text:
    """A colour bar from 0 to the largest weight."""
    text = Text("0 ")
    for i in range(20):
        text.append(" ", style=background(i / 19))
    text.append(f" {fmt(top, precision)}")
    return text


def number_table(
    values: Any,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    precision: int = 3,
    title: str | None = None,
) -> RenderableType:
    """A plain matrix of numbers, right-aligned, labelled on both axes."""
    table = _table(cols)
    for label, row in zip(rows, values.tolist()):
        table.add_row(label, *(fmt(x, precision) for x in row))
    return _titled(title, table)


def _table(cols: Sequence[str]) -> Table:
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
        table.add_column(name, justify="right", no_wrap=True)
    for i, key in enumerate(keys):
        cells = [fmt(float(x), precision) for x in values.values[i]] if values is not None else []
        table.add_row(key, fmt(float(scores[i]), precision), f"{weights[i]:.{precision}f}",
                      bar(float(weights[i])), *cells)
    title = Text.assemble(("query ", "bold"), (query, "bold cyan"))
    parts: list[RenderableType] = [title, table]
    if output is not None:
        sums = [fmt(float(x), precision) for x in output]
        total = sums[0] if len(sums) == 1 else ", ".join(f"{n} {x}" for n, x in zip(columns, sums))
        parts.append(Text.assemble(("weighted sum: ", "bold"), total))
    return Group(*parts)
