"""What every reader shares: the Input it reads, the Request saying what the
caller expects, the Matrix and Bundle it returns, and the checks on numbers,
so that each format reports problems the same way."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from attncli.errors import AttnError, file_error
from attncli.readers.limits import STREAM_BYTES


@dataclass
class Matrix:
    """A 2-D array with optional row and column names; read as a tensor
    (``Request.tensors``), [..., rows, cols] of any rank ≥ 2, the names
    being those of the last two axes."""

    values: Any  # np.ndarray [rows, cols] (tensors: [..., rows, cols]): float, or bool for a mask
    row_labels: list[str] | None = None
    col_labels: list[str] | None = None
    vector: bool = False  # written as a flat list or a 1-D array (held as one row)
    choices: list[Choice] = field(default_factory=list)  # readings the reader chose where two were possible

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape


NPY_MAGIC = b"\x93NUMPY"  # the first bytes of an NPY file
NPZ_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # of an NPZ (a zip archive; the second is an empty one)

LONE = ""  # the key of the one matrix of an input that holds a single matrix


@dataclass
class Bundle:
    """Named matrices from one input (q, k, v, ...) and its plain settings.

    An input that holds a single matrix (a CSV file, an NPY array, a YAML list
    of rows) is a one-entry bundle keyed ``LONE``: see ``single`` and ``matrix``.
    """

    matrices: dict[str, Matrix]
    meta: dict[str, Any] = field(default_factory=dict)  # plain settings: description, scale, causal, ...
    lines: dict[str, int] = field(default_factory=dict)  # where each entry is, when the format has lines

    @classmethod
    def of(cls, matrix: Matrix) -> Bundle:
        """The one-entry bundle of an input that holds a single matrix."""
        return cls({LONE: matrix})

    @property
    def single(self) -> bool:
        """Was the input read as one matrix rather than as named entries?"""
        return list(self.matrices) == [LONE]

    @property
    def choices(self) -> list[Choice]:
        """The readings chosen where its matrices could be read two ways."""
        return [c for m in self.matrices.values() for c in m.choices]

    def matrix(self) -> Matrix:
        """The matrix of a single-matrix input."""
        if not self.single:
            raise ValueError(f"a bundle of {', '.join(self.matrices)}, not a single matrix")
        return self.matrices[LONE]


@dataclass(frozen=True)
class TextSettings:
    """How to read CSV/TSV/whitespace text where the file alone may not say.
    None: decide from the file by the documented rules (see ``readers.layout``)."""

    header: bool | None = None  # the first row holds column names
    labels: bool | None = None  # the first column holds row names
    delimiter: str | None = None  # between cells: ",", ";", "\t", ...
    decimal: str | None = None  # "." or ","


@dataclass(frozen=True)
class Choice:
    """A reading the reader chose where the input allows two. The caller says
    so (the CLI in one note), naming how to ask for the other reading: the
    ``TextSettings`` field ``setting`` set to ``other``."""

    message: str  # what was decided and why, in data terms
    source: str
    line: int | None
    setting: str  # a TextSettings field
    other: Any  # its value that picks the other reading
    other_reading: str  # what that value does: "reads it as data"


class NotABundle(AttnError):
    """Named matrices were asked of a format that holds one matrix (CSV, NPY, ...).

    A caller that knows what the user should do instead replaces the hint."""


class Input:
    """One input to read: a file, opened only when its bytes are needed and
    read at most once (a FIFO or ``<(…)`` can be read only once), or bytes
    already read (stdin, tests). ``name`` is how errors name it."""

    def __init__(self, name: str, *, path: str | os.PathLike[str] | None = None, data: bytes | None = None) -> None:
        if (path is None) == (data is None):
            raise ValueError("an Input is a path or bytes")
        self.name = name
        self.path = None if path is None else os.fspath(path)
        self._data = data

    @classmethod
    def file(cls, path: str | os.PathLike[str], name: str | None = None) -> Input:
        return cls(os.fspath(path) if name is None else name, path=path)

    @classmethod
    def of(cls, source: Input | bytes | str | os.PathLike[str], name: str | None = None) -> Input:
        """An Input from a path or from bytes (which need a ``name`` for errors)."""
        if isinstance(source, Input):
            return source
        if isinstance(source, (bytes, bytearray, memoryview)):
            if name is None:
                raise ValueError("bytes need a name to report errors by")
            return cls(name, data=bytes(source))
        return cls.file(source, name)

    def __repr__(self) -> str:
        return f"Input({self.name!r}, path={self.path!r})"

    @property
    def suffix(self) -> str:
        """The extension of the file (else of the name), lowercase with its dot ('.csv'), or ''."""
        base = (self.path or self.name).rsplit("/", 1)[-1]
        return base[base.rfind(".") :].lower() if "." in base else ""

    def data(self) -> bytes:
        """The whole input, read on first use (a pipe or device once, see ``read_all``)."""
        if self._data is None:
            assert self.path is not None
            try:
                with open(self.path, "rb") as f:
                    self._data = read_all(f, self.name)
            except OSError as e:
                raise file_error(self.name, e) from None
        return self._data

    @property
    def mappable(self) -> bool:
        """Can it be memory-mapped rather than read: a regular file not read yet?"""
        return self.path is not None and self._data is None and os.path.isfile(self.path)


STREAM_CHUNK = 1 << 24  # bytes read from a pipe at a time


def read_all(f: BinaryIO, name: str) -> bytes:
    """Every byte of an open binary file. A regular file is read in one go; a
    pipe, a FIFO or a device (stdin, ``<(…)``, /dev/zero) in chunks, up to the
    STREAM_BYTES limit, since nothing says how much it holds or that it ends."""
    try:
        regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):  # not a real file: a stream
        regular = False
    if regular:
        return f.read()
    limit, chunks, size = STREAM_BYTES.value(), [], 0
    while chunk := f.read(min(STREAM_CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise AttnError(
                f"holds more than {limit:,} bytes, the limit for stdin, a pipe or a device",
                source=name,
                hint=f"save it to a file, or set {STREAM_BYTES.variable} to raise the limit",
            )
    return b"".join(chunks)


@dataclass(frozen=True)
class Request:
    """What the caller expects an input to hold."""

    mask: bool = False  # a mask: booleans, true/false cells and -inf accepted; a bundle's "mask" entry always is
    bias: bool = False  # a bias: -inf accepted (no booleans); a bundle's "bias" entry always is
    text: TextSettings = TextSettings()  # how to read CSV/TSV/text
    bundle: bool = False  # named matrices (q, k, v, ...), never one matrix
    bundle_if: frozenset[str] = frozenset()  # else: named matrices when it has one of these entries (any case)
    settings: frozenset[str] = frozenset()  # a bundle's entries that are settings even when lists (window: [3, 0])
    tensors: bool = False  # any rank ≥ 2 ([..., rows, cols]) in the stored float dtype (NPY, NPZ, safetensors)
    finite: bool = True  # refuse NaN and infinities (a kernel's output under check may hold them)

    def is_bundle(self, names: Iterable[Any]) -> bool:
        """Read an input holding entries ``names`` as named matrices?"""
        return self.bundle or any(str(name).lower() in self.bundle_if for name in names)

    @property
    def special(self) -> bool:
        """May cells hold -inf (a mask or a bias)?"""
        return self.mask or self.bias

    def entry(self, name: str) -> Request:
        """How to read the bundle entry ``name``: ``mask`` is a mask, ``bias`` a bias, the rest numbers."""
        role = entry_key(name)
        return Request(mask=role == "mask", bias=role == "bias", text=self.text, tensors=self.tensors)


NUMBERS = Request()  # the default request: one matrix of numbers, text read as its own layout says
BY_FILE = TextSettings()  # every text setting decided from the file itself


def entry_key(name: Any) -> str:
    """A bundle entry's or setting's name as compared: case and - vs _ do not count."""
    return str(name).lower().replace("-", "_")


def check_distinct(names: Iterable[Any], source: str, lines: dict[Any, int] | None = None) -> None:
    """Refuse a bundle whose entries differ only in case (q and Q): which one is meant?"""
    seen: dict[str, Any] = {}
    for name in names:
        key = entry_key(name)
        if key in seen:
            raise AttnError(
                f"has both {seen[key]!r} and {name!r}, which name the same entry",
                source=source,
                line=(lines or {}).get(name),
                hint="entry names ignore case: keep one of them",
            )
        seen[key] = name


def decode_text(data: bytes, source: str) -> str:
    """Text from bytes: UTF-8 (with or without a BOM) or UTF-16/32 with a BOM;
    anything else is refused naming what it probably is (see ``encodings``)."""
    from attncli.readers.encodings import decode

    if not data.strip():
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    text = decode(data, source)
    if not text.strip():
        raise AttnError("the file is empty", source=source, hint="expected rows of numbers")
    return text


CHECK_BLOCK = 1 << 20  # cells checked at a time for NaN/inf


def first_bad(values: Any, mask: bool) -> tuple[int, ...] | None:
    """(row, col) of the first NaN/inf (a mask may hold -inf), or None; for a
    tensor [..., rows, cols], the index of every axis."""
    import numpy as np

    if values.dtype == bool:
        return None
    shape = values.shape
    flat = values.reshape(-1, shape[-1]) if values.ndim > 2 else values
    step = max(1, CHECK_BLOCK // max(1, flat.shape[1]))
    for start in range(0, flat.shape[0], step):  # in blocks: a mapped file is never read whole
        block = np.asarray(flat[start : start + step], dtype=np.float64 if flat.dtype.itemsize > 4 else np.float32)
        bad = np.isnan(block) | (np.isposinf(block) if mask else np.isinf(block))
        if bad.any():
            i, j = np.argwhere(bad)[0]
            return tuple(int(n) for n in np.unravel_index(start * flat.shape[1] + i * flat.shape[1] + j, shape))
    return None


def not_finite(value: float, mask: bool) -> str:
    allowed = " (a mask may hold -inf)" if mask else ""
    return f"{value} is not a finite number{allowed}"


def checked_labels(labels: list[str] | None, count: int, source: str, what: str) -> list[str] | None:
    if labels is not None and len(labels) != count:
        raise AttnError(f"{what} has {len(labels)} names for {count} entries", source=source)
    return labels
