"""Inputs named on the command line: files, ``-`` for stdin, memory-mapped NPY,
and a progress bar for long work."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from attncli.errors import UsageError, file_error

STDIN = "-"

def read_bytes(name: str) -> bytes:
    """The whole input named on the command line; ``-`` is stdin."""
    if name == STDIN:
        return sys.stdin.buffer.read()
    try:
        with open(name, "rb") as f:
            return f.read()
    except OSError as e:
        raise file_error(name, e) from None


def read_matrix_arg(name: str, *, mask: bool = False):
    """The one matrix in the input named on the command line (``-`` is stdin).

    A float NPY file is memory-mapped rather than read, so a K or V larger
    than memory can still be streamed through the kernel.
    """
    from attncli.readers import detect_format, read_matrix
    from attncli.readers.arrays import NPY_MAGIC, map_npy, matrix_from_array

    if name != STDIN and detect_format(name, NPY_MAGIC) == "npy":
        mapped = map_npy(name, name)
        if mapped is not None:
            return matrix_from_array(mapped, name, "", mask)
    return read_matrix(read_bytes(name), source_name(name), mask=mask)


def source_name(name: str) -> str:
    return "<stdin>" if name == STDIN else name


def check_stdin_once(names: list[str | None]) -> None:
    """stdin can be read once: refuse a command line that names it twice."""
    if sum(1 for n in names if n == STDIN) > 1:
        raise UsageError("stdin ('-') is named more than once, but can be read only once",
                         hint="save all but one input to a file")


PROGRESS_AFTER = 1.0  # seconds of work before a progress bar appears


@contextmanager
def progress_bar(label: str):
    """A ``progress(done, total)`` callback that shows a Rich bar on stderr once
    the work has taken more than a second; None when stderr is not a terminal
    (pipes, CI, tests), so no work is done for it."""
    if not sys.stderr.isatty():
        yield None
        return
    import time

    start, bar = time.monotonic(), {}

    def progress(done: int, total: int) -> None:
        if not bar and time.monotonic() - start > PROGRESS_AFTER:
            from rich.console import Console
            from rich.progress import Progress

            bar["progress"] = Progress(console=Console(stderr=True), transient=True)
            bar["progress"].start()
            bar["task"] = bar["progress"].add_task(label, total=total)
        if bar:
            bar["progress"].update(bar["task"], completed=done)

    try:
        yield progress
    finally:
        if bar:
            bar["progress"].stop()
