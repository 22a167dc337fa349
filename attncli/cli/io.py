"""Inputs named on the command line: files, ``-`` for stdin, memory-mapped NPY,
and a progress bar for long work."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnError, UsageError, file_error

if TYPE_CHECKING:
    from attncli.readers import Input

STDIN = "-"
STDIN_NAME = "<stdin>"


def open_input(name: str) -> Input:
    """The input named on the command line: ``-`` is stdin, read now; a file
    is read by its reader when needed (a float NPY file is memory-mapped, so a
    K or V larger than memory can still be streamed through the kernel)."""
    from attncli.readers import Input

    if name == STDIN:
        return Input.of(read_stdin(), source_name(name))
    return Input.file(name)


def read_stdin() -> bytes:
    """All of stdin, read once (the one place attn reads it)."""
    from attncli.readers.base import read_all

    if sys.stdin is None:  # started with stdin closed: `attn run - k.csv v.csv <&-`
        raise AttnError("is closed", source=STDIN_NAME, hint="pipe the input in, or give a file name")
    try:
        return read_all(sys.stdin.buffer, STDIN_NAME)
    except OSError as e:
        raise file_error(STDIN_NAME, e) from None


def read_bytes(name: str) -> bytes:
    """The whole input named on the command line; ``-`` is stdin."""
    return open_input(name).data()


def source_name(name: str) -> str:
    """How errors name the input: the path as given, or <stdin>."""
    return STDIN_NAME if name == STDIN else name


def check_stdin_once(names: Iterable[str | None]) -> None:
    """A stream can be read once: refuse a command line that names stdin, or
    one pipe (a FIFO, ``<(…)``, /dev/stdin fed by a pipe), twice."""
    named = [name for name in names if name is not None]
    twice = UsageError(
        "stdin ('-') is named more than once, but can be read only once", hint="save all but one input to a file"
    )
    if named.count(STDIN) > 1:
        raise twice
    seen: dict[tuple[int, int], str] = {}
    for name in named:
        key = _pipe(name)
        if key is None:
            continue
        if key in seen:
            if STDIN in (name, seen[key]):
                raise twice
            raise UsageError(
                f"{name} is a pipe named more than once, but a pipe can be read only once",
                hint="save it to a file first",
            )
        seen[key] = name


def _pipe(name: str) -> tuple[int, int] | None:
    """(device, inode) of an input that is a pipe (stdin, a FIFO, ``<(…)``),
    which can be read only once; None for anything else."""
    try:
        info = os.fstat(sys.stdin.fileno()) if name == STDIN else os.stat(name)
    except (OSError, AttributeError, ValueError):  # no such file (its reader says so), or stdin in tests
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode) else None


PROGRESS_AFTER = 1.0  # seconds of work before a progress bar appears


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback that shows a Rich bar on stderr once
    the work has taken more than a second; None when stderr is not a terminal
    (pipes, CI, tests), so no work is done for it."""
    if sys.stderr is None or not sys.stderr.isatty():
        yield None
        return
    import time

    from attncli.cli.worker import on_interrupt

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

    def give_the_cursor_back() -> None:  # Ctrl-C left the work stuck in C: the bar cannot be stopped
        if bar:
            os.write(sys.stderr.fileno(), b"\r\x1b[2K\x1b[?25h")

    try:
        with on_interrupt(give_the_cursor_back):
            yield progress
    finally:
        if bar:
            bar["progress"].stop()
