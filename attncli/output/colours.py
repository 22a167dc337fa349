"""Rows that are colours (seed 003): hex labels or RGB rows, their mix, and
value columns that are shares of named qualities (warm, cool).

Only numbers and strings here; render.py draws the swatches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

RGB = tuple[int, int, int]
HEX = re.compile(r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})")


def parse_hex(label: str) -> RGB | None:
    """``#8517dc`` or ``#83c`` -> (r, g, b); anything else -> None."""
    match = HEX.fullmatch(label.strip())
    if not match:
        return None
    digits = match.group(1)
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    return tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]


def to_hex(rgb: Sequence[float]) -> str:
    return "#" + "".join(f"{min(max(round(c), 0), 255):02x}" for c in rgb)


def row_colours(labels: Sequence[str] | None, values: Any, rgb: bool) -> list[RGB] | None:
    """The colour of each row, or None when the rows are not colours.

    With ``rgb`` (a bundle's ``rgb: true``) the rows themselves are colours:
    0–1 when every value is within 0–1 (as after ``divide: 255``), else 0–255.
    Otherwise the rows are colours when every label is a hex code.
    """
    import numpy as np

    if rgb and values.ndim == 2 and values.shape[1] == 3:
        scale = 255.0 if values.min() >= 0 and values.max() <= 1 else 1.0
        return [(int(r), int(g), int(b)) for r, g, b in np.clip(np.rint(values * scale), 0, 255)]
    if not labels:
        return None
    colours = [parse_hex(label) for label in labels]
    return colours if all(c is not None for c in colours) else None  # type: ignore[return-value]


def mix(weights: Any, colours: Sequence[RGB]) -> list[RGB]:
    """The keys' colours blended by each query's weights: [n_q, n_k] @ [n_k, 3]."""
    import numpy as np

    blended = np.asarray(weights, dtype=np.float64) @ np.asarray(colours, dtype=np.float64)
    return [(int(r), int(g), int(b)) for r, g, b in np.clip(np.rint(blended), 0, 255)]


def are_shares(v: Any) -> bool:
    """Is every row of V a set of non-negative shares summing to 1 (like warm/cool
    one-hot rows)? Then each output row is such shares too, and reads as percentages."""
    import numpy as np

    return bool(v.size and (v >= 0).all() and np.allclose(v.sum(axis=1), 1.0))


def percentages(shares: Sequence[float], names: Sequence[str], precision: int = 3) -> str:
    """'48.8 % warm, 51.2 % cool' (precision counts the decimals of the share, 0.488)."""
    decimals = max(precision - 2, 0)
    return ", ".join(f"{100 * s:.{decimals}f} % {name}" for s, name in zip(shares, names, strict=True))
