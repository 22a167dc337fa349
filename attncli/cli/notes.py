"""Deliberate remarks on a successful run: one ``attn: note: …`` line each on
stderr, never in data output.

Anything may add a note while a command runs (``note``); the app prints them
once the command has succeeded (``flush``), after its output, and drops them
when it fails, so that a failure prints its one error line only. The same
remark about several places (three files read the same way) is one line
naming them all.
"""

from __future__ import annotations

import sys

_pending: dict[str, list[str]] = {}  # remark -> the places it is about, in order


def note(text: str, where: str | None = None) -> None:
    """Say ``text`` (about ``where``, a file or file:line) on stderr once the command has succeeded."""
    places = _pending.setdefault(text, [])
    if where is not None and where not in places:
        places.append(where)


def pending() -> list[str]:
    """The lines flush would print, without ``attn: note: ``."""
    return [f"{', '.join(places)}: {text}" if places else text for text, places in _pending.items()]


def clear() -> None:
    _pending.clear()


def flush() -> None:
    """Print the notes, one line each, and forget them."""
    for line in pending():
        sys.stderr.write(f"attn: note: {line}\n")
    _pending.clear()
