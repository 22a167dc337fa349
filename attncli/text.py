"""Words and numbers in text, the same in every layer (readers, vectors, cli):
one pluraliser for messages and views, one parser for numbers written as text,
one escaper for text shown on a terminal."""

from __future__ import annotations

import re


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


def clip(text: str, width: int = 40) -> str:
    """``text`` cut to ``width`` characters with an ellipsis, for a message that
    quotes a word: a 5,000-digit number need not fill the screen."""
    return text if len(text) <= width else text[: width - 1] + "…"


INDEX = re.compile(r"[+-]?[0-9]{1,18}")  # ASCII digits only: int('²') fails, int('٣') is 3


def parse_index(text: str) -> int | None:
    """A whole number typed as a position ('2', '-1'), or None: ASCII digits
    only, at most 18 of them (no other script's digits, no 5,000-digit int)."""
    text = text.strip()
    return int(text) if INDEX.fullmatch(text) else None


# C0 controls, DEL, C1 controls; bidirectional overrides and isolates (they reorder
# what follows them on screen); the line and paragraph separators; lone surrogates
# (a file name's bytes that are not UTF-8, as Python keeps them: \udcff for \xff).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to show on a terminal: every control character escaped as
    Python writes it (ESC as ``\\x1b``, a newline as ``\\n``, U+202E as
    ``\\u202e``), so that a label, a word or a file name can neither move the
    cursor, recolour or retitle the terminal, nor break a line. ``keep``: the
    controls to leave as they are (a newline between the rows of CSV)."""
    if not CONTROL.search(text):
        return text
    return CONTROL.sub(lambda m: m[0] if m[0] in keep else _escaped(m[0]), text)


def _escaped(char: str) -> str:
    """'\\x1b' for ESC; '\\xff' for the byte a file name's \\udcff stands for."""
    if "\udc80" <= char <= "\udcff":
        return f"\\x{ord(char) - 0xDC00:02x}"
    return repr(char)[1:-1]
