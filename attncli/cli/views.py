"""The options that say how attention weights are shown on a terminal — the
view (numbers, compact, top keys) and the colour scale — declared once,
gathered into one ``ViewFlags`` by ``@view_options()``. Pictures are outputs
(``cli/outputs.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.errors import UsageError
from attncli.output.heatmap import TOP, VIEWS

if TYPE_CHECKING:
    from attncli.output.heatmap import ViewStyle

View = Enum("View", {name: name for name in VIEWS}, type=str)  # type: ignore[misc]

ViewOption = Annotated[
    View,
    typer.Option(
        "--view",
        metavar="auto|numbers|compact|top",
        help="How weights are drawn on a terminal. numbers: each weight on its colour; compact: one "
        "coloured cell per weight, two queries a line (300 keys fit 100 columns); top: each query's "
        "heaviest keys (see --top). auto: numbers while they fit in two blocks of columns (2,500 at most), "
        "else compact.",
    ),
]
TopOption = Annotated[
    int | None,
    typer.Option(
        "--top",
        metavar="K",
        min=1,
        show_default=False,
        help=f"Show each query's K heaviest keys, their weights, and what the rest add up to (--view top shows {TOP}).",
    ),
]
ScaleToMaxOption = Annotated[
    bool | None,
    typer.Option(
        "--scale-to-max/--scale-to-one",
        show_default=False,
        help="Run the colour scale from 0 to the largest weight shown, or from 0 to 1. Default: to 1, "
        "unless no weight reaches 0.5 (many keys share the attention), then to the largest.",
    ),
]


@dataclass
class ViewFlags:
    """The view options as typed on the command line."""

    view: View = View("auto")
    top: int | None = None
    scale_to_max: bool | None = None

    def style(self) -> ViewStyle:
        """The output layer's ViewStyle; --top K means the top view."""
        from attncli.output.heatmap import ViewStyle

        view = self.view.value
        if self.top is not None:
            if view not in ("auto", "top"):
                raise UsageError(f"--top {self.top} shows the top view, not --view {view}", hint="give one of them")
            view = "top"
        return ViewStyle(view=view, top=self.top or TOP, scale_to_max=self.scale_to_max)


FROM_VIEW_OPTIONS = ViewFlags()  # the placeholder default of ``look``: @view_options fills it in

VIEW_OPTIONS: dict[str, tuple[Any, Any]] = {
    "view": (ViewOption, View("auto")),
    "top": (TopOption, None),
    "scale_to_max": (ScaleToMaxOption, None),
}


def view_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the view options (all, or those ``names``), gathered into
    its parameter ``look: ViewFlags``."""
    from attncli.cli.groups import option_group

    return option_group("look", ViewFlags, VIEW_OPTIONS, names or tuple(VIEW_OPTIONS))
