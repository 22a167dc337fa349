"""Results -> JSON, CSV/TSV, NPY, NPZ or safetensors on a stream: exact, never wrapped or coloured.

``WRITERS`` is the registry of data formats, one line each: JSON writes a
command's whole result; the others write one ``Emitted`` array. Numbers are
written in the shortest form that reads back to the same value in their own
dtype (0.15 for a float32 0.15, not 0.15000000596046448).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any


@dataclass
class Emitted:
    """One array a data format may write: [..., rows, cols] values and the
    labels of the last two axes.

    Leading axes (heads, layers) are the writer's business: NPY writes the
    array as it is; CSV/TSV stack the matrices' rows, labelled ``h:label``.
    """

    values: Any
    row_labels: list[str] | None = None
    col_labels: list[str] | None = None
    name: str = "output"  # what the array is (--emit): its name in NPZ and safetensors files
    also: dict[str, Any] = field(default_factory=dict)  # arrays NPZ and safetensors write beside it, by name

    def stacked(self) -> tuple[Any, list[str] | None]:
        """2-D values and their row labels: leading axes flattened into rows
        labelled by their indices and the row label ('1:the', '0:2:q3')."""
        values = self.values
        if values.ndim == 1:  # one number per head (dsinks): one row
            return values[None, :], self.row_labels
        if values.ndim <= 2:
            return values, self.row_labels
        import numpy as np

        *leading, n_rows, n_cols = values.shape
        rows = self.row_labels or [str(i) for i in range(n_rows)]
        labels = [":".join(map(str, index)) + f":{row}" for index in np.ndindex(*leading) for row in rows]
        return values.reshape(-1, n_cols), labels


@dataclass(frozen=True)
class Writer:
    """A data format for ``--format``: how it writes a result to stdout."""

    name: str
    write: Callable[[IO[Any], Any], None]  # (stream, the result's JSON object or one Emitted)
    whole: bool = False  # writes the whole result (its JSON object), not the one Emitted chosen by --emit
    binary: bool = False  # bytes: never to a terminal


def number_strings(values: Any) -> Any:
    """Shortest round-trip text for each number; booleans as true/false."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype == bool:
        return np.where(values, "true", "false")
    # ml_dtypes' bfloat16 and float8 (a kind numpy cannot print): float32 holds each exactly
    if values.dtype.kind == "V":
        values = values.astype(np.float32)
    return values.astype(str)


ROWS_PER_WRITE = 4096  # rows turned into text at a time: large outputs stream


def to_json(obj: Any) -> str:
    """One line of JSON; numpy arrays become nested lists of numbers (NaN as null)."""
    return "".join(json_parts(obj))


def json_parts(obj: Any) -> Iterator[str]:
    """``to_json`` in pieces, a block of matrix rows at a time, so that a large
    result is written as it is made instead of being built as one string."""
    import numpy as np

    if isinstance(obj, np.ndarray) and obj.ndim >= 2:
        yield "["
        for start in range(0, len(obj), ROWS_PER_WRITE):
            yield ("," if start else "") + ",".join(to_json(row) for row in obj[start : start + ROWS_PER_WRITE])
        yield "]"
    elif isinstance(obj, np.ndarray):
        missing = np.isnan(obj) if obj.dtype.kind == "f" else None  # NaN: a value not there (a pair a model forbids)
        if missing is not None and missing.any():  # JSON's null; text made of the rest (numpy 1.24 warns on NaN)
            text = np.where(missing, "null", number_strings(np.where(missing, 0, obj)))
        else:
            text = number_strings(obj)
        yield str(text) if obj.ndim == 0 else "[" + ",".join(text.tolist()) + "]"
    elif isinstance(obj, dict):
        yield "{"
        for i, (k, v) in enumerate(obj.items()):
            yield ("," if i else "") + json.dumps(str(k)) + ":"
            yield from json_parts(v)
        yield "}"
    elif isinstance(obj, (list, tuple)):
        yield "["
        for i, v in enumerate(obj):
            if i:
                yield ","
            yield from json_parts(v)
        yield "]"
    elif isinstance(obj, np.generic):
        yield from json_parts(np.asarray(obj))
    else:
        yield json.dumps(obj, allow_nan=False)


def write_json(stream: IO[str], obj: dict) -> None:
    for part in json_parts(obj):
        stream.write(part)
    stream.write("\n")


def write_delimited(
    stream: IO[str],
    values: Any,
    row_labels: list[str] | None = None,
    col_labels: list[str] | None = None,
    delimiter: str = ",",
) -> None:
    """A matrix as CSV/TSV: a header row when columns are named, a first
    column when rows are, so that ``attn`` reads it back with its labels.
    A line's first cell that starts with # is quoted, so that no reader
    takes the line for a comment."""
    writer = csv.writer(stream, delimiter=delimiter, lineterminator="\n")

    def write_rows(rows: list[list[str]]) -> None:
        if not any(row[0].startswith("#") for row in rows):
            writer.writerows(rows)
            return
        for first, *rest in rows:
            if first.startswith("#"):
                stream.write('"' + first.replace('"', '""') + '"' + (delimiter if rest else "\n"))
                if rest:
                    writer.writerow(rest)
            else:
                writer.writerow([first, *rest])

    if col_labels is not None:
        write_rows([([""] if row_labels is not None else []) + list(col_labels)])
    for start in range(0, len(values), ROWS_PER_WRITE):  # a block of rows at a time
        rows = number_strings(values[start : start + ROWS_PER_WRITE]).tolist()
        if row_labels is not None:
            rows = [[label, *row] for label, row in zip(row_labels[start : start + ROWS_PER_WRITE], rows, strict=True)]
        write_rows(rows)


def write_npy(stream: IO[bytes], values: Any) -> None:
    import numpy as np

    np.save(stream, np.asarray(values), allow_pickle=False)


def write_emitted_csv(stream: IO[str], matrix: Emitted) -> None:
    write_delimited(stream, *matrix.stacked(), matrix.col_labels, ",")


def write_emitted_tsv(stream: IO[str], matrix: Emitted) -> None:
    write_delimited(stream, *matrix.stacked(), matrix.col_labels, "\t")


def write_emitted_npy(stream: IO[bytes], matrix: Emitted) -> None:
    write_npy(stream, matrix.values)


def write_emitted_npz(stream: IO[bytes], matrix: Emitted) -> None:
    """One array named as it is (``output``), with ``output_labels`` and
    ``output_columns`` when its rows and columns have names, as attn reads NPZ."""
    import io

    import numpy as np

    arrays = {matrix.name: np.asarray(matrix.values), **{name: np.asarray(a) for name, a in matrix.also.items()}}
    for suffix, labels in (("labels", matrix.row_labels), ("columns", matrix.col_labels)):
        if labels is not None:
            arrays[f"{matrix.name}_{suffix}"] = np.array(labels)
    buffer = io.BytesIO()  # a zip archive is written seeking back; stdout may be a pipe
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    stream.write(buffer.getvalue())


def write_emitted_safetensors(stream: IO[bytes], matrix: Emitted) -> None:
    """One tensor named as it is (``output``), through the safetensors package."""
    import numpy as np

    try:
        from safetensors.numpy import save
    except ImportError:
        from attncli.errors import AttnError

        raise AttnError(
            "writing safetensors needs safetensors, from the 'tensors' extra", hint="pip install 'attncli[tensors]'"
        ) from None
    tensors = {matrix.name: matrix.values, **matrix.also}
    stream.write(save({name: np.ascontiguousarray(a) for name, a in tensors.items()}))


WRITERS: dict[str, Writer] = {
    w.name: w
    for w in (
        Writer("json", write_json, whole=True),
        Writer("csv", write_emitted_csv),
        Writer("tsv", write_emitted_tsv),
        Writer("npy", write_emitted_npy, binary=True),
        Writer("npz", write_emitted_npz, binary=True),
        Writer("safetensors", write_emitted_safetensors, binary=True),
    )
}
