"""NPY and NPZ: float arrays only, never unpickled, checked like text.

``read_npy`` memory-maps a float NPY file rather than reading it, so that a K
or V larger than memory streams through the kernel one block at a time.
Read as tensors (``Request.tensors``), arrays keep their rank and their
stored float dtype (float16 stays float16); otherwise they are 2-D matrices
of float32 or float64.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from attncli.errors import AttnError
from attncli.readers.base import (
    NPY_MAGIC,
    NUMBERS,
    Bundle,
    Input,
    Matrix,
    Request,
    check_distinct,
    checked_labels,
    entry_key,
    first_bad,
    not_finite,
)
from attncli.readers.limits import check_fits_in_memory
from attncli.text import clip


def read_npy(source: Input, request: Request) -> Bundle:
    """One matrix from an NPY array: memory-mapped from a file when it holds floats."""
    array = map_npy(source.path, source.name) if source.mappable and source.path is not None else None
    if array is None:
        array = load_npy(source.data(), source.name)
    return Bundle.of(matrix_from_array(array, source.name, "", request))


def read_npz(source: Input, request: Request) -> Bundle:
    """An NPZ archive: named matrices, or with one array, one matrix.

    Each array is a matrix; ``<name>_labels`` and ``<name>_columns`` string
    arrays name its rows and columns. Read as named matrices, the array
    ``mask`` is a mask and ``bias`` a bias, 0-D arrays are settings
    (``np.savez(f, q=q, k=k, v=v, causal=True)``), and names that differ only
    in case are refused; read as one matrix, it is read as ``request`` asks.
    """
    arrays = _load_npz(source.data(), source.name)
    if request.is_bundle(arrays):
        check_distinct(arrays, source.name)
        settings = {
            name: array for name, array in arrays.items() if array.ndim == 0 or entry_key(name) in request.settings
        }
        bundle = _arrays_bundle({n: a for n, a in arrays.items() if n not in settings}, source.name, request.entry)
        bundle.meta = {
            name: utf8(a.item(), source.name, name) if a.dtype.kind == "S" else a.tolist()
            for name, a in settings.items()
        }
        return bundle
    bundle = _arrays_bundle(arrays, source.name, lambda name: request)
    if len(bundle.matrices) != 1:
        names = ", ".join(bundle.matrices) or "none"
        raise AttnError(
            f"holds several arrays ({names}), expected one matrix",
            source=source.name,
            hint="pass it as the only file to read it as a bundle",
        )
    return Bundle.of(next(iter(bundle.matrices.values())))


def load_npy(data: bytes, source: str) -> Any:
    """An ndarray from NPY bytes, without ever unpickling."""
    import numpy as np

    if not data.startswith(NPY_MAGIC):
        raise AttnError(
            "is not an NPY file (it does not start with \\x93NUMPY)",
            source=source,
            hint="name CSV/YAML/JSON files by their extension",
        )
    npy_header(io.BytesIO(data), len(data), source)
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as e:  # numpy's errors for damaged bytes vary: ValueError, TokenError, ...
        raise unreadable(e, source, "is truncated or damaged") from None


def unreadable(e: Exception, source: str, what: str) -> AttnError:
    """One line for whatever numpy or zipfile raised on bytes they could not read
    (their own words in parentheses: tests match attn's words before them)."""
    if isinstance(e, AttnError):
        return e
    if "allow_pickle" in str(e):  # an object array in an NPY format npy_header leaves to numpy (3.0)
        return pickled(source)
    if isinstance(e, MemoryError):
        return AttnError("is too large to load into memory", source=source)
    detail = (str(e).splitlines() or [""])[0] or type(e).__name__
    return AttnError(f"{what} ({detail})", source=source)


def pickled(source: str) -> AttnError:
    return AttnError(
        "holds Python objects (pickled data), which attn never loads",
        source=source,
        hint="save a float array: np.save(f, a.astype(float))",
    )


@dataclass(frozen=True)
class NpyHeader:
    """What an NPY header declares, and how many bytes it takes."""

    shape: tuple[int, ...]
    dtype: Any  # np.dtype
    offset: int  # bytes from the magic to the data


def npy_header(f: BinaryIO, size: int, source: str, where: str = "") -> NpyHeader | None:
    """The header of the NPY array that ``f`` (``size`` bytes from where it
    stands) starts with, checked against the data that follows: a declared
    shape that the bytes do not hold (truncated, or a header claiming 10¹²×10¹²
    over a few bytes, which numpy's mmap and reshape overflow on) or bytes past
    the array (two arrays saved into one file) are refused in attn's words,
    as are object arrays (pickles), before numpy reads any data.

    None where it is not an NPY header numpy's public functions read (no
    magic, a damaged header, format 3.0): numpy's own reading then says what
    is wrong. ``f`` is left anywhere: the caller seeks back if it reads on.
    """
    import numpy as np

    fmt = np.lib.format
    prefix = f"{where}: " if where else ""
    start = f.tell()
    try:
        version = fmt.read_magic(f)  # ValueError without the magic
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if read is None:
            return None
        shape, _, dtype = read(f)
    except Exception:  # not NPY, or a damaged header: numpy's reading says how
        return None
    header = NpyHeader(tuple(shape), dtype, f.tell() - start)
    if dtype.hasobject:
        raise pickled(source)
    declared = "×".join(map(str, header.shape)) or "0-D"
    if any(n < 0 for n in header.shape):
        raise AttnError(
            f"{prefix}its NPY header declares the shape {declared}, which no array has",
            source=source,
            hint="the file is damaged",
        )
    needed = math.prod(header.shape) * dtype.itemsize  # Python ints: no overflow
    held = size - header.offset
    if needed > held:
        raise AttnError(
            f"{prefix}its NPY header declares {declared} {dtype} values ({needed:,} bytes), "
            f"but {held:,} bytes of data follow it",
            source=source,
            hint="the file is truncated or damaged",
        )
    if needed < held:
        raise AttnError(
            f"{prefix}{held - needed:,} bytes follow the {declared} {dtype} array its NPY header declares",
            source=source,
            hint="an NPY file holds one array: save several in an NPZ archive with np.savez",
        )
    return header


def check_npy_stream(f: BinaryIO, source: str) -> NpyHeader | None:
    """``npy_header`` of a seekable stream from where it stands, which it is left at."""
    start = f.tell()
    size = f.seek(0, os.SEEK_END) - start
    f.seek(start)
    try:
        return npy_header(f, size, source)
    finally:
        f.seek(start)


def map_npy(path: str, source: str) -> Any:
    """A float NPY file memory-mapped (read-only), or None to read it as bytes.

    Mapping keeps a K or V larger than memory on disk: the kernel reads it one
    block at a time. Only plain float arrays are mapped; anything else (object
    arrays, damaged files, other dtypes) returns None, so that ``load_npy``
    reports it with the usual message. A header that does not match the
    file's size is refused here (``npy_header``), before numpy maps it.
    """
    import numpy as np

    try:
        with open(path, "rb") as f:
            header = check_npy_stream(f, source)
    except OSError:
        return None
    if header is None or header.dtype.kind != "f":
        return None
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError, SyntaxError, OverflowError, MemoryError):
        return None
    return array if isinstance(array, np.memmap) and array.dtype.kind == "f" else None


def _load_npz(data: bytes, source: str) -> dict[str, Any]:
    """Every array of an NPZ archive by name, never unpickled."""
    import numpy as np

    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        if any(name.endswith("data.pkl") for name in archive.files):
            raise pytorch_file(source)
        check_npz(archive, source)
        check_fits_in_memory(sum(info.file_size for info in archive.zip.infolist()), source, "its arrays expand to")
        arrays = {name: archive[name] for name in archive.files}
        for name, array in arrays.items():
            if not isinstance(array, np.ndarray):
                raise AttnError(f"holds {name}, which is not an NPY array", source=source)
    except Exception as e:  # zipfile, zlib and numpy errors for damaged bytes
        raise unreadable(e, source, "is not a readable NPZ archive") from None
    return arrays


def check_npz(archive: Any, source: str) -> None:
    """Refuse an NPZ archive (numpy's ``NpzFile``) that names an array twice (a
    zip may hold a member name twice, or both ``q`` and ``q.npy``, and numpy
    reads one of them without a word), or whose NPY members' headers do not
    match their data (``npy_header``)."""
    seen: dict[str, str] = {}
    for member in archive.zip.namelist():
        name = member[:-4] if member.endswith(".npy") else member
        if name in seen:
            first = seen[name]
            which = f"the member {member!r} twice" if first == member else f"the members {first!r} and {member!r}"
            raise AttnError(
                f"holds two arrays named {name!r}: {which}",
                source=source,
                hint="numpy would read only one of them: save each name once",
            )
        seen[name] = member
    for info in archive.zip.infolist():
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        with archive.zip.open(info) as f:
            npy_header(f, info.file_size, source, name)


def label_strings(array: Any, source: str, what: str) -> list[str]:
    """The names in a 1-D array of strings: numpy's str (``U``) as they are,
    bytes (``S``, as h5py and older numpy code write them) decoded as UTF-8."""
    if array.dtype.kind == "U":
        return [str(s) for s in array.tolist()]
    return [utf8(raw, source, f"{what} entry {i + 1}") for i, raw in enumerate(array.tolist())]


def utf8(raw: bytes, source: str, what: str) -> str:
    """A byte string from an array as text: UTF-8, or refused naming it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AttnError(
            f"{what} is not UTF-8 text: {clip(repr(raw))}",
            source=source,
            hint="byte strings are read as UTF-8: save them as str, or encode them as UTF-8",
        ) from None


def _arrays_bundle(arrays: dict[str, Any], source: str, request_for: Callable[[str], Request]) -> Bundle:
    """The arrays of an archive as matrices, named by their ``_labels`` and ``_columns`` arrays."""
    names = {}
    for name, array in arrays.items():
        base, _, kind = name.rpartition("_")
        if kind in ("labels", "columns") and base in arrays:
            if array.dtype.kind not in "US" or array.ndim != 1:
                raise AttnError(f"{name} must be a 1-D array of strings", source=source)
            names[base, kind] = label_strings(array, source, name)
    bundle = Bundle({})
    for name, array in arrays.items():
        if name.rpartition("_")[2] in ("labels", "columns") and name.rpartition("_")[0] in arrays:
            continue
        m = matrix_from_array(array, source, name, request_for(name))
        m.row_labels = checked_labels(names.get((name, "labels")), m.shape[-2], source, f"{name}_labels")
        m.col_labels = checked_labels(names.get((name, "columns")), m.shape[-1], source, f"{name}_columns")
        bundle.matrices[name] = m
    if not bundle.matrices:
        raise AttnError("the archive holds no arrays", source=source)
    return bundle


def matrix_from_array(array: Any, source: str, where: str, request: Request = NUMBERS) -> Matrix:
    """Check an ndarray is a finite 2-D float matrix (a 1-D vector is one row,
    marked a ``vector``). A mask may be boolean; a mask or bias may hold integers.

    ``request.tensors``: any rank ≥ 2 ([..., rows, cols]) in the stored float
    dtype (float16 and bfloat16 kept for the core, which computes them in
    float32); otherwise float16 becomes float32. ``request.finite=False`` lets
    NaN and ±inf through.
    """
    import numpy as np

    prefix = f"{where}: " if where else ""
    kind = array.dtype.kind
    if kind == "b" and request.mask:
        pass
    elif kind == "f" or array.dtype.name == "bfloat16":
        if not request.tensors:
            array = array.astype(np.float64 if array.dtype.itemsize > 4 else np.float32, copy=False)
    elif kind in "iu" and request.special:
        array = array.astype(np.float64)
    elif kind == "b" and request.bias:
        raise AttnError(
            f"{prefix}holds booleans, but a bias is added to the scores",
            source=source,
            hint="booleans say where a query may attend: give them as a mask",
        )
    elif kind == "V" and array.dtype.itemsize == 2 and array.dtype.names is None:
        raise AttnError(
            f"{prefix}holds raw 2-byte values ({array.dtype.str}), perhaps bfloat16 saved through "
            "ml_dtypes, which NPY cannot name",
            source=source,
            hint="save bfloat16 in a safetensors file, or as float32: a.astype(np.float32)",
        )
    else:
        raise AttnError(
            f"{prefix}holds {array.dtype} data; attn reads float arrays",
            source=source,
            hint="save it with a.astype(np.float32) or float64",
        )
    vector = array.ndim == 1
    if vector:
        array = array[None, :]
    if array.ndim != 2 and not (request.tensors and array.ndim > 2):
        shape = "×".join(map(str, array.shape)) or "a scalar"
        raise AttnError(f"{prefix}is {array.ndim}-D ({shape}), expected a 2-D matrix", source=source)
    if array.size == 0:
        raise AttnError(f"{prefix}is empty ({'×'.join(map(str, array.shape))})", source=source)
    if array.dtype.byteorder not in "=|":
        array = array.astype(array.dtype.newbyteorder("="), copy=False)
    bad = first_bad(array, request.special) if request.finite else None
    if bad:
        where_bad = (
            f"row {bad[0] + 1}, column {bad[1] + 1}" if len(bad) == 2 else f"element [{', '.join(map(str, bad))}]"
        )
        raise AttnError(f"{prefix}{where_bad}: {not_finite(float(array[bad]), request.special)}", source=source)
    return Matrix(array, vector=vector)


def pytorch_file(source: str) -> AttnError:
    """A PyTorch pickle (torch.save): attn never unpickles, so say how to save it instead."""
    from attncli.readers.foreign import PYTORCH, refusal

    return refusal(PYTORCH, source)
