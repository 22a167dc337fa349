"""Running independent blocks of work on every core, and BLAS's threads.

numpy's matmul and ufuncs release the GIL, so a few threads over blocks of
queries keep both cores busy, exp included. BLAS's own threads are held to
one meanwhile: two levels of threads on two cores fight.

attn decides how many threads a call runs on (``worker_count``: ``workers``,
or every core) and BLAS is held to them on every path: one thread inside
``map_blocks`` (attn's threads are the parallelism, even when there is only
one: ``attention_blocked(workers=1)`` at 2-D n = 8192 took 0.8–1.6 s with
BLAS's two threads on its small blocks, against 0.23 s on two workers), and
``worker_count`` threads around a whole-matrix computation (``blas_held``:
the reference, the backward pass held whole). A limit never raises BLAS
above what it was (``OPENBLAS_NUM_THREADS=1`` stays 1).

The pool's threads and threadpoolctl's view of the BLAS libraries are made
once per process and kept: starting two threads costs about 0.2 ms and
``threadpool_limits`` 0.25–0.6 ms a call, several percent of a 20 ms problem
(``ThreadpoolController.limit`` on a kept controller: 0.01 ms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, nullcontext
from functools import cache, wraps
from typing import Any, ParamSpec, TypeVar

Params = ParamSpec("Params")
Result = TypeVar("Result")


def map_blocks(fn, blocks: list, workers: int | None, progress) -> None:
    """fn(block) for every block, on up to ``workers`` threads (default: every core).

    BLAS gets one thread per worker while the blocks run, on one worker as on
    several: two levels of threads on two cores fight (measured 0.15 s vs
    0.2-0.6 s at n=8192). ``progress(done, total)`` is called from the calling
    thread, in order.
    """
    workers = min(worker_count(workers), len(blocks))
    if workers <= 1:
        with one_blas_thread():
            for done, block in enumerate(blocks, 1):
                fn(block)
                if progress:
                    progress(done, len(blocks))
        return
    pool = _pool(workers)
    with one_blas_thread():
        futures: list[Future[Any]] = [pool.submit(fn, block) for block in blocks]
        try:
            if progress is None:  # one wake-up of this thread at the end (or the first error), not one a block
                wait(futures, return_when=FIRST_EXCEPTION)
            for done, future in enumerate(futures, 1):
                future.result()
                if progress:
                    progress(done, len(blocks))
        finally:  # on an error or Ctrl-C, drop the blocks not yet started and let the others finish
            for future in futures:
                future.cancel()
            wait(futures)


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


def worker_count(workers: int | None) -> int:
    """The threads ``map_blocks`` runs on at most: ``workers``, or every core."""
    return max(1, workers or _cores())


def _cores() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def one_blas_thread() -> AbstractContextManager[Any]:
    """BLAS held to one thread while in the block (``blas_held(1)``): inside the
    pool's blocks, and around a caller's own run of small products (a decoder's
    layers)."""
    return blas_held(1)


def blas_held(workers: int | None) -> AbstractContextManager[Any]:
    """BLAS held to ``worker_count(workers)`` threads while in the block
    (threadpoolctl), never more than each library had; a no-op without
    threadpoolctl or BLAS."""
    controller = _blas_controller()
    if controller is None:  # pragma: no cover - an optional speed-up
        return nullcontext()
    most = worker_count(workers)
    limits: dict[str, int] = {}
    for library in controller.select(user_api="blas").lib_controllers:  # the current count, read live
        limits[library.prefix] = min(most, library.num_threads, limits.get(library.prefix, most))
    return controller.limit(limits=limits) if limits else nullcontext()


def on_attn_threads(fn: Callable[Params, Result]) -> Callable[Params, Result]:
    """``fn`` with BLAS held to attn's threads while it runs (``blas_held(None)``:
    every core), for a computation on whole matrices."""

    @wraps(fn)
    def held(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        with blas_held(None):
            return fn(*args, **kwargs)

    return held


@cache
def _blas_controller() -> Any:
    """threadpoolctl's controller of the loaded libraries, found once (None without threadpoolctl)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - an optional speed-up
        return None
    return ThreadpoolController()
