"""How explain writes numbers in its sentences: a factor of a product, a short
vector, a sum term by term (the first ``TERMS``), a projected feature term by
term. What ``explain``, ``self --explain`` and ``trace --explain`` share."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

TERMS = 8  # terms written out in a sum before the rest are summarised


def factor(x: float, precision: int) -> str:
    """A number in a product, as the tables show it, in brackets when negative: 2.000 × (-1.000)."""
    from attncli.output.blocks import fmt

    text = fmt(x, precision)
    return f"({text})" if text.startswith("-") else text


def vector(row: np.ndarray, precision: int, limit: int = 4) -> str:
    """'[1.000, 0.000]', or '[0.100, 0.200, 0.300, 0.400, … 46 more]' for a long row."""
    from attncli.output.blocks import fmt

    values = [fmt(x, precision) for x in row.tolist()[:limit]]
    more = f", … {len(row) - limit} more" if len(row) > limit else ""
    return f"[{', '.join(values)}{more}]"


def terms(written: list[str]) -> str:
    """'a + b + c', or the first TERMS terms and how many more."""
    more = len(written) - TERMS
    return " + ".join(written[:TERMS]) + (f" + … ({more} more)" if more > 0 else "")


def columns(d: int) -> list[str]:
    return [f"d{j}" for j in range(d)]


def projected_feature(name: str, row: np.ndarray, column: np.ndarray, bias: np.ndarray | None, at: int, p: int) -> str:
    """'q_it[0] = 0.100 × 0.300 + … + b 0.100 = 1.234': one projected feature term by term
    (``at``: the feature's index in ``bias``)."""
    from attncli.output.blocks import fmt

    products = [f"{factor(a, p)} × {factor(b, p)}" for a, b in zip(row.tolist(), column.tolist(), strict=True)]
    value = float(row @ column)
    tail = ""
    if bias is not None:
        b = float(bias.reshape(-1)[at])
        value += b
        tail = f" + {factor(b, p)} (bias)"
    return f"{name} = {terms(products)}{tail} = {fmt(value, p)}"
