"""Word-vector tables: the bundled GloVe table and looking words up in it.

The bundled table (``load_default``) is GloVe 6B 50d (Pennington, Socher and
Manning, 2014; Stanford NLP, Public Domain Dedication and License PDDL 1.0):
the 140,000 most frequent plain lowercase words, stored as int8 with a scale
per vector (worst cosine to the float32 originals 0.9999), rebuilt by
``scripts/build_vectors.py``.

``attncli.vectors.files.read_vectors`` reads your own vectors into the same
``WordVectors``.

Library code: everything a user can get wrong raises AttnError, nothing prints.
"""

from __future__ import annotations

import functools
import io
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attncli.errors import AttnError
from attncli.text import noun
from attncli.vectors import UNKNOWN_POLICIES

if TYPE_CHECKING:
    import numpy as np

DEFAULT_TABLE = "glove6b50d.npz"
DEFAULT_NAME = "the bundled GloVe 6B 50d table"
VECTOR_FORMATS = ("glove", "word2vec", "word2vec-binary", "npy", "npz")  # read_vectors(format=...)
SUPPORTED = "GloVe text, word2vec/fastText text or binary, .npy with a words file"
# Punctuation stripped from both ends of each word of a phrase; inner hyphens
# and apostrophes stay ("x-ray", "o'clock").
_PUNCT = string.punctuation + "“”‘’«»…–—¿¡"
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
NAMED = 10  # unknown words named (and given a suggestion) in one error; the rest are counted
SCAN_WORDS = 32  # up to this many words are found by scanning the joined words; more build the index


def _quote_list(words: Iterable[str]) -> str:
    return ", ".join(repr(w) for w in words)


def named_words(words: list[str]) -> str:
    """'a', 'b' or, past NAMED words, the first ones and how many in all."""
    more = f", … ({len(words):,} in all)" if len(words) > NAMED else ""
    return _quote_list(words[:NAMED]) + more


@dataclass
class Embedded:
    """Vectors of texts, and what the table did not know."""

    vectors: np.ndarray  # [len(kept), dim] float32
    kept: list[int]  # the texts that have a row, in order (all but those left out for unknown words)
    unknown: list[str]  # the words not in the table, once each, in order


class WordVectors:
    """A table of words and their vectors, most frequent first.

    ``words[i]`` has the vector ``vectors[i]`` ([n_words, dim] float32). Lookup
    is case-insensitive: an exact match wins, then the lowercase form, then
    the first (most frequent) word with the same casefold.
    """

    def __init__(self, words: list[str] | str, vectors: np.ndarray, *, name: str = "", partial: bool = False) -> None:
        # words: a list, or one string of newline-joined words (split only when needed:
        # looking up a few words in the joined text is faster than building a dict).
        self._joined = "\n" + words + "\n" if isinstance(words, str) else None
        if isinstance(words, list):
            self.words = words
        n = len(words) if isinstance(words, list) else words.count("\n") + 1
        if vectors.ndim != 2 or vectors.shape[0] != n:
            raise ValueError(f"{n} words but vectors of shape {vectors.shape}")
        self.vectors = vectors
        self.name = name  # where the table came from, for messages
        self.partial = partial  # only some words were read (read_vectors with wanted)

    @functools.cached_property
    def words(self) -> list[str]:  # type: ignore[override]
        assert self._joined is not None
        return self._joined[1:-1].split("\n")

    def __repr__(self) -> str:
        return f"WordVectors({len(self)} words, dim {self.dim}, {self.name!r})"

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        n = len(self.words)  # built in reverse so that a duplicate keeps its first (most frequent) row
        return dict(zip(reversed(self.words), range(n - 1, -1, -1), strict=True))

    @functools.cached_property
    def _folded(self) -> dict[str, int]:
        folded: dict[str, int] = {}
        for i, w in enumerate(self.words):
            folded.setdefault(w.casefold(), i)
        return folded

    def find(self, word: str) -> int | None:
        """Row of ``word`` (exact, then lowercase, then casefold match), or None."""
        if "\n" in word or not word:
            return None
        if self._joined is not None and "_index" not in self.__dict__:
            for form in dict.fromkeys((word, word.lower(), word.casefold())):
                pos = self._joined.find("\n" + form + "\n")
                if pos >= 0:
                    return self._joined.count("\n", 0, pos)
            return None
        index = self._index
        i = index.get(word)
        if i is None:
            i = index.get(word.lower())
        if i is None and not word.islower():
            i = self._folded.get(word.casefold())
        return i

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.find(word) is not None

    def index(self, word: str) -> int:
        """Row of ``word``; raises the unknown-word AttnError if it is not in the table."""
        i = self.find(word)
        if i is None:
            raise self.unknown([word])
        return i

    def lookup(self, words: list[str]) -> np.ndarray:  # [n] words -> [n, dim] float32
        """Vectors of single words, case-insensitively.

        Every unknown word is named in one AttnError, with suggestions:
        ``unknown words 'banan', 'chiar' (did you mean 'banana', 'chair'?)``.
        """
        rows = self._rows(words)
        missing = [w for w, i in zip(words, rows, strict=True) if i is None]
        if missing:
            raise self.unknown(missing)
        return self.vectors[[i for i in rows if i is not None]]

    def _rows(self, words: list[str]) -> list[int | None]:
        """The row of each word (None: unknown); for many words, through the index."""
        if len(words) > SCAN_WORDS:
            self._index  # noqa: B018 - one dict beats a scan of the joined words for each
        return [self.find(w) for w in words]

    def phrases(self, texts: list[str]) -> np.ndarray:  # [n] texts -> [n, dim] float32
        """Vectors of words or phrases: a phrase is the mean of its words' vectors.

        Each text is split on whitespace and punctuation is stripped from both
        ends of every word ("tropical fruit!" -> tropical, fruit; inner hyphens
        and apostrophes stay). A single word gives its own vector. Unknown
        words from all the texts are reported together in one AttnError.
        """
        return self.embed(texts).vectors

    def embed(self, texts: list[str], unknown: str = "error") -> Embedded:
        """Vectors of words or phrases (see ``phrases``), with a word the table
        does not have: an error naming every such word (``"error"``), left out
        (``"skip"``: a phrase is the mean of its known words, and a text with
        none is left out), or a vector of zeros (``"zero"``)."""
        import numpy as np

        if unknown not in UNKNOWN_POLICIES:
            raise ValueError(f"unknown must be one of {UNKNOWN_POLICIES}, not {unknown!r}")
        tokens = [phrase_words(t) for t in texts]
        for text, toks in zip(texts, tokens, strict=True):
            if not toks:
                raise AttnError(f"no words in {text!r}")
        flat = [w for toks in tokens for w in toks]
        rows = self._rows(flat)
        missing = list(dict.fromkeys(w for w, i in zip(flat, rows, strict=True) if i is None))
        if missing and unknown == "error":
            raise self.unknown(missing)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        kept = []
        start = 0
        for j, toks in enumerate(tokens):
            found = [i for i in rows[start : start + len(toks)] if i is not None]
            start += len(toks)
            if unknown == "skip" and not found:
                continue
            if found:  # zero: the unknown words' zero vectors count in the mean
                out[j] = self.vectors[found].sum(axis=0) / (len(found) if unknown == "skip" else len(toks))
            kept.append(j)
        return Embedded(out[kept], kept, missing)

    def phrase_vector(self, text: str) -> np.ndarray:  # text -> [dim] float32
        """Vector of a word or phrase: the mean of its words' vectors (see ``phrases``)."""
        return self.phrases([text])[0]

    def suggest(self, word: str) -> str | None:
        """The most frequent known word within edit distance 1, else 2, of ``word``; or None.

        Distance 1: every edit of the word (delete, transpose, replace or insert
        a-z, hyphen, apostrophe) is looked up. Distance 2: a vectorised
        letter-count filter over the table narrows it to a few candidates,
        checked in frequency order. Milliseconds on a 140,000-word table.
        """
        if self.partial or not len(self):
            return None
        w = word.lower()
        if len(w) > self._longest + 2:  # no word of the table is within 2 edits: build no candidates
            return None
        best = _most_frequent(_edits1(w), self._index)
        if best is None:
            best = self._within2(w)
        return best if best != w else None

    @functools.cached_property
    def _letter_counts(self) -> np.ndarray:  # -> [29, n_words] uint8
        """How often each of a-z, the hyphen, the apostrophe and any other
        character (one bucket) occurs in each word of the table, computed once
        (bucket by bucket, so that each bucket's counts lie together)."""
        import numpy as np

        chars = np.frombuffer(self._joined_text.lower().encode("utf-32-le"), dtype=np.uint32)
        newline = chars == 10
        word_of = (np.cumsum(newline, dtype=np.int64) - newline)[~newline]  # [letters] the word each is in
        lut = np.full(128, len(_BUCKETS) - 1, dtype=np.int64)  # ASCII -> bucket; the rest is "other"
        for j, c in enumerate(_BUCKETS[:-1]):
            lut[ord(c)] = j
        letters = chars[~newline]
        code = np.where(letters < 128, lut[np.minimum(letters, 127)], len(_BUCKETS) - 1)  # [letters]
        found = np.bincount(code * len(self) + word_of, minlength=len(_BUCKETS) * len(self))
        return np.minimum(found, 255).astype(np.uint8).reshape(len(_BUCKETS), len(self))

    @functools.cached_property
    def _lengths(self) -> np.ndarray:  # -> [n_words] characters in each word
        import numpy as np

        text = self._joined_text
        chars = (
            np.frombuffer(text.encode("ascii"), np.uint8)
            if text.isascii()
            else np.frombuffer(text.encode("utf-32-le"), np.uint32)
        )
        ends = np.flatnonzero(chars == 10)  # [n_words - 1] where each word but the last ends
        return np.diff(np.concatenate([[-1], ends, [len(text)]])) - 1

    @functools.cached_property
    def _longest(self) -> int:
        return int(self._lengths.max()) if len(self) else 0

    @property
    def _joined_text(self) -> str:
        """The words joined by newlines."""
        return self._joined[1:-1] if self._joined is not None else "\n".join(self.words)

    def _within2(self, w: str) -> str | None:
        """Most frequent word at edit distance 2 or less (optimal string alignment), or None.

        Filter first, vectorised over the table's letter counts: each edit adds
        at most one letter and removes at most one, so a candidate shares all
        but 2 of its letters with ``w`` (counted as multisets, every other
        character in one bucket: a safe superset). Then the exact distance,
        in frequency order.
        """
        import numpy as np

        counts, lengths = self._letter_counts, self._lengths
        want: dict[int, int] = {}
        for c in w:
            bucket = _BUCKETS.find(c) if c in _BUCKETS[:-1] else len(_BUCKETS) - 1
            want[bucket] = want.get(bucket, 0) + 1
        common = np.zeros(len(lengths), dtype=np.int16)  # [n_words] letters shared with w
        for bucket, n in want.items():  # only w's letters can be shared: a few rows of the counts
            common += np.minimum(counts[bucket], min(n, 255))
        ok = (lengths - common <= 2) & (len(w) - common <= 2)
        for i in np.flatnonzero(ok):  # frequency order
            word = self.words[i]
            if _osa_distance(w, word.lower(), 2) <= 2:
                return word
        return None

    def unknown(self, words: list[str]) -> AttnError:
        """The one-line error naming the unknown words (the first NAMED of
        them, and how many in all), with suggestions where there are some."""
        words = list(dict.fromkeys(words))  # unique, in order
        message = f"unknown {noun(len(words), 'word')} {named_words(words)}"
        words = words[:NAMED]  # suggestions for the words named: bounded work, however many are unknown
        suggestions = {w: self.suggest(w) for w in words}
        found = [s for s in suggestions.values() if s]
        hint: str | None
        if found and len(found) == len(words):
            hint = f"did you mean {_quote_list(found)}?"
        elif found:
            hint = "did you mean " + ", ".join(f"{s!r} for {w!r}" for w, s in suggestions.items() if s) + "?"
        elif self.partial:
            hint = f"not in {self.name}" if self.name else None
        else:
            hint = f"not among the {len(self):,} words of {self.name}" if self.name else None
        return AttnError(message, hint=hint)


def phrase_words(text: str) -> list[str]:
    """Words of a phrase: split on whitespace, strip punctuation from each word's ends."""
    return [t for t in (tok.strip(_PUNCT) for tok in text.split()) if t]


_BUCKETS = _LETTERS + "-'" + "?"  # the letter-count filter's buckets; the last one is every other character


def _edits1(w: str) -> set[str]:
    splits = [(w[:i], w[i:]) for i in range(len(w) + 1)]
    alphabet = _LETTERS + "-'"
    deletes = [a + b[1:] for a, b in splits if b]
    transposes = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1]
    replaces = [a + c + b[1:] for a, b in splits if b for c in alphabet]
    inserts = [a + c + b for a, b in splits for c in alphabet]
    return set(deletes + transposes + replaces + inserts)


def _osa_distance(a: str, b: str, limit: int) -> int:
    """Edit distance with adjacent transpositions; stops early once every path exceeds limit."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _most_frequent(candidates: Iterable[str], index: dict[str, int]) -> str | None:
    known = [(index[c], c) for c in candidates if c in index]
    return min(known)[1] if known else None


def _finite(v: np.ndarray, words: list[str], source: str) -> np.ndarray:
    import numpy as np

    bad = ~np.isfinite(v).all(axis=1)
    if bad.any():
        r = int(np.argmax(bad))
        value = v[r][~np.isfinite(v[r])][0]
        raise AttnError(f"row {r + 1} {words[r]!r} has a non-finite value ({value})", source=source)
    return v


# --- the bundled table ------------------------------------------------------


def _from_npz(z, source: str) -> tuple[str, np.ndarray]:
    """Words and float32 vectors from an NpzFile holding ``vectors`` and the words.

    ``vectors`` is float, or int8 with ``scales`` [n] (x = q * scale); the words
    are ``words`` (uint8: UTF-8 joined by newlines; or a 1-D array of strings,
    bytes read as UTF-8) or ``words_zlib`` (the joined bytes, zlib-compressed).
    """
    import zlib

    import numpy as np

    from attncli.readers.arrays import label_strings

    names = set(z.files)
    if "vectors" not in names or not names & {"words", "words_zlib"}:
        raise AttnError(
            f"an .npz of word vectors needs arrays 'vectors' and 'words' (found {sorted(names)})", source=source
        )
    v = z["vectors"]
    if v.ndim != 2:
        raise AttnError(f"'vectors' must be 2-D [n_words, dim], found shape {v.shape}", source=source)
    if "scales" in names:
        scales = z["scales"]
        if v.dtype != np.int8 or scales.shape != (v.shape[0],):
            raise AttnError(
                f"'scales' {scales.shape} needs int8 'vectors' with one scale per row, found {v.dtype} {v.shape}",
                source=source,
            )
        v = v.astype(np.float32)
        v *= scales.astype(np.float32)[:, None]
    elif v.dtype.kind != "f":
        raise AttnError(f"'vectors' must hold floats, found {v.dtype}", source=source)
    listed = z["words"] if "words_zlib" not in names else None
    if listed is not None and listed.ndim == 1 and listed.dtype.kind in "US":  # np.array(["the", "apple", ...])
        words = _joined(label_strings(listed, source, "words"), source)
    else:
        raw = z["words_zlib"].tobytes() if listed is None else listed.tobytes()
        try:
            raw = raw if listed is not None else zlib.decompress(raw)
            words = raw.decode("utf-8")
        except zlib.error:
            raise AttnError("the words_zlib array is not zlib-compressed", source=source) from None
        except UnicodeDecodeError as e:
            raise AttnError(
                f"the words array is not newline-joined UTF-8 (byte {e.start + 1:,} is not UTF-8)", source=source
            ) from None
    n_words = words.count("\n") + 1
    if n_words != v.shape[0]:
        raise AttnError(f"{n_words} words but {v.shape[0]} vectors", source=source)
    v = v.astype(np.float32, copy=False)
    finite = np.isfinite(z["scales"]).all() if "scales" in names else np.isfinite(v).all()
    if not finite:  # int8 times finite scales is finite: only the scales need a look
        _finite(v, words.split("\n"), source)
    return words, v


def _joined(words: list[str], source: str) -> str:
    """Words from an array of strings, newline-joined as a table holds them."""
    for i, word in enumerate(words):
        if not word.strip() or "\n" in word:
            raise AttnError(
                f"words entry {i + 1} ({word!r}) is not a word",
                source=source,
                hint="each entry of the words array is one word: not blank, no line break",
            )
    return "\n".join(words)


@functools.lru_cache(maxsize=1)
def load_default() -> WordVectors:
    """The bundled GloVe 6B 50d table (140,000 words, dim 50), float32, loaded once."""
    from importlib import resources

    import numpy as np

    data = resources.files("attncli").joinpath("data").joinpath(DEFAULT_TABLE).read_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        words, v = _from_npz(z, DEFAULT_TABLE)
    return WordVectors(words, v, name=DEFAULT_NAME)
