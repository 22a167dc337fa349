"""Words into vectors for the commands that take words (lookup, self)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.cli.notes import note
from attncli.errors import UsageError
from attncli.text import noun

if TYPE_CHECKING:
    from attncli.vectors.table import WordVectors


def word_vectors(path: str | None, words_file: str | None, texts: list[str]) -> WordVectors:
    """The bundled table, or the user's file read only as far as these words need."""
    from attncli.vectors.table import load_default, phrase_words

    if path is None:
        if words_file is not None:
            raise UsageError("--words goes with a .npy --vectors file")
        return load_default()
    from attncli.vectors.files import read_vectors

    wanted = {w for text in texts for w in phrase_words(text)}
    return read_vectors(path, words=words_file, wanted=wanted)


def note_unknown(words: list[str], policy: str, source: str) -> None:
    """Say which words ``--unknown skip`` left out or ``zero`` gave zeros (``source``: the vectors' name)."""
    from attncli.vectors.table import named_words

    if words:
        done = "left out" if policy == "skip" else "given a vector of zeros"
        note(f"unknown {noun(len(words), 'word')} {named_words(words)} {done} (not in {source})")
