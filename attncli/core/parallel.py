"""Running independent blocks of work on every core.

numpy's matmul and ufuncs release the GIL, so a few threads over blocks of
queries keep both cores busy, exp included. BLAS's own threads are held to
one meanwhile: two levels of threads on two cores fight.
"""

from __future__ import annotations


def map_blocks(fn, blocks: list, workers: int | None, progress) -> None:
    """fn(block) for every block, on up to ``workers`` threads (default: every core).

    BLAS gets one thread per worker while the pool runs: two levels of
    threads on two cores fight (measured 0.15 s vs 0.2-0.6 s at n=8192).
    """
    workers = min(workers or _cores(), len(blocks))
    if workers <= 1:
        for done, block in enumerate(blocks, 1):
            fn(block)
            if progress:
                progress(done, len(blocks))
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(workers)
    try:
        with _one_blas_thread():
            for done, _ in enumerate(pool.map(fn, blocks), 1):
                if progress:
                    progress(done, len(blocks))
    finally:  # on an error or Ctrl-C, drop the blocks not yet started
        pool.shutdown(cancel_futures=True)


def _cores() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _one_blas_thread():
    """Limit BLAS to one thread (threadpoolctl); a no-op without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - an optional speed-up
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")
