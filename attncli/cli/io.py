"""Inputs named on the command line: files, ``-`` for stdin, memory-mapped NPY,
and a progress bar for long work."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from attncli.errors import UsageError

if TYPE_CHECKING:
    from attncli.readers import Input, Matrix

STDIN = "-"

def open_input(name: str) -> Input:
    """The input named on the command line: ``-`` is stdin, read now; a file
    is read by its reader when needed (a float NPY file is memory-mapped, so a
    K or V larger than memory can still be streamed through the kernel)."""
    from attncli.readers import Input

    if name == STDIN:
        return Input.of(sys.stdin.buffer.read(), source_name(name))
    return Input.file(name)


def read_bytes(name: str) -> bytes:
    """The whole input named on the command line; ``-`` is stdin."""
    return open_input(name).data()


def read_matrix_arg(name: str, *, mask: bool = False, tensors: bool = False) -> Matrix:
    """The one matrix in the input named on the command line (``-`` is stdin);
    ``tensors``: of any rank ≥ 2, in its stored float dtype."""
    from attncli.readers import read_matrix

    return read_matrix(open_input(name), mask=mask, tensors=tensors)


def source_name(name: str) -> str:
    """How errors name the input: the path as given, or <stdin>."""
    return "<stdin>" if name == STDIN else name


def check_stdin_once(names: list[str | None]) -> None:
    """stdin can be read once: refuse a command line that names it twice."""
    if sum(1 for n in names if n == STDIN) > 1:
        raise UsageError("stdin ('-') is named more than once, but can be read only once",
                         hint="save all but one input to a file")


PROGRESS_AFTER = 1.0  # seconds of work before a progress bar appears


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback that shows a Rich bar on stderr once
    the work has taken more than a second; None when stderr is not a terminal
    (pipes, CI, tests), so no work is done for it."""
    if not sys.stderr.isatty():
        yield None
        return
    import time

    start = time.monotonic()
    bar: dict[str, Any] = {}  # the Rich progress bar and its task, once shown

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
