"""Arrays -> JSON, CSV/TSV or NPY on a stream: exact, never wrapped or coloured.

Numbers are written in the shortest form that reads back to the same value
in their own dtype (0.15 for a float32 0.15, not 0.15000000596046448).
"""

from __future__ import annotations

import csv
import json
from typing import IO, Any


def number_strings(values: Any) -> Any:
    """Shortest round-trip text for each number; booleans as true/false."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype == bool:
        return np.where(values, "true", "false")
    return values.astype(str)


def to_json(obj: Any) -> str:
    """One line of JSON; numpy arrays become nested lists of numbers."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        if obj.ndim == 0:
            return str(number_strings(obj))
        if obj.ndim == 1:
            return "[" + ",".join(number_strings(obj).tolist()) + "]"
        return "[" + ",".join(to_json(row) for row in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{to_json(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in obj) + "]"
    if isinstance(obj, np.generic):
        return to_json(np.asarray(obj))
    return json.dumps(obj, allow_nan=False)


def write_json(stream: IO[str], obj: dict) -> None:
    stream.write(to_json(obj) + "\n")


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
    for i, row in enumerate(number_strings(values).tolist()):
        writer.writerow(([row_labels[i]] if row_labels is not None else []) + row)


def write_npy(stream: IO[bytes], values: Any) -> None:
    import numpy as np

    np.save(stream, np.asarray(values), allow_pickle=False)
