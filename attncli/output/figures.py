"""Figures for papers and slides: the weights as heatmaps drawn by matplotlib
(the optional 'plot' extra), one panel per head, labelled axes and a colour
bar, saved as PNG or PDF, whole or not at all.

matplotlib is used through its object API (``Figure``), never pyplot: no
window, no global state, no backend to choose."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from attncli.errors import AttnError

if TYPE_CHECKING:
    from attncli.output.maps import AttentionMaps

EXTRA_HINT = "pip install '.[plot]' in attn's source folder"
TICK_LABELS = 60  # axes name each token up to this many, else they are numbered
ANNOTATED = 12  # panels with at most this many queries and keys (and few panels) print each weight in its cell
GRID_COLUMNS = 4  # panels in a row, when the heads are not laid out as layers × heads
DPI = 150


def require(option: str) -> None:
    """Raise the one-line error when matplotlib is missing, before anything is written.
    Imports it quietly: an older matplotlib with a newer pyparsing warns of deprecations
    that are nothing to the user of attn (stderr is for attn's own lines)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            import matplotlib.figure  # noqa: F401
    except ImportError:
        raise AttnError(f"{option} needs matplotlib, from the 'plot' extra ({EXTRA_HINT})") from None


def layout(maps: AttentionMaps) -> tuple[int, int]:
    """(rows, columns) of panels: layers × heads when there are both, else rows of GRID_COLUMNS."""
    if len(maps.layers) > 1 and len(maps.heads) > 1:
        return len(maps.layers), len(maps.heads)
    columns = min(maps.count, GRID_COLUMNS)
    return math.ceil(maps.count / columns), columns


def figure(maps: AttentionMaps, title: str):
    """A matplotlib Figure: a heatmap per head (queries down, keys across) on
    viridis from 0 to ``maps.top``, pairs the mask forbids in grey, one colour bar."""
    import numpy as np

    require("a figure")
    from matplotlib.figure import Figure

    rows, columns = layout(maps)
    n_q, n_k = len(maps.queries), len(maps.keys)
    grid = rows * columns > GRID_COLUMNS
    annotated = not grid and max(n_q, n_k) <= ANNOTATED
    per_cell = 0.45 if annotated else 0.22  # inches: room for "0.37" in a cell, or just the colour
    side = 1.9 if grid else min(max(per_cell * max(n_q, n_k), 3.0), 9.0)  # inches of one panel
    fig = Figure(
        figsize=(columns * side * max(n_k / max(n_q, n_k), 0.4) + 1.6, rows * side + 0.8), dpi=DPI, layout="constrained"
    )
    axes = np.atleast_2d(fig.subplots(rows, columns, squeeze=False))
    cmap = _viridis()
    image = None
    panels = list(maps.panels())
    font = 9 if not grid else 6
    for n, ax in enumerate(axes.flat):
        if n >= len(panels):
            ax.set_visible(False)
            continue
        name, weights, allowed = panels[n]
        shown = np.ma.masked_array(weights, mask=np.zeros(weights.shape, bool) if allowed is None else ~allowed)
        image = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=maps.top, aspect="auto", interpolation="nearest")
        if annotated:
            _annotate(ax, weights, allowed, maps.top, font)
        if maps.count > 1 or name != "weights":
            ax.set_title(name, fontsize=font + 1)
        first_column, last_row = n % columns == 0, n // columns == rows - 1 or n + columns >= len(panels)
        _ticks(ax, maps.keys, "x", font, label=last_row)
        _ticks(ax, maps.queries, "y", font, label=first_column)
        if last_row:
            ax.set_xlabel("keys", fontsize=font + 1)
        if first_column:
            ax.set_ylabel("queries", fontsize=font + 1)
    assert image is not None
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8 if grid else 1.0)
    bar.set_label("weight" + (" (to the largest)" if maps.top != 1.0 else ""), fontsize=font + 1)
    bar.ax.tick_params(labelsize=font)
    if title:
        fig.suptitle(title, fontsize=font + 3)
    return fig


def _annotate(ax, weights, allowed, top: float, font: int) -> None:
    """Each weight written in its cell, in black or white, whichever reads on its colour."""
    from attncli.output.palette import BLACK, colour, ink

    for (i, j), w in _cells(weights):
        if allowed is not None and not allowed[i, j]:
            continue
        rgb = ink(colour(w / top))
        ax.text(
            j, i, f"{w:.2f}", ha="center", va="center", fontsize=font - 1, color="black" if rgb == BLACK else "white"
        )


def _cells(weights):
    """((row, column), weight) of every cell."""
    for i, row in enumerate(weights.tolist()):
        for j, w in enumerate(row):
            yield (i, j), w


def _ticks(ax, labels: list[str], axis: str, font: int, *, label: bool) -> None:
    """Every token's name up to TICK_LABELS of them, else about ten numbered ticks; none off the grid's edge."""
    n = len(labels)
    if n <= TICK_LABELS:
        positions, names = list(range(n)), labels
    else:
        step = max(1, round(n / 10))
        positions = list(range(0, n, step))
        names = [str(i) for i in positions]
    set_ticks, set_labels = (ax.set_xticks, ax.set_xticklabels) if axis == "x" else (ax.set_yticks, ax.set_yticklabels)
    set_ticks(positions)
    if label:
        crowded = axis == "x" and n <= TICK_LABELS and sum(len(name) + 1 for name in names) > 40
        set_labels(names, fontsize=font, rotation=90 if crowded else 0)
    else:
        set_labels([])


def _viridis():
    """Viridis with forbidden pairs (masked) in light grey."""
    import matplotlib

    return matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")


def save_figures(maps: AttentionMaps, png: str | None, pdf: str | None, title: str) -> None:
    """Draw the figure once and write it to ``--png`` and ``--pdf``, each whole or not at all."""
    if png is None and pdf is None:
        return
    import io

    from attncli.output.pictures import write_file

    require("--png" if png is not None else "--pdf")
    fig = figure(maps, maps.title or title)
    for path, kind in ((png, "png"), (pdf, "pdf")):
        if path is not None:
            buffer = io.BytesIO()
            fig.savefig(
                buffer, format=kind, dpi=DPI, metadata={"Title": maps.title or title} if kind == "pdf" else None
            )
            write_file(path, buffer.getvalue())
