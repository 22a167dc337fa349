"""Labels that fit: long row and column names shortened in the middle, so that
labels that differ stay different ("a_very…_1", "a_very…_2", never two
"a_very_long…")."""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def value_columns(d: int) -> list[str]:
    """Names for d unnamed columns of values: one number per key is its "value"
    (seed 000's v: [10, 5, 2]); more are d0, d1, …"""
    return ["value"] if d == 1 else [f"d{j}" for j in range(d)]


def cut(label: str, width: int, tail: int) -> str:
    """``label`` in at most ``width`` characters: its start, "…", and its last ``tail`` characters."""
    if len(label) <= width:
        return label
    if width <= 1:
        return ELLIPSIS[:width]
    tail = min(max(tail, 0), width - 1)
    return label[: width - 1 - tail] + ELLIPSIS + (label[-tail:] if tail else "")


def abbreviate(labels: Sequence[str], width: int) -> list[str]:
    """Each label in at most ``width`` characters, cut in the middle, keeping as
    much of the end as it takes for labels that differ to stay different (the
    end of a name is where numbered names differ). Labels that fit are unchanged."""
    labels = list(labels)
    if all(len(label) <= width for label in labels):
        return labels
    distinct = len(set(labels))
    best: list[str] = []
    for tail in [width // 3, *range(width // 3 + 1, width - 1), *range(width // 3 - 1, -1, -1)]:
        short = [cut(label, width, tail) for label in labels]
        if len(set(short)) == distinct:
            return short
        if not best or len(set(short)) > len(set(best)):
            best = short
    return best


def legend(labels: Sequence[str], shown: Sequence[str]) -> list[tuple[str, str]]:
    """(shortened, full) for each label that was shortened, once each, in order."""
    pairs: dict[str, str] = {}
    for full, short in zip(labels, shown, strict=True):
        if short != full:
            pairs.setdefault(short, full)
    return list(pairs.items())
