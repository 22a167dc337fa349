"""BLAS held to the threads attn decides, on every path of the library: one
thread inside the thread pool's blocks (on one worker as on several), and
attn's count, never more than BLAS had, around whole-matrix computations.

Each test first sets BLAS to 3 threads, so that a path that forgot to hold
it would be seen running on 3 (threadpoolctl can raise OpenBLAS's count)."""

import numpy as np
import pytest

from attncli import AttentionOptions, attention, attention_grad
from attncli.core.api import attention_blocked


def blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})


@pytest.fixture
def blas_at_3():
    """BLAS at 3 threads for the test (skipped where threadpoolctl cannot set it)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(3, user_api="blas"):
        if blas_threads() != [3]:
            pytest.skip("threadpoolctl cannot set this BLAS's threads")
        yield


def inputs(n=300, heads=2, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v, dout = (rng.normal(size=(heads, n, 16)) for _ in range(4))
    return q, k, v, dout


@pytest.mark.parametrize("workers", [1, 2])
def test_the_kernel_holds_blas_to_one_thread_in_its_blocks(workers, blas_at_3):
    q, k, v, _ = inputs()
    seen = []
    attention_blocked(
        q,
        k,
        v,
        AttentionOptions(causal="top-left"),
        query_block=32,
        workers=workers,
        progress=lambda done, total: seen.append(blas_threads()),
    )
    assert seen and all(threads == [1] for threads in seen)
    assert blas_threads() == [3]  # given back


@pytest.mark.parametrize("workers", [1, 2])
def test_the_blocked_backward_holds_blas_to_one_thread_in_its_blocks(workers, blas_at_3, monkeypatch):
    import attncli.core.grad_blocks as blocks

    seen = []
    original = blocks._backward_block

    def watched(*args):
        seen.append(blas_threads())
        return original(*args)

    monkeypatch.setattr(blocks, "_backward_block", watched)
    q, k, v, dout = inputs(n=40)
    attention_grad(q, k, v, dout, AttentionOptions(causal="bottom-right"), block=16, workers=workers)
    assert seen and all(threads == [1] for threads in seen)
    assert blas_threads() == [3]


@pytest.mark.parametrize("workers, want", [(1, 1), (2, 2), (None, 2)])
def test_the_whole_backward_holds_blas_to_attns_threads(workers, want, blas_at_3, monkeypatch):
    import attncli.core.grad as grad
    import attncli.core.parallel as parallel

    monkeypatch.setattr(parallel, "_cores", lambda: 2)  # every core: 2
    seen = []
    original = grad._whole
    monkeypatch.setattr(grad, "_whole", lambda *a: seen.append(blas_threads()) or original(*a))
    q, k, v, dout = inputs(n=20)
    attention_grad(q, k, v, dout, AttentionOptions(), block=0, workers=workers)
    assert seen == [[want]]


def test_the_reference_holds_blas_to_every_core(blas_at_3, monkeypatch):
    import attncli.core.parallel as parallel
    import attncli.core.reference as reference

    monkeypatch.setattr(parallel, "_cores", lambda: 1)  # a machine of one core
    seen = []
    original = reference.softmax
    monkeypatch.setattr(reference, "softmax", lambda *a, **kw: seen.append(blas_threads()) or original(*a, **kw))
    q, k, v, _ = inputs(n=20)
    attention(q, k, v, implementation="reference")
    assert seen == [[1]]
    assert blas_threads() == [3]


def test_a_limit_never_raises_blas_above_what_it_was(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import attncli.core.grad as grad
    import attncli.core.parallel as parallel

    monkeypatch.setattr(parallel, "_cores", lambda: 2)
    seen = []
    original = grad._whole
    monkeypatch.setattr(grad, "_whole", lambda *a: seen.append(blas_threads()) or original(*a))
    q, k, v, dout = inputs(n=20)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):  # OPENBLAS_NUM_THREADS=1, say
        if blas_threads() != [1]:
            pytest.skip("threadpoolctl cannot set this BLAS's threads")
        attention_grad(q, k, v, dout, block=0, workers=2)
    assert seen == [[1]]
