"""Running a command so that Ctrl-C stops it at once.

Python handles a signal only between bytecodes of the main thread, so a long
call into C (numpy parsing a 600 MB CSV, a big matrix product, Rich laying
out a table) would hold Ctrl-C back until it returns. The command therefore
runs in a worker thread while the main thread only waits: Ctrl-C reaches the
main thread at once, which stops the worker where it is (exit 130), after
the cleanups registered with ``on_interrupt`` (a progress bar gives the
cursor back, a half-written picture's temporary file is removed).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
GRACE = 0.2  # seconds the worker gets to stop by itself (when it is running Python code)

_cleanups: list[Callable[[], None]] = []


@contextmanager
def on_interrupt(cleanup: Callable[[], None]) -> Iterator[None]:
    """Run ``cleanup`` if Ctrl-C stops the command inside this block."""
    _cleanups.append(cleanup)
    try:
        yield
    finally:
        _cleanups.remove(cleanup)


def run_interruptibly(work: Callable[[], Any]) -> Any:
    """``work()`` in a worker thread: its result, or the exception it raised.

    On Ctrl-C the worker is sent KeyboardInterrupt; if it does not stop
    within GRACE seconds (it is inside a long C call) the cleanups run and
    the process ends with 130 without waiting for it.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: on Ctrl-C, 3.11's join marks a running thread stopped

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as e:  # handed to the main thread, which raises it
            outcome["error"] = e
        finally:
            done.set()

    # ctypes is for _interrupt, imported now: imported only after Ctrl-C, the import machinery
    # printed "Exception ignored … KeyboardInterrupt" in 5 of 15 tries (0 of 40 imported first)
    import ctypes  # noqa: F401

    worker = threading.Thread(target=target, name="attn-command", daemon=True)
    worker.start()
    try:
        done.wait()
    except KeyboardInterrupt:
        _interrupt(worker)
        if not done.wait(GRACE):
            _abandon()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _interrupt(worker: threading.Thread) -> None:
    """Raise KeyboardInterrupt in the worker at its next bytecode."""
    import ctypes

    if worker.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(KeyboardInterrupt))


def _abandon() -> None:
    """The worker is stuck in C: clean up from here and end the process now
    (waiting for the interpreter's normal exit could deadlock on a stream the
    worker holds)."""
    for cleanup in list(_cleanups):
        try:
            cleanup()
        except Exception:  # best effort on the way out
            pass
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            os.write(sys.stdout.fileno(), b"\x1b[0m")  # no colour left on after a cut-off table
    except (OSError, ValueError):
        pass
    os._exit(EXIT_INTERRUPTED)
