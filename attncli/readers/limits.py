"""The largest text inputs attn accepts by default, and how to raise them.

Text is parsed in Python structures that cost far more memory than the
numbers they hold, and a few YAML aliases can describe a huge tree; so text
inputs are measured cheaply *before* parsing and refused past a limit, with
an error that names the environment variable raising it for one command:

    ATTN_MAX_ELEMENTS=500000000 attn run big.csv k.csv v.csv

Binary NPY/NPZ files are not limited: they are memory-mapped or read as
they are. Whatever comes through stdin, a pipe or a device is read into
memory up to ATTN_MAX_STREAM_BYTES, since such a stream may never end
(/dev/zero).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from attncli.errors import AttnError, UsageError


@dataclass(frozen=True)
class Limit:
    variable: str  # the environment variable that raises (or lowers) it
    default: int
    unit: str  # what is counted, for the message

    def value(self) -> int:
        raw = os.environ.get(self.variable)
        if raw is None:
            return self.default
        digits = raw.strip().replace("_", "")
        significant = digits.lstrip("0")
        if not (digits.isascii() and digits.isdigit() and significant):
            raise UsageError(f"{self.variable}={raw[:40]!r} is not a positive whole number")
        # past what a C long holds (csv.field_size_limit takes one) there is no limit anyway
        return sys.maxsize if len(significant) > 18 else int(significant)

    def check(self, amount: int, source: str | None = None, line: int | None = None, about: bool = False) -> None:
        """Refuse ``amount`` past the limit, naming the variable that raises it."""
        limit = self.value()
        if amount > limit:
            counted = f"{'about ' if about else ''}{amount:,} {self.unit}"
            raise AttnError(
                f"has {counted}, more than the limit of {limit:,}",
                source=source,
                line=line,
                hint=f"set {self.variable} to raise it",
            )


ELEMENTS = Limit("ATTN_MAX_ELEMENTS", 100_000_000, "values")  # one file of CSV/TSV/text/YAML/JSON
TREE_NODES = Limit("ATTN_MAX_YAML_NODES", 10_000_000, "YAML/JSON elements")  # after aliases expand
LINE = Limit("ATTN_MAX_LINE", 10_000_000, "characters in one line")  # CSV/TSV/text
STREAM_BYTES = Limit("ATTN_MAX_STREAM_BYTES", 4 << 30, "bytes")  # stdin, a pipe or a device: it may never end


def check_text(data: bytes, source: str, separators: bytes, *, tree: bool = False) -> None:
    """Estimate, at C speed, how many numbers (and how long a line) a text
    input holds, and refuse it before parsing when that is past a limit.

    The count is one per separator (each byte of ``separators``) and one per
    line, labels and header included: an upper bound, close for CSV/TSV, loose
    for text with runs of spaces and for YAML/JSON (``tree``: also counted
    against the YAML/JSON elements limit, and lines are not limited).
    """
    lines = data.count(b"\n") + 1
    cells = sum(data.count(bytes([byte])) for byte in separators) + lines
    ELEMENTS.check(cells, source, about=True)
    if tree:
        TREE_NODES.check(cells, source, about=True)
    elif len(data) > LINE.value():
        _check_lines(data, source)


def _check_lines(data: bytes, source: str) -> None:
    """The longest line, found without copying the data: one find per line."""
    limit, start, number = LINE.value(), 0, 1
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if end - start > limit:
            LINE.check(end - start, source, line=number)
        start, number = end + 1, number + 1


def check_fits_in_memory(size: int, source: str, what: str) -> None:
    """Refuse to expand an input past the memory this machine has free (an
    NPZ archive of a few MB can hold gigabytes of zeros): MemoryError comes
    at once only past all of memory; below that, filling it would swap."""
    free = memory_available()
    if free is not None and size > free:
        raise AttnError(f"{what} {size:,} bytes, more than the {free:,} bytes of memory free", source=source)


def memory_available() -> int | None:
    """Bytes of memory free for a new allocation (Linux's MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
