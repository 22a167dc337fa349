"""A heatmap of attention weights in the view that reads best: the numbers on
their colours while they fit the width (at most two blocks of columns) and
are few enough to draw quickly, else the compact view (one cell per weight);
or, on request, each query's top keys. The choice is made when the view is
printed, for the width it gets. A signed heatmap (gradients) is the same on
the diverging scale, symmetric around 0 (``palette``)."""

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
    # where the colour scale ends: True the largest weight shown, False 1, None (auto) the largest
    # weight when no weight reaches FAINT (many keys share the attention: 0 to 1 would be one colour)
    scale_to_max: bool | None = None
    hints: bool = True  # the view may name --view, --top and --scale-to-max (the command takes them)

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {self.view!r}")
        if self.top < 1:
            raise ValueError(f"top must be at least 1, got {self.top}")

    def scale(self, weights: Any) -> float:
        """The weight drawn in the brightest colour: 1, or the largest weight (``scale_to_max``,
        or by default when no weight reaches FAINT)."""
        import numpy as np

        if self.scale_to_max is False or not np.size(weights):
            return 1.0
        largest = float(np.max(weights))
        if self.scale_to_max is None and largest >= FAINT:
            return 1.0
        return largest or 1.0


FAINT = 0.5  # below this largest weight the colours run to it by default (seed 003's colours: 0.158)


def scale_text(top: float, precision: int, style: ViewStyle) -> str:
    """The top of a legend: '1', or '0.874 (the largest weight)'."""
    from attncli.output.blocks import short

    return "1" if top == 1.0 else f"{short(top, precision)} (the largest weight)"


class Heatmap:
    """Weights [n_q, n_k] with row and column labels, drawn in the view the
    style asks for; ``auto`` picks numbers or compact for the width it gets.
    ``signed``: any real values (gradients) on the diverging scale from
    −max|value| through 0 to +max|value|; ``axes`` names what runs across and
    down (keys and queries for weights)."""

    def __init__(
        self,
        weights: Any,
        rows: Sequence[Any],
        cols: Sequence[Any],
        *,
        precision: int,
        allowed: Any = None,
        style: ViewStyle,
        signed: bool = False,
        axes: tuple[str, str] = ("keys", "queries"),
    ) -> None:
        import numpy as np

        self.weights = np.asarray(weights)
        self.rows, self.cols, self.precision, self.allowed, self.style = rows, cols, precision, allowed, style
        self.signed, self.axes = signed, axes
        if signed:
            if style.view == "top":
                raise ValueError("signed values have no top view")
            self.top = (float(np.max(np.abs(self.weights))) if self.weights.size else 0.0) or 1.0
        else:
            self.top = style.scale(self.weights)

    def numbers(self):
        """Each weight as a number on its colour, in blocks of columns."""
        from attncli.output.blocks import ColumnBlocks, fmt
        from attncli.output.palette import HeatCell

        allowed, top, signed = self.allowed, self.top, self.signed
        body = [
            (
                label,
                [
                    HeatCell(fmt(w, self.precision), w / top, signed)
                    if allowed is None or allowed[i][j]
                    else HeatCell("", None)
                    for j, w in enumerate(row)
                ],
            )
            for i, (label, row) in enumerate(zip(self.rows, self.weights.tolist(), strict=True))
        ]
        return ColumnBlocks(self.cols, body)

    def compact(self):
        from attncli.output.compact import CompactHeatmap, scaled

        return CompactHeatmap(
            scaled(self.weights, self.allowed, self.top),
            plain(self.rows),
            plain(self.cols),
            signed=self.signed,
            axes=self.axes,
        )

    def legend(self, shades: bool):
        from attncli.output.blocks import short
        from attncli.output.palette import Legend

        if self.signed:
            return Legend(self.top, short(self.top, self.precision), shades=shades, signed=True)
        return Legend(
            self.top,
            scale_text(self.top, self.precision, self.style),
            shades=shades,
            note=faint_note(self.top, self.style) if self.style.hints else "",
        )

    def too_many(self) -> bool:
        """More cells than a table draws quickly (``summary.TABLE_CELLS``): auto draws them compact."""
        from attncli.output.summary import TABLE_CELLS

        return self.weights.size > TABLE_CELLS

    def choose(self, console, width: int) -> str:
        """The view to draw at ``width``: the style's, or for ``auto`` numbers when they fit."""
        if self.style.view != "auto":
            return self.style.view
        if self.surely_too_wide(width) or self.too_many():  # or too slow to draw
            return "compact"
        return "numbers" if self.numbers().count_blocks(console, width) <= NUMBER_BLOCKS else "compact"

    def surely_too_wide(self, width: int) -> bool:
        """Are the numbers too wide for NUMBER_BLOCKS blocks, with no need to measure every cell?"""
        narrowest = len(self.cols) * (self.precision + 2 + 2 + 3)  # "0.150" padded, and the rule between columns
        return narrowest > NUMBER_BLOCKS * width

    def compact_hint(self, width: int) -> str:
        """Why auto drew the compact view, and how to get the numbers."""
        many = self.too_many() and not self.surely_too_wide(width)
        why = (
            f"{self.weights.size} values are more than a table draws"
            if many
            else f"the numbers take more than {NUMBER_BLOCKS} blocks of columns at this width"
        )
        return f"({why}: --view numbers shows them" + (")" if self.signed else ", --top K the heaviest keys)")

    def __rich_console__(self, console, options):
        from rich.text import Text

        from attncli.output.topk import top_table

        view = self.choose(console, options.max_width)
        if view == "top":
            yield top_table(
                self.weights,
                self.rows,
                plain(self.cols),
                k=self.style.top,
                precision=self.precision,
                top=self.top,
                allowed=self.allowed,
            )
            yield self.legend(shades=False)
            return
        if view == "compact":
            yield self.compact()
            yield self.legend(shades=True)
            if self.style.view == "auto" and self.style.hints:
                yield Text(self.compact_hint(options.max_width), style="dim")
            return
        yield self.numbers()
        yield self.legend(shades=False)

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement

        if self.choose(console, options.max_width) == "numbers":
            return Measurement.get(console, options, self.numbers())
        return Measurement(min(20, options.max_width), options.max_width)


def faint_note(top: float, style: ViewStyle) -> str:
    """Why the colours run to the largest weight when nobody asked: no weight reaches FAINT."""
    if style.scale_to_max is None and top != 1.0:
        return f"(no weight reaches {FAINT:g}; --scale-to-one: 0 to 1)"
    return ""


def plain(labels: Sequence[Any]) -> list[str]:
    """Labels as text (a swatched label by its name)."""
    out = []
    for label in labels:
        inner = getattr(label, "plain", label)  # IfColour keeps its plain label
        out.append(inner if isinstance(inner, str) else getattr(inner, "plain", str(inner)))
    return out
