"""A heatmap of attention weights in the view that reads best: the numbers on
their colours while they fit the width (at most two blocks of columns), else
the compact view (one cell per weight); or, on request, each query's top keys.
The choice is made when the view is printed, for the width it gets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

VIEWS = ("auto", "numbers", "compact", "top")  # the --view choices
NUMBER_BLOCKS = 2  # blocks of columns the numbers may take before "auto" draws the compact view
TOP = 5  # keys per query in the top view, unless --top says


@dataclass(frozen=True)
class ViewStyle:
    """How heatmaps are drawn: which view, how many top keys, and where the colour scale ends."""

    view: str = "auto"  # one of VIEWS
    top: int = TOP  # keys per query in the top view
    scale_to_max: bool = False  # the scale runs to the largest weight shown rather than to 1
    hints: bool = True  # the view may name --view, --top and --scale-to-max (the command takes them)

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {self.view!r}")
        if self.top < 1:
            raise ValueError(f"top must be at least 1, got {self.top}")

    def scale(self, weights: Any) -> float:
        """The weight drawn in the brightest colour: 1, or the largest weight with ``scale_to_max``."""
        import numpy as np

        return (float(np.max(weights)) or 1.0) if self.scale_to_max and np.size(weights) else 1.0


def scale_text(top: float, precision: int, style: ViewStyle) -> str:
    """The top of a legend: '1', or '0.874 (the largest weight)'."""
    from attncli.output.render import short

    return f"{short(top, precision)} (the largest weight)" if style.scale_to_max else "1"


class Heatmap:
    """Weights [n_q, n_k] with row and column labels, drawn in the view the
    style asks for; ``auto`` picks numbers or compact for the width it gets."""

    def __init__(self, weights: Any, rows: Sequence[Any], cols: Sequence[Any], *, precision: int,
                 allowed: Any = None, style: ViewStyle) -> None:
        import numpy as np

        self.weights = np.asarray(weights)
        self.rows, self.cols, self.precision, self.allowed, self.style = rows, cols, precision, allowed, style
        self.top = style.scale(self.weights)

    def numbers(self):
        """Each weight as a number on its colour, in blocks of columns."""
        from attncli.output.palette import HeatCell
        from attncli.output.render import ColumnBlocks, fmt

        allowed = self.allowed
        body = [
            (label, [HeatCell(fmt(w, self.precision), w / self.top) if allowed is None or allowed[i][j] else
                     HeatCell("", None) for j, w in enumerate(row)])
            for i, (label, row) in enumerate(zip(self.rows, self.weights.tolist(), strict=True))
        ]
        return ColumnBlocks(self.cols, body)

    def compact(self):
        from attncli.output.compact import CompactHeatmap, scaled

        return CompactHeatmap(scaled(self.weights, self.allowed, self.top), plain(self.rows), plain(self.cols))

    def legend(self, shades: bool):
        from attncli.output.palette import Legend

        return Legend(self.top, scale_text(self.top, self.precision, self.style), shades=shades,
                      note=faint_note(self.weights, self.top, self.precision) if self.style.hints else "")

    def choose(self, console, width: int) -> str:
        """The view to draw at ``width``: the style's, or for ``auto`` numbers when they fit."""
        if self.style.view != "auto":
            return self.style.view
        narrowest = len(self.cols) * (self.precision + 2 + 2 + 3)  # "0.150" padded, and the rule between columns
        if narrowest > NUMBER_BLOCKS * width:  # surely too wide: no need to measure every cell
            return "compact"
        return "numbers" if self.numbers().count_blocks(console, width) <= NUMBER_BLOCKS else "compact"

    def __rich_console__(self, console, options):
        from rich.text import Text

        from attncli.output.topk import top_table

        view = self.choose(console, options.max_width)
        if view == "top":
            yield top_table(self.weights, self.rows, plain(self.cols), k=self.style.top, precision=self.precision,
                            top=self.top, allowed=self.allowed)
            yield self.legend(shades=False)
            return
        if view == "compact":
            yield self.compact()
            yield self.legend(shades=True)
            if self.style.view == "auto" and self.style.hints:
                yield Text(f"(the numbers take more than {NUMBER_BLOCKS} blocks of columns at this width: "
                           "--view numbers shows them, --top K the heaviest keys)", style="dim")
            return
        yield self.numbers()
        yield self.legend(shades=False)

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        if self.choose(console, options.max_width) == "numbers":
            return Measurement.get(console, options, self.numbers())
        return Measurement(min(20, options.max_width), options.max_width)


def faint_note(weights: Any, top: float, precision: int) -> str:
    """A hint when every weight sits in the bottom fifth of a 0-1 scale (many keys share the attention)."""
    import numpy as np

    from attncli.output.render import short

    largest = float(np.max(weights)) if np.size(weights) else 0.0
    if top == 1.0 and largest < 0.2:
        return f"(the largest weight is {short(largest, precision)}: --scale-to-max spreads the colours)"
    return ""


def plain(labels: Sequence[Any]) -> list[str]:
    """Labels as text (a swatched label by its name)."""
    out = []
    for label in labels:
        inner = getattr(label, "plain", label)  # IfColour keeps its plain label
        out.append(inner if isinstance(inner, str) else getattr(inner, "plain", str(inner)))
    return out
