"""Reading your own word vectors: GloVe text, word2vec/fastText text or
binary, ``.npy`` + a words file, ``.npz``; gzip or not.

Given the words that are wanted, ``read_vectors`` streams the file and stops as
soon as it has them all, so looking up four words in a 1 GB file does not
parse the whole file.
"""

from __future__ import annotations

import codecs
import io
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, BinaryIO

from attncli.errors import AttnError, file_error
from attncli.readers.arrays import check_npy_stream, check_npz
from attncli.readers.base import NPY_MAGIC, read_all
from attncli.readers.limits import ELEMENTS, LINE, check_fits_in_memory
from attncli.text import parse_number, plural
from attncli.vectors.table import SUPPORTED, VECTOR_FORMATS, WordVectors, _finite, _from_npz

if TYPE_CHECKING:
    import numpy as np


# --- reading your own vectors -----------------------------------------------


def read_vectors(
    source: str | os.PathLike | BinaryIO,
    *,
    format: str | None = None,
    words: str | os.PathLike | BinaryIO | None = None,
    wanted: Iterable[str] | None = None,
    name: str | None = None,
) -> WordVectors:
    """Read a word-vector file: a path or a binary stream.

    Formats (``format=None`` detects them from the content):

    - ``glove``: text, ``word x1 ... xd`` per line, no header;
    - ``word2vec``: text with a first line ``N DIM`` (word2vec, fastText .vec);
    - ``word2vec-binary``: the line ``N DIM``, then per entry the word, a
      space and DIM little-endian float32 (an optional newline between entries);
    - ``npy``: a [n_words, dim] float matrix, with ``words``: a text file of
      one word per line, in the same order;
    - ``npz``: arrays ``vectors`` and ``words`` (UTF-8 joined by newlines), as
      written by scripts/build_vectors.py.

    gzip-compressed files are read as they are. ``wanted``: keep only these
    words (matched case-insensitively), and stop reading as soon as each has
    been found. Every line read is checked for its count of fields; the
    numbers are parsed and checked only on kept lines. The result is then
    ``partial``: unknown words get no suggestion.

    Raises AttnError naming the file and line for an empty file, a header
    that disagrees with the content, a line with the wrong count of numbers,
    a non-number, NaN or infinity, binary garbage or text that is not UTF-8.
    """
    src_name = name or _name_of(source)
    fmt = format
    if fmt is not None and fmt not in VECTOR_FORMATS:
        raise ValueError(f"format must be one of {VECTOR_FORMATS}, not {fmt!r}")
    want = _Wanted(wanted) if wanted is not None else None
    with _open_binary(source) as f:
        head = f.peek(4096)[:4096]
        if head[:2] == b"\x1f\x8b":
            import gzip
            import zlib

            try:
                with gzip.GzipFile(fileobj=f) as g:
                    return read_vectors(io.BufferedReader(g), format=format, words=words, wanted=wanted, name=src_name)
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                detail = (str(e).splitlines() or [""])[0] or type(e).__name__
                raise AttnError(f"is a damaged or truncated gzip file ({detail})", source=src_name) from None
        if not head:
            raise AttnError("empty file, no word vectors", source=src_name, hint=f"expected {SUPPORTED}")
        if fmt is None:
            fmt = _detect(head, src_name)
        if fmt in ("npy", "npz"):
            return _read_numpy(f, fmt, words, want, src_name)
        if words is not None:
            raise AttnError(f"a words file goes with a .npy matrix, not with {fmt} vectors", source=src_name)
        if fmt == "word2vec-binary":
            return _read_w2v_binary(f, want, src_name)
        return _read_text(f, fmt, want, src_name)


def _name_of(source: str | os.PathLike | BinaryIO) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else "<stream>"


class _open_binary:
    """A buffered binary reader (with peek) for a path or a stream; closes only what it opened."""

    def __init__(self, source: Any) -> None:  # a path or a binary stream
        self.source = source
        self.opened: io.BufferedReader | None = None
        self.wrapper: io.BufferedReader | None = None

    def __enter__(self) -> io.BufferedReader:
        s = self.source
        if isinstance(s, (str, os.PathLike)):
            try:
                self.opened = open(s, "rb")
            except OSError as e:
                raise file_error(os.fspath(s), e) from None
            return self.opened
        if isinstance(s, io.TextIOBase):
            s = getattr(s, "buffer", None) or io.BytesIO(s.read().encode("utf-8"))
        if hasattr(s, "peek"):
            return s
        self.wrapper = io.BufferedReader(s)  # type: ignore[arg-type]
        return self.wrapper

    def __exit__(self, *exc) -> None:
        if self.opened is not None:
            self.opened.close()
        if self.wrapper is not None and not self.wrapper.closed:
            self.wrapper.detach()  # leave the caller's stream open


def _detect(head: bytes, source: str) -> str:
    """Format from the first bytes of a file."""
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith(b"PK\x03\x04"):
        return "npz"  # a zip: numpy's .npz (a zipped GloVe download fails there with a hint)
    first, nl, rest = head.removeprefix(b"\xef\xbb\xbf").partition(b"\n")
    if word2vec_header(first) is not None:
        if _looks_binary(rest):
            return "word2vec-binary"
        return "word2vec"
    return "glove"


def _looks_binary(data: bytes) -> bool:
    """True if data holds control bytes or invalid UTF-8 (raw float32s almost always do)."""
    if any(b < 0x20 and b not in (9, 10, 13) for b in data):
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return True
    return False


def word2vec_header(line: bytes | str) -> tuple[int, int] | None:
    """(N, DIM) from the first line of a word2vec file, ``N DIM`` (two whole
    numbers in ASCII digits), or None when the line is not such a header."""
    fields = line.split()
    if len(fields) != 2 or not all(f.isascii() and f.isdigit() and len(f) <= 18 for f in fields):
        return None  # (19 digits and more: no count of words, and int() refuses 4,300)
    return int(fields[0]), int(fields[1])


def _checked_header(line: bytes | str, source: str, found: str | None = None) -> tuple[int, int]:
    """``word2vec_header`` of a file said to be word2vec: an error unless the
    line is a header of vectors with at least one dimension."""
    header = word2vec_header(line)
    if header is None:
        shown = "" if found is None else f", found {found!r}"
        raise AttnError(f"expected a word2vec header 'N DIM'{shown}", source=source, line=1)
    if header[1] == 0:
        raise AttnError("the header says the vectors have 0 dimensions", source=source, line=1)
    if header[1] > ELEMENTS.value():
        raise AttnError(
            f"the header says the vectors have {header[1]:,} dimensions, more than the limit of "
            f"{ELEMENTS.value():,} values",
            source=source,
            line=1,
            hint=f"a damaged header? set {ELEMENTS.variable} to raise the limit",
        )
    return header


class _Wanted:
    """The words to keep: matched by casefold; 'found' once seen exactly or in lowercase."""

    def __init__(self, words: Iterable[str]) -> None:
        words = list(words)
        self.folded = {w.casefold() for w in words}
        self.pending = {w for w in words} | {w.lower() for w in words}
        self.groups = [{w, w.lower()} for w in words]

    def keep(self, word: str) -> bool:
        return word.casefold() in self.folded

    def see(self, word: str) -> None:
        self.pending.discard(word)

    def done(self) -> bool:
        return all(not (g <= self.pending) for g in self.groups)


def _read_text(f: BinaryIO, fmt: str, want: _Wanted | None, source: str) -> WordVectors:
    import numpy as np

    hint = f"expected {SUPPORTED}"
    words: list[str] = []
    numbers: list[str] = []  # the numbers of kept lines, parsed 8192 lines at a time
    lines: list[int] = []
    blocks: list[np.ndarray] = []
    dim: int | None = None
    declared: int | None = None
    lineno = entries = 0
    longest = LINE.value()
    while raw := f.readline(longest + 1):  # a line at most this long: /dev/zero has no newline
        lineno += 1
        if len(raw) > longest and not raw.endswith(b"\n"):
            LINE.check(len(raw), source, line=lineno)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise AttnError("not UTF-8 text (a binary file?)", source=source, line=lineno, hint=hint) from None
        if lineno == 1:
            line = line.lstrip("\ufeff")
            if fmt == "word2vec":
                declared, dim = _checked_header(line, source, found=line.strip()[:40])
                continue
        line = line.rstrip("\r\n").rstrip(" ")  # word2vec and fastText end lines with a space
        if not line:
            continue  # empty lines (such as trailing ones) are skipped
        if _has_control(line):
            raise AttnError(
                "control characters in a text vector file (a binary file?)", source=source, line=lineno, hint=hint
            )
        entries += 1
        if declared is not None and entries > declared:
            raise AttnError(
                f"more entries than the {declared} the header on line 1 declares", source=source, line=lineno
            )
        if dim is not None and line.count(" ") == dim and line[0] != " ":  # fast path: "word x1 ... xd"
            cut = line.index(" ")
            word, rest = line[:cut], line[cut + 1 :]
        else:
            parts = line.split()
            if dim is None:  # GloVe: the first line fixes the dimension
                dim = _count_numbers(parts)
                if dim == 0:
                    problem = (
                        f"{parts[-1][:40]!r} is not a number"
                        if len(parts) > 1
                        else f"no numbers after the word {parts[0][:40]!r}"
                    )
                    raise AttnError(problem, source=source, line=lineno, hint=hint)
            if len(parts) < dim + 1 or (len(parts) > dim + 1 and parse_number(parts[-dim - 1]) is not None):
                found = len(parts) - 1 if len(parts) < dim + 1 else _count_numbers(parts)
                raise AttnError(
                    f"expected {plural(dim, 'number')} after the word, found {found}", source=source, line=lineno
                )
            word, rest = " ".join(parts[:-dim]), " ".join(parts[-dim:])  # GloVe 840B has words with spaces
        if want is not None and not want.keep(word):
            continue
        words.append(word)
        numbers.append(rest)
        lines.append(lineno)
        if len(numbers) == 8192:
            blocks.append(_parse_numbers(numbers, dim, words[-len(numbers) :], lines, source))
            numbers, lines = [], []
        if want is not None:
            want.see(word)
            if want.done():
                break
    else:  # read to the end: check the whole file
        if dim is None:
            raise AttnError("empty file, no word vectors", source=source, hint=hint)
        if declared is not None and entries != declared:
            raise AttnError(f"the header says {declared} words but the file has {entries}", source=source, line=1)
    if numbers:
        blocks.append(_parse_numbers(numbers, dim, words[-len(numbers) :], lines, source))
    v = np.concatenate(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
    return WordVectors(words, v, name=source, partial=want is not None)


def _parse_numbers(numbers: list[str], dim: int, words: list[str], lines: list[int], source: str) -> np.ndarray:
    """[len(numbers), dim] float32 from lines of dim numbers each; AttnError at the first bad line."""
    import warnings

    import numpy as np

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns, then stops, at a non-number
            v = np.fromstring(" ".join(numbers), dtype=np.float32, sep=" ")
    except (ValueError, DeprecationWarning):
        v = np.zeros(0, dtype=np.float32)
    if v.size != len(numbers) * dim:  # find the culprit the slow way
        for text, word, line in zip(numbers, words, lines, strict=True):
            if len(text.split()) != dim:
                raise AttnError(
                    f"expected {plural(dim, 'number')} after the word, found {len(text.split())}",
                    source=source,
                    line=line,
                )
            bad = next((t for t in text.split() if parse_number(t) is None), None)
            if bad is not None:
                raise AttnError(f"{bad[:40]!r} is not a number (word {word[:40]!r})", source=source, line=line)
        raise AttnError("unreadable numbers", source=source, line=lines[0])
    v = v.reshape(len(numbers), dim)
    bad_rows = ~np.isfinite(v).all(axis=1)
    if bad_rows.any():
        r = int(np.argmax(bad_rows))
        raise AttnError(
            f"{words[r]!r} has a non-finite value ({v[r][~np.isfinite(v[r])][0]})", source=source, line=lines[r]
        )
    return v


def _count_numbers(parts: list[str]) -> int:
    """How many trailing fields are numbers, leaving at least one field for the word."""
    n = 0
    for t in reversed(parts[1:]):
        if parse_number(t) is None:
            break
        n += 1
    return n


_CONTROL = None


def _has_control(text: str) -> bool:
    global _CONTROL
    if _CONTROL is None:
        import re

        _CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
    return _CONTROL.search(text) is not None


def _read_w2v_binary(f: BinaryIO, want: _Wanted | None, source: str) -> WordVectors:
    import numpy as np

    declared, dim = _checked_header(f.readline(), source)
    size = 4 * dim
    words: list[str] = []
    rows: list[bytes] = []
    n = 0
    while n < declared:
        word_bytes = _read_word(f, n + 1, source)
        if word_bytes is None:
            break  # end of file; the count check below reports it
        vec = f.read(size)
        if len(vec) < size:
            raise AttnError(f"entry {n + 1}: the file ends inside a vector ({len(vec)} of {size} bytes)", source=source)
        n += 1
        try:
            word = word_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise AttnError(f"entry {n}: the word is not UTF-8 (not word2vec binary?)", source=source) from None
        if not word or _has_control(word):
            raise AttnError(f"entry {n}: bad word {word[:40]!r} (not word2vec binary?)", source=source)
        if want is not None and not want.keep(word):
            continue
        x = np.frombuffer(vec, dtype="<f4")
        if not np.isfinite(x).all():
            raise AttnError(f"entry {n} {word!r} has a non-finite value ({x[~np.isfinite(x)][0]})", source=source)
        words.append(word)
        rows.append(vec)
        if want is not None:
            want.see(word)
            if want.done():
                break
    else:
        if f.read().strip(b"\r\n"):
            raise AttnError(f"more entries than the {declared} the header on line 1 declares", source=source)
    if want is None or not want.done():
        if n != declared:
            raise AttnError(f"the header says {declared} words but the file has {n}", source=source, line=1)
    v = np.frombuffer(b"".join(rows), dtype="<f4").reshape(len(rows), dim).astype(np.float32)
    return WordVectors(words, v, name=source, partial=want is not None)


def _read_word(f, entry: int, source: str) -> bytes | None:
    """The bytes of one word2vec-binary word up to its space (skipping newlines before it); None at EOF."""
    buf = bytearray()
    while True:
        chunk = f.peek(1)
        if not chunk:
            if buf.lstrip(b"\r\n"):
                raise AttnError(f"entry {entry}: the file ends inside a word", source=source)
            return None
        j = chunk.find(b" ")
        if j >= 0:
            buf += chunk[:j]
            f.read(j + 1)
            return bytes(buf.lstrip(b"\r\n"))
        buf += chunk
        f.read(len(chunk))
        if len(buf) > 1000:
            raise AttnError(
                f"entry {entry}: no space after a word within 1000 bytes (not word2vec binary?)", source=source
            )


def _read_numpy(f: BinaryIO, fmt: str, words_src, want: _Wanted | None, source: str) -> WordVectors:
    import numpy as np

    data = f if f.seekable() else io.BytesIO(read_all(f, source))  # np.load needs seek
    if fmt == "npy":
        check_npy_stream(data, source)
    try:
        loaded = np.load(data, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError/OSError/zipfile errors for broken files
        hint = "unzip a downloaded glove.*.zip first" if fmt == "npz" else None
        detail = (str(e).splitlines() or [""])[0] or type(e).__name__
        raise AttnError(f"not a readable .{fmt} file ({detail})", source=source, hint=hint) from None
    if fmt == "npz" or not isinstance(loaded, np.ndarray):
        if isinstance(loaded, np.ndarray):
            raise AttnError("expected an .npz archive", source=source)
        with loaded as z:
            check_npz(z, source)
            check_fits_in_memory(sum(info.file_size for info in z.zip.infolist()), source, "its arrays expand to")
            names = z.files
            if "vectors" not in names:
                raise AttnError(
                    f"a zip that is not an .npz of word vectors (arrays: {names[:5]})",
                    source=source,
                    hint="unzip a downloaded glove.*.zip first",
                )
            joined, v = _from_npz(z, source)
            words = joined.split("\n")
    else:
        v = loaded
        if words_src is None:
            raise AttnError("a .npy matrix needs a words file (one word per line, in row order)", source=source)
        if v.ndim != 2 or v.dtype.kind not in "fiu":
            raise AttnError(
                f"expected a 2-D [n_words, dim] matrix of numbers, found {v.dtype} {v.shape}", source=source
            )
        words = _read_words(words_src)
        wname = _name_of(words_src)
        if len(words) != v.shape[0]:
            raise AttnError(f"{len(words)} words but the matrix {source} has {v.shape[0]} rows", source=wname)
        v = _finite(v.astype(np.float32), words, source)
    if want is not None:
        keep = [i for i, w in enumerate(words) if want.keep(w)]
        words, v = [words[i] for i in keep], v[keep]
    return WordVectors(words, v, name=source, partial=want is not None)


def _read_words(src) -> list[str]:
    """A words file: one word per line (trailing newline optional)."""
    name = _name_of(src)
    with _open_binary(src) as f:
        raw = read_all(f, name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise AttnError("not UTF-8 text", source=name, line=line) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    words = [w.rstrip("\r") for w in lines]
    for i, w in enumerate(words):
        if not w.strip():
            raise AttnError("blank line in a words file", source=name, line=i + 1)
    if not words:
        raise AttnError("empty words file", source=name)
    return words
