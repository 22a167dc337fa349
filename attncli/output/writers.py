"""Arrays -> JSON, CSV/TSV or NPY on a stream: exact, never wrapped or coloured.

Numbers are written in the shortest form that reads back to the same value
in their own dtype (0.15 for a float32 0.15, not 0.15000000596046448).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import IO, Any


def number_strings(values: Any) -> Any:
    """Shortest round-trip text for each number; booleans as true/false."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype == bool:
        return np.where(values, "true", "false")
    return values.astype(str)


ROWS_PER_WRITE = 4096  # rows turned into text at a time: large outputs stream


def to_json(obj: Any) -> str:
    """One line of JSON; numpy arrays become nested lists of numbers."""
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
        yield str(number_strings(obj)) if obj.ndim == 0 else "[" + ",".join(number_strings(obj).tolist()) + "]"
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
    column when rows are, so that ``attn`` reads it back with its labels."""
    writer = csv.writer(stream, delimiter=delimiter, lineterminator="\n")
    if col_labels is not None:
        writer.writerow(([""] if row_labels is not None else []) + list(col_labels))
    for start in range(0, len(values), ROWS_PER_WRITE):  # a block of rows at a time
        rows = number_strings(values[start : start + ROWS_PER_WRITE]).tolist()
        if row_labels is not None:
            rows = [[label, *row] for label, row in zip(row_labels[start : start + ROWS_PER_WRITE], rows)]
        writer.writerows(rows)


def write_npy(stream: IO[bytes], values: Any) -> None:
    import numpy as np

    np.save(stream, np.asarray(values), allow_pickle=False)
