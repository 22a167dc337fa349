"""Words and numbers in text, the same in every layer (readers, vectors, cli):
one pluraliser for messages and views, one parser for numbers written as text."""

from __future__ import annotations


def noun(n: int, one: str, many: str | None = None) -> str:
    """``one`` for 1, else ``many`` (by default ``one`` + "s"): word/words, query/queries."""
    return one if n == 1 else many or one + "s"


def plural(n: int, one: str, many: str | None = None) -> str:
    """The count and its noun: '1 value', '3 values', '2 queries'."""
    return f"{n} {noun(n, one, many)}"


MINUS_SIGN = "\u2212"  # "−", as a rendered formula shows a minus: copied, it looks like "-"


def parse_number(text: str) -> float | None:
    """Python float syntax ('2', '-1.5e3', 'nan', '-inf', '1_000', surrounding
    spaces allowed; the minus sign U+2212 is a minus), or None when the text
    is not a number."""
    try:
        return float(text.replace(MINUS_SIGN, "-"))
    except ValueError:
        return None
