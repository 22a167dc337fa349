"""Running independent blocks of work on every core.

numpy's matmul and ufuncs release the GIL, so a few threads over blocks of
queries keep both cores busy, exp included. BLAS's own threads are held to
one meanwhile: two levels of threads on two cores fight.

The pool's threads and threadpoolctl's view of the BLAS libraries are made
once per process and kept: starting two threads costs about 0.2 ms and
``threadpool_limits`` 0.25–0.6 ms a call, several percent of a 20 ms problem
(``ThreadpoolController.limit`` on a kept controller: 0.01 ms).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, nullcontext
from functools import cache
from typing import Any


def map_blocks(fn, blocks: list, workers: int | None, progress) -> None:
    """fn(block) for every block, on up to ``workers`` threads (default: every core).

    The calling thread is one of them, with ``workers`` − 1 of the pool's:
    it would only wait otherwise, and each block finished would wake it (the
    2-D window 256 at n = 4096, about 5 ms of work: 4.5–4.8 ms this way,
    5.0–5.3 ms on two pool threads). Blocks are handed out in order, each to
    the first thread free. BLAS gets one thread per worker meanwhile: two
    levels of threads on two cores fight (measured 0.15 s vs 0.2-0.6 s at
    n=8192). ``progress(done, total)`` is called from the calling thread, for
    every block in turn, as its own blocks finish and at the end.
    """
    workers = min(worker_count(workers), len(blocks))
    if workers <= 1:
        for done, block in enumerate(blocks, 1):
            fn(block)
            if progress:
                progress(done, len(blocks))
        return
    work = _Blocks(fn, blocks)
    pool = _pool(workers - 1)
    reported = 0

    def report() -> None:
        nonlocal reported
        while progress and reported < work.done:
            reported += 1
            progress(reported, len(blocks))

    with one_blas_thread():
        helpers: list[Future[Any]] = [pool.submit(work.run) for _ in range(workers - 1)]
        try:
            work.run(report)
        finally:  # on an error or Ctrl-C, no more blocks are handed out; those started finish
            work.stop()
            wait(helpers)
        for helper in helpers:
            helper.result()  # a helper's error, raised here
        report()


class _Blocks:
    """The blocks of one ``map_blocks`` call, handed out one at a time to the
    threads that ask, until they run out or one of them fails."""

    def __init__(self, fn, blocks: list) -> None:
        self._fn, self._blocks = fn, blocks
        self._next = 0  # the index of the next block to hand out
        self.done = 0  # blocks finished
        self._lock = threading.Lock()

    def run(self, after=None) -> None:
        """fn on blocks until none is left; ``after()`` following each."""
        while (index := self._take()) is not None:
            try:
                self._fn(self._blocks[index])
            except BaseException:
                self.stop()
                raise
            with self._lock:
                self.done += 1
            if after:
                after()

    def _take(self) -> int | None:
        with self._lock:
            if self._next >= len(self._blocks):
                return None
            self._next += 1
            return self._next - 1

    def stop(self) -> None:
        with self._lock:
            self._next = len(self._blocks)


def worker_count(workers: int | None) -> int:
    """The threads ``map_blocks`` runs on: ``workers``, or one per core when None."""
    return workers or _cores()


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of ``workers`` threads, every one started on first use.

    A ThreadPoolExecutor starts a thread on submit only when none is idle, and
    counts a thread idle once it has finished any block: a first call whose
    blocks finish faster than they are submitted would leave a kept pool at
    one thread for good. So its threads are started here, each held at a
    barrier until all are running."""
    with _pools_lock:
        if workers not in _pools:
            pool = ThreadPoolExecutor(workers, thread_name_prefix="attn-block")
            everyone = threading.Barrier(workers)
            wait([pool.submit(everyone.wait, 10) for _ in range(workers)])
            _pools[workers] = pool
        return _pools[workers]


def _cores() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def one_blas_thread() -> AbstractContextManager[Any]:
    """BLAS limited to one thread while in the block (threadpoolctl); a no-op
    without threadpoolctl."""
    controller = _blas_controller()
    if controller is None:  # pragma: no cover - an optional speed-up
        return nullcontext()
    return controller.limit(limits=1, user_api="blas")


@cache
def _blas_controller() -> Any:
    """threadpoolctl's controller of the loaded libraries, found once (None without threadpoolctl)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - an optional speed-up
        return None
    return ThreadpoolController()
