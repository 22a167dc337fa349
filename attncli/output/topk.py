"""The top-k view: for each query, its K heaviest keys with their weights, and
what the other keys add up to. Read like a ranking; wraps into blocks of
columns like every table, never cuts a label or a number."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attncli.output.labels import abbreviate
from attncli.output.palette import HeatCell

MAX_KEY_LABEL = 16  # characters of a key's name in a cell, at most (shortened in the middle)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def top_keys(weights: Any, allowed: Any, k: int) -> Any:
    """The indices of each row's ``k`` largest weights among the allowed keys, heaviest first
    (ties by key order): [n_q, n_k] -> [n_q, min(k, n_k)]."""
    import numpy as np

    w = np.asarray(weights, dtype=np.float64)
    if allowed is not None:
        w = np.where(allowed, w, -np.inf)
    k = min(k, w.shape[1])
    return np.argsort(-w, axis=1, kind="stable")[:, :k]


def top_table(
    weights: Any, rows: Sequence[Any], cols: Sequence[str], *, k: int, precision: int, top: float, allowed: Any = None
):
    """A ColumnBlocks table: the query, its 1st … K-th key ("elephant 0.37", on
    the weight's colour), and the rest ("0.41 in 13 keys")."""
    import numpy as np

    from attncli.output.blocks import ColumnBlocks, fmt

    names = abbreviate([str(c) for c in cols], MAX_KEY_LABEL)
    order = top_keys(weights, allowed, k)
    n_k = weights.shape[1]
    counted = np.ones(weights.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    body = []
    for i, label in enumerate(rows):
        cells: list[Any] = []
        for j in order[i].tolist():
            if not counted[i, j]:
                cells.append("")
                continue
            w = float(weights[i, j])
            cells.append(HeatCell(f"{names[j]} {fmt(w, precision)}", w / top))
        rest = counted[i].copy()
        rest[order[i]] = False
        left = int(rest.sum())
        cells.append(
            f"{fmt(float(weights[i][rest].sum()), precision)} in {left} key{'s' if left != 1 else ''}" if left else ""
        )
        body.append((label, cells))
    heads = [ordinal(r + 1) for r in range(order.shape[1])] + ["the rest"]
    if order.shape[1] == n_k:
        heads, body = heads[:-1], [(label, cells[:-1]) for label, cells in body]
    return ColumnBlocks(heads, body)
