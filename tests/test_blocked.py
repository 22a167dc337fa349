"""The blocked kernel (``attention_blocked``, ``attention(need_weights=False)``)
gives the simple path's numbers for every option, whatever the block sizes,
with keys streamed through the online softmax."""

import numpy as np
import pytest

from attncli import attention, attention_steps
from attncli.core.api import attention_blocked
from attncli.errors import AttnError

# (n_q, n_k, query_block, key_block): blocks that do and do not divide n.
SHAPES = [(1, 1, 1, 1), (7, 5, 3, 2), (16, 16, 4, 8), (13, 29, 5, 7), (29, 13, 8, 4), (40, 33, 40, 33)]


def problem(n_q, n_k, dtype, seed=0, d_k=6, d_v=3):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((n_q, d_k)).astype(dtype),
        rng.standard_normal((n_k, d_k)).astype(dtype),
        rng.standard_normal((n_k, d_v)).astype(dtype),
    )


def options(kind, n_q, n_k, rng):
    """Every option of attention_steps, one kind at a time."""
    if kind == "bool mask":
        return {"mask": rng.random((n_q, n_k)) < 0.6}
    if kind == "row mask":  # 1×n_k, broadcast to every query
        return {"mask": (rng.random((1, n_k)) < 0.6).astype(float)}
    if kind == "additive mask":
        bias = rng.standard_normal((n_q, n_k))
        bias[rng.random((n_q, n_k)) < 0.3] = -np.inf
        return {"mask": bias}
    if kind == "fully masked rows":
        allowed = rng.random((n_q, n_k)) < 0.5
        allowed[::2] = False
        return {"mask": allowed}
    return {
        "plain": {},
        "causal": {"causal": True},
        "bottom-right": {"causal": "bottom-right"},
        "cosine": {"similarity": "cosine"},
        "scale+temperature": {"scale": 0.3, "temperature": 1.7},
        "all": {
            "causal": "bottom-right",
            "similarity": "cosine",
            "temperature": 0.5,
            "mask": rng.standard_normal((1, n_k)),
        },
    }[kind]


KINDS = [
    "plain",
    "causal",
    "bottom-right",
    "cosine",
    "scale+temperature",
    "bool mask",
    "row mask",
    "additive mask",
    "fully masked rows",
    "all",
]


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_q, n_k, query_block, key_block", SHAPES)
def test_blocked_equals_simple_path(n_q, n_k, query_block, key_block, kind, dtype, tol):
    q, k, v = problem(n_q, n_k, dtype)
    opts = options(kind, n_q, n_k, np.random.default_rng(n_q * n_k))
    expected = attention_steps(q, k, v, **opts).output
    for workers in (1, 2):
        out = attention_blocked(q, k, v, query_block=query_block, key_block=key_block, workers=workers, **opts)
        assert out.dtype == dtype
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


def test_fully_masked_rows_give_zeros_when_streamed():
    q, k, v = problem(4, 9, np.float64)
    allowed = np.ones((4, 9), bool)
    allowed[1] = False
    allowed[2, :7] = False  # only the last key block has keys for this query
    out = attention_blocked(q, k, v, mask=allowed, query_block=2, key_block=3)
    assert out[1].tolist() == [0, 0, 0]
    np.testing.assert_allclose(out, attention_steps(q, k, v, mask=allowed).output, rtol=1e-12)


def test_online_softmax_keeps_large_logits_stable():
    # Each key block has a much larger max than the one before: the running
    # sums must be rescaled, never overflow.
    q = np.ones((2, 1))
    k = np.arange(12.0)[:, None] * 60
    v = np.random.default_rng(1).standard_normal((12, 2))
    out = attention_blocked(q, k, v, key_block=4, scale=1.0)
    np.testing.assert_allclose(out, attention_steps(q, k, v, scale=1.0).output, rtol=1e-12)
    assert np.isfinite(out).all()


def test_default_blocks_and_threads_on_a_bigger_problem():
    q, k, v = problem(700, 9000, np.float32, d_k=16, d_v=4)  # two key blocks, several query blocks
    out, weights = attention(q, k, v, need_weights=False, causal=True)
    assert weights is None
    np.testing.assert_allclose(out, attention_steps(q, k, v, causal=True).output, rtol=1e-5, atol=1e-6)


def test_batched_inputs_match():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 9, 4)), rng.standard_normal((2, 7, 4)), rng.standard_normal((2, 7, 3))
    out = attention_blocked(q, k, v, query_block=4, key_block=3, causal=True)
    np.testing.assert_allclose(out, attention_steps(q, k, v, causal=True).output, rtol=1e-12)


def test_single_query_and_scalar_values_without_weights():
    q, k, v = problem(1, 5, np.float64)
    out, w = attention(q[0], k, v[:, 0], need_weights=False)
    assert w is None
    assert out == pytest.approx(attention(q[0], k, v[:, 0])[0])


def test_overflowing_scores_are_the_same_error():
    q, k, v = problem(5, 6, np.float32)
    q[3] = 3e38
    for run in (lambda: attention_steps(q, k, v), lambda: attention_blocked(q, k, v, query_block=2, key_block=4)):
        with pytest.raises(AttnError, match="attention scores overflow"):
            run()


def test_values_near_the_float_limit():
    """The reference normalises the weights before V, so an output of 3e38 is
    right there; the kernel adds unnormalised terms, and says its sum overflows
    rather than answer inf."""
    q, k, v = problem(5, 6, np.float32)
    v[:] = 3e38
    np.testing.assert_allclose(attention_steps(q, k, v).output, 3e38, rtol=1e-5)
    with pytest.raises(AttnError, match="the output overflows"):
        attention_blocked(q, k, v, query_block=2, key_block=4)


def test_progress_is_reported_per_query_block():
    q, k, v = problem(10, 4, np.float64)
    seen = []
    attention_blocked(q, k, v, query_block=3, workers=2, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_memory_mapped_inputs_stay_mapped_and_agree(tmp_path):
    q, k, v = problem(20, 30, np.float32)
    for name, m in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", m)
    mapped = [np.load(tmp_path / f"{n}.npy", mmap_mode="r") for n in "qkv"]
    out = attention_blocked(*mapped, query_block=7, key_block=8, causal=True)
    np.testing.assert_allclose(out, attention_steps(q, k, v, causal=True).output, rtol=2e-6, atol=2e-6)


# Block skipping: key blocks outside the causal triangle or the window are
# never computed, blocks wholly inside are not masked; the numbers must be
# the reference's whatever the blocks, shapes and alignment.
SKIPPING = [
    {"causal": "top-left"},
    {"causal": "bottom-right"},
    {"window": (0, 0)},
    {"window": (1, 0)},
    {"window": (3, 2)},
    {"window": (5, -1)},
    {"window": (-1, 4)},
    {"window": (40, 40)},
    {"causal": "top-left", "window": (2, 0)},
    {"causal": "bottom-right", "window": (6, 3)},
]


@pytest.mark.parametrize("numbers", [1, 1 << 20], ids=["a head a part", "heads together"])
@pytest.mark.parametrize("settings", SKIPPING, ids=str)
@pytest.mark.parametrize("n_q, n_k", [(1, 1), (9, 9), (7, 19), (19, 7), (16, 33)])
def test_skipping_masked_blocks_gives_the_reference(settings, n_q, n_k, numbers, monkeypatch):
    from attncli.core import blocking
    from attncli.core.options import AttentionOptions

    monkeypatch.setattr(blocking, "BLOCK_NUMBERS", numbers)
    rng = np.random.default_rng(n_q * 100 + n_k)
    q, k, v = (rng.standard_normal(shape) for shape in ((2, 4, n_q, 6), (2, 2, n_k, 6), (2, 2, n_k, 3)))
    bias = rng.standard_normal((4, 1, n_k))  # per query head, every query
    options = AttentionOptions(**settings, alibi=True, sinks=np.array([0.5, -1.0, 2.0, 0.0]), bias=bias)
    expected = attention(q, k, v, options)[0]
    for query_block, key_block in ((1, 1), (2, 3), (4, 2), (5, 8), (64, 64)):
        out = attention_blocked(q, k, v, options, query_block=query_block, key_block=key_block, workers=2)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


STACKED = [
    {"window": (0, 0)},
    {"window": (3, 2)},
    {"window": (40, 40)},
    {"causal": "top-left", "window": (2, 0)},
    {"causal": "bottom-right", "window": (6, 3)},
    {"window": (4, 1), "alibi": True, "sinks": np.array([0.5, -1.0, 2.0, 0.0])},
    {"window": (5, 0), "softcap": 2.0, "similarity": "cosine"},
]


@pytest.mark.parametrize("size", [1.0, 300.0], ids=["small logits", "large logits"])
@pytest.mark.parametrize("settings", STACKED, ids=str)
@pytest.mark.parametrize("n_q, n_k", [(9, 9), (7, 19), (19, 7), (40, 33)])
def test_stacked_window_blocks_give_the_reference(settings, n_q, n_k, size):
    """Under a window, whole query blocks whose keys all exist go through one
    product on overlapping views of K and V: the reference's numbers, GQA included."""
    from attncli.core.options import AttentionOptions

    rng = np.random.default_rng(n_q * 100 + n_k)
    q, k, v = (rng.standard_normal(shape) for shape in ((2, 4, n_q, 6), (2, 2, n_k, 6), (2, 2, n_k, 3)))
    options = AttentionOptions(**settings)
    expected = attention(q * size, k, v, options)[0]
    for query_block in (1, 2, 3, 8):
        out = attention_blocked(q * size, k, v, options, query_block=query_block, workers=2)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("settings", STACKED, ids=str)
def test_stacked_window_blocks_in_base_2_give_the_reference(monkeypatch, settings):
    """float32 with small logits: stacked blocks go through exp2 and the band's
    0/1 weights (not ALiBi, which needs the running max, nor the soft-cap,
    which is a tanh of base-e scores); the float64 reference's numbers to
    float32's precision either way."""
    from attncli.core import kernel
    from attncli.core.options import AttentionOptions

    weighted = []
    real_weights = kernel.band_weights
    monkeypatch.setattr(kernel, "band_weights", lambda *a, **kw: weighted.append(a) or real_weights(*a, **kw))
    rng = np.random.default_rng(7)
    shapes = ((2, 4, 120, 6), (2, 2, 110, 6), (2, 2, 110, 3))  # GQA; every setting has stacked blocks
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in shapes)
    options = AttentionOptions(**settings)
    expected = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), options)[0]
    for query_block in (2, 3, 8):
        out = attention_blocked(q, k, v, options, query_block=query_block, workers=2)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)
    assert bool(weighted) == ("alibi" not in settings and "softcap" not in settings)


@pytest.mark.parametrize(
    "settings",
    [
        {"causal": "top-left"},
        {"causal": "bottom-right"},
        {"window": (3, 2)},
        {"causal": "top-left", "window": (9, 0)},
        {"causal": "top-left", "sinks": np.array([0.5, -1.0, 2.0, 0.0])},
        {"window": (4, 4), "similarity": "cosine", "temperature": 0.5},
    ],
    ids=str,
)
@pytest.mark.parametrize("n_q, n_k", [(40, 40), (30, 50), (50, 30)])
def test_blocks_the_band_cuts_in_base_2_give_the_reference(monkeypatch, settings, n_q, n_k):
    """float32 with small logits: key blocks the band cuts (causal's diagonal
    and its halves, a window's edges) go through exp2 and the band's 0/1
    weights; the float64 reference's numbers to float32's precision."""
    from attncli.core import kernel
    from attncli.core.options import AttentionOptions

    weighted = []
    real_weights = kernel.band_weights
    monkeypatch.setattr(kernel, "band_weights", lambda *a, **kw: weighted.append(a) or real_weights(*a, **kw))
    rng = np.random.default_rng(n_q + n_k)
    shapes = ((2, 4, n_q, 6), (2, 2, n_k, 6), (2, 2, n_k, 3))  # GQA
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in shapes)
    options = AttentionOptions(**settings)
    expected = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), options)[0]
    for query_block, key_block in ((8, 8), (16, 4), (64, 64), (5, 7), (128, 16)):
        out = attention_blocked(q, k, v, options, query_block=query_block, key_block=key_block, workers=2)
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)
    assert weighted


def test_band_weights_are_the_band_in_the_logits_layout():
    """The band as 1 and 0, row-major or seen on a [c, r] array (the
    keys-first logits' layout), read-only, and kept."""
    from attncli.core.positions import band_allowed, band_weights

    rows, cols = range(8, 16), range(0, 24)
    allowed = band_allowed(rows, cols, 32, 32, "top-left", (5, 0))
    plain = band_weights(rows, cols, 32, 32, "top-left", (5, 0), np.float32)
    first = band_weights(rows, cols, 32, 32, "top-left", (5, 0), np.float32, keys_first=True)
    np.testing.assert_array_equal(plain, allowed.astype(np.float32))
    np.testing.assert_array_equal(first, plain)
    assert plain.flags.c_contiguous and first.T.flags.c_contiguous and first.dtype == np.float32
    assert not plain.flags.writeable and not first.flags.writeable
    assert band_weights(rows, cols, 32, 32, "top-left", (5, 0), np.float32, keys_first=True) is first


@pytest.mark.parametrize("numbers, parts", [(1, 2 * 3 * 3), (2 * 4 * 6, 2 * 2 * 3), (1 << 20, 2 * 1 * 3)])
def test_work_is_split_over_heads_and_query_blocks(monkeypatch, numbers, parts):
    """batch × parts of heads × query blocks: one head a part when blocks are
    large, as many as BLOCK_NUMBERS allows when they are small."""
    from attncli.core import blocking

    monkeypatch.setattr(blocking, "BLOCK_NUMBERS", numbers)
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((2, 3, 10, 4)), rng.standard_normal((2, 3, 6, 4)), rng.standard_normal((2, 3, 6, 4))
    seen = []
    out = attention_blocked(q, k, v, query_block=4, progress=lambda done, total: seen.append(total))
    assert seen[-1] == parts
    np.testing.assert_allclose(out, attention_steps(q, k, v).output, rtol=1e-12)


def test_skipped_blocks_are_never_computed(monkeypatch):
    """Causal over 8 query blocks × 8 key blocks computes the 36 on or below the
    diagonal; a window of 3 keys to the left, block 0's 4 × 4 logits and then
    the 7 whole blocks whose keys all exist, stacked: 4 queries × their 7 keys
    each (a stacked block's keys must fit in one key block: 8 here)."""
    from attncli.core import kernel

    cells = []
    real_scores, real_product = kernel.scores, kernel.product

    def scores(p, rows, cols, factor, keys_first=False):
        out = real_scores(p, rows, cols, factor, keys_first)
        cells.append(out.size)
        return out

    def product(q, k, similarity, factor, keys_first=False):
        out = real_product(q, k, similarity, factor, keys_first)
        cells.append(out.size)
        return out

    monkeypatch.setattr(kernel, "scores", scores)
    monkeypatch.setattr(kernel, "product", product)
    q, k, v = problem(32, 32, np.float64)
    out = attention_blocked(q, k, v, causal=True, query_block=4, key_block=4, workers=1)
    np.testing.assert_allclose(out, attention_steps(q, k, v, causal=True).output, rtol=1e-12)
    assert len(cells) == 36 and sum(cells) == 36 * 16
    cells.clear()
    out = attention_blocked(q, k, v, window=(3, 0), query_block=4, key_block=8, workers=1)
    np.testing.assert_allclose(out, attention_steps(q, k, v, window=(3, 0)).output, rtol=1e-12)
    assert sorted(cells) == [4 * 4, 7 * 4 * 7]  # in any order (the costliest go first)


def test_parts_hold_views_and_gqa_shares_k_and_v():
    """Every part of the work is a view of the inputs: with GQA a part is one
    K/V head and its group of query heads, K and V never repeated."""
    from attncli.core.logits import prepare
    from attncli.core.options import AttentionOptions

    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((2, 8, 5, 4)), rng.standard_normal((2, 2, 7, 4)), rng.standard_normal((2, 2, 7, 3))
    p = prepare(q, k, v, AttentionOptions())
    parts = p.heads()
    assert len(parts) == 2 * 2  # batch × K/V heads
    for where, part in parts:
        assert len(where) == 2  # [batch, K/V head]
        assert part.q.shape == (1, 1, 4, 5, 4) and part.k.shape == (1, 1, 1, 7, 4)
        assert np.shares_memory(part.q, q) and np.shares_memory(part.k, k) and np.shares_memory(part.v, v)
    assert len(p.heads(together=2)) == 2


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"causal": "top-left"},
        {"window": (3, 1)},
        {"softcap": 5.0},
        {"sinks": np.array([0.5, -1.0])},
        {"mask": "random"},
    ],
    ids=str,
)
@pytest.mark.parametrize("size, bounded", [(1.0, True), (300.0, False)], ids=["no running max", "running max"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_both_softmax_paths_give_the_reference(settings, size, bounded, dtype):
    """Small logits (|logit| ≤ _exp_safe, known from ‖q‖ ‖k‖) need no running
    max: exp(logit) is summed as it is (in float32, the blocks with no −inf
    in base 2, through exp2). Large ones go through the online softmax's
    running max. Both give the reference's numbers."""
    from attncli.core import kernel
    from attncli.core.logits import prepare
    from attncli.core.options import AttentionOptions

    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((2, 9, 6)) * size, rng.standard_normal((2, 13, 6)), rng.standard_normal((2, 13, 3))
    q, k, v = (m.astype(dtype) for m in (q, k, v))
    if settings.get("mask") == "random":
        settings = {"mask": rng.random((9, 13)) < 0.4}
    options = AttentionOptions(**settings)
    small = prepare(q, k, v, options).logit_bound <= kernel._exp_safe(q.dtype)
    assert small == (bounded or "softcap" in settings)  # a soft-cap of 5 bounds them anyway
    base2 = small and dtype == np.float32 and "softcap" not in settings and "mask" not in settings
    chosen = {
        (False, False): kernel.Softmax.RUNNING_MAX,
        (True, False): kernel.Softmax.FROM_ZERO,
        (True, True): kernel.Softmax.BASE_2,
    }[small, base2]
    assert kernel._choose(prepare(q, k, v, options)) is chosen
    expected = attention(*(m.astype(np.float64) for m in (q, k, v)), options)[0]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for key_block in (4, 13):
        out = attention_blocked(q, k, v, options, query_block=4, key_block=key_block, workers=2)
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


def test_every_worker_thread_runs_even_after_a_tiny_first_call():
    """The kept pool starts all its threads at once (a ThreadPoolExecutor starts
    one on submit only when none is idle): two blocks that each wait for the
    other finish only if both run at the same time."""
    import threading

    from attncli.core.parallel import _pool, map_blocks

    map_blocks(lambda block: None, list(range(8)), 2, None)  # blocks faster than their submission
    assert len(_pool(2)._threads) == 2  # CPython's ThreadPoolExecutor keeps its threads here
    both = threading.Barrier(2)
    map_blocks(lambda block: both.wait(timeout=10), [0, 1], 2, None)  # BrokenBarrierError with one thread


def test_an_error_drops_the_blocks_not_yet_started():
    """With no progress to report, the calling thread waits once for every
    block, but a block's error ends the wait: it is raised, and the blocks
    not yet started never run."""
    import time

    from attncli.core.parallel import map_blocks

    ran = []

    def fn(block):
        if block == 0:
            raise ValueError("block 0")
        time.sleep(0.01)
        ran.append(block)

    with pytest.raises(ValueError, match="block 0"):
        map_blocks(fn, list(range(100)), 2, None)
    assert len(ran) < 10


@pytest.mark.parametrize("heads, edge", [(1, 256), (16, 128)])
def test_window_ends_go_as_few_blocks_and_stacks_share_out(monkeypatch, heads, edge):
    """Under a window of 256 (query blocks of 32), the first 256 queries, which
    no stack takes, go as blocks of up to QUERY_BLOCK rows holding at most
    BLOCK_NUMBERS logits (16 heads × 128 rows × 385 keys), not one block of
    32 each; the stacks come in a multiple of the workers and take every
    other query once. The float64 reference's numbers."""
    from attncli.core import kernel
    from attncli.core.blocking import Stack
    from attncli.core.options import AttentionOptions

    seen = []
    real_map = kernel.map_blocks

    def map_blocks(fn, blocks, workers, progress):
        seen.extend(block[2] for block in blocks)
        real_map(fn, blocks, workers, progress)

    monkeypatch.setattr(kernel, "map_blocks", map_blocks)
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((heads, 1024, 16)).astype(np.float32) for _ in range(3))
    options = AttentionOptions(window=(256, 0))
    expected = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), options)[0]
    for workers in (1, 2, 3):
        seen.clear()
        out = attention_blocked(q, k, v, options, workers=workers)
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)
        ends = sorted((b.start, b.stop) for b in seen if isinstance(b, slice))
        stacks = [b for b in seen if isinstance(b, Stack)]
        assert ends == [(i, i + edge) for i in range(0, 256, edge)]
        assert len(stacks) % workers == 0 and all(s.size == 32 for s in stacks)
        assert sorted(i for s in stacks for i in range(s.start, s.start + s.count * s.size)) == list(range(256, 1024))


def test_keys_first_product_is_the_same_product():
    """The kernel's scores made as (K Q^T)^T: the same numbers, seen as [..., r, c]."""
    from attncli.core.logits import product

    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 3, 5, 8)), rng.standard_normal((2, 3, 7, 8))
    for similarity in ("dot", "cosine"):
        made = product(q, k, similarity, 0.5, keys_first=True)
        assert made.shape == (2, 3, 5, 7)
        np.testing.assert_allclose(made, product(q, k, similarity, 0.5), rtol=1e-14, atol=1e-14)


def test_costliest_blocks_go_first(monkeypatch):
    """Causal: the pool gets the query blocks that see the most keys first, so
    that the blocks it hands out last are the small ones."""
    from attncli.core import kernel

    seen = []
    real_map = kernel.map_blocks

    def map_blocks(fn, blocks, workers, progress):
        seen.extend(block[2].start for block in blocks)
        real_map(fn, blocks, workers, progress)

    monkeypatch.setattr(kernel, "map_blocks", map_blocks)
    q, k, v = problem(32, 32, np.float64)
    out = attention_blocked(q, k, v, causal=True, query_block=8, workers=2)
    np.testing.assert_allclose(out, attention_steps(q, k, v, causal=True).output, rtol=1e-12)
    assert seen == [24, 16, 8, 0]


@pytest.mark.parametrize(
    "settings",
    [
        {"causal": "top-left"},
        {"causal": "bottom-right"},
        {"window": (40, 3)},
        {"causal": "top-left", "sinks": np.array([0.5, -1.0])},
    ],
    ids=str,
)
def test_diagonal_blocks_cut_by_halves_of_the_queries(settings, monkeypatch):
    """A partly masked key block (causal's diagonal) goes as two halves of its
    queries, each against the keys it may see: the reference's numbers."""
    from attncli.core import kernel

    cut = []
    real_halves = kernel._halves

    def halves(p, rows, cols):
        out = real_halves(p, rows, cols)
        cut.append(out is not None)
        return out

    monkeypatch.setattr(kernel, "_halves", halves)
    from attncli.core.options import AttentionOptions

    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((2, 150, 8)), rng.standard_normal((2, 200, 8)), rng.standard_normal((2, 200, 3))
    options = AttentionOptions(**settings)
    expected = attention(q, k, v, options)[0]
    out = attention_blocked(q, k, v, options, query_block=64, key_block=64, workers=2)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert any(cut)


# What each setting of AttentionOptions answers to the kernel's three questions
# about ``combine`` (``logits.Problem``): (a value, the logits depend on j − i
# alone, combine is exact in base 2, the logits have a known bound). A new
# setting fails the first test below until it has its answers there and here.
KERNEL_ANSWERS = {
    "scale": (0.5, True, True, True),
    "temperature": (2.0, True, True, True),
    "similarity": ("cosine", True, True, True),
    "causal": ("top-left", True, True, True),
    "mask": (np.random.default_rng(4).random((9, 9)) < 0.6, False, True, True),
    "bias": (np.random.default_rng(4).standard_normal((9, 9)), False, False, False),
    "softcap": (0.5, True, False, True),
    "window": ((2, 1), True, True, True),
    "alibi": (True, True, False, False),
    "alibi_slopes": (np.array([0.5, 0.25, 0.3, 1.5]), True, False, False),
    "rope": ("neox", True, True, True),
    "sinks": (np.array([0.5, -1.0, 2.0, 3.0]), True, True, True),
}


def test_every_option_answers_the_kernels_questions():
    """Each setting alone: ``Problem``'s answers are the table's, and they are
    true of what ``combine`` does. Queries all alike and keys all alike, so
    that only the options can make the logit of (i, j) depend on more than
    j − i; scores made with log2(e) in the factor, which ``combine`` must turn
    into log2(e) times the logits; every finite logit and sink within the
    bound."""
    import dataclasses
    import math

    from attncli.core.kernel import LOG2E
    from attncli.core.logits import combine, prepare, scores
    from attncli.core.options import AttentionOptions, Rope

    fields = {field.name for field in dataclasses.fields(AttentionOptions)}
    assert fields == set(KERNEL_ANSWERS), (
        "a new setting: answer logits.Problem's logit_bound, exact_in_base2 and "
        "logits_are_band_functions for it, then add it to KERNEL_ANSWERS"
    )
    rng = np.random.default_rng(8)
    q = np.broadcast_to(rng.standard_normal(6), (1, 4, 9, 6))  # [1, 4, 9, 6] the same query at every position
    k = np.broadcast_to(rng.standard_normal(6) * 2, (1, 4, 9, 6))
    v = rng.standard_normal((1, 4, 9, 3))
    for name, (value, band, base2, bounded) in KERNEL_ANSWERS.items():
        p = prepare(q, k, v, AttentionOptions(**{name: Rope(value) if name == "rope" else value}))
        assert (p.logits_are_band_functions, p.exact_in_base2, math.isfinite(p.logit_bound)) == (band, base2, bounded)
        logits, _ = combine(scores(p, factor=p.factor), p)  # [1, 4, 9, 9]
        in_base2, _ = combine(scores(p, factor=p.factor * LOG2E), p)
        toeplitz = np.allclose(logits[..., 1:, 1:], logits[..., :-1, :-1], rtol=0, atol=1e-12)
        assert toeplitz == band, name
        assert np.allclose(in_base2, logits * LOG2E, rtol=1e-12, atol=1e-12) == base2, name
        if bounded:
            finite = logits[np.isfinite(logits)]
            sinks = np.zeros(1) if p.sinks is None else p.sinks
            assert max(np.abs(finite).max(), np.abs(sinks).max()) <= p.logit_bound, name


@pytest.mark.parametrize("settings", [{"mask": "random"}, {"bias": "random"}, {"mask": "rows"}], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_plain_online_softmax_alone_gives_the_loops_numbers_with_a_mask_or_bias(monkeypatch, settings, dtype):
    """Every tuned choice turned off (the running max always, no stacks): a
    mask, a bias and queries that may attend to nothing, against
    ``tests/reference.py``."""
    from attncli.core import blocking, kernel
    from attncli.core.options import AttentionOptions

    from reference import heads_attention

    monkeypatch.setattr(kernel, "_choose", lambda p: kernel.Softmax.RUNNING_MAX)
    monkeypatch.setattr(blocking, "stack_band", lambda *args: None)
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((2, 4, 11, 6), (2, 2, 14, 6), (2, 2, 14, 3)))
    (kind,) = settings
    if settings[kind] == "rows":
        array = np.broadcast_to(np.arange(11)[:, None] % 3 != 0, (11, 14))  # every third query sees nothing
    else:
        array = rng.random((2, 4, 11, 14)) < 0.5 if kind == "mask" else rng.standard_normal((2, 4, 11, 14))
    options = AttentionOptions(**{kind: array}, causal="bottom-right", sinks=np.array([0.5, -1.0, 2.0, 0.0]))
    full = np.broadcast_to(array, (2, 4, 11, 14))
    expected, _ = heads_attention(
        q, k, v, causal="bottom-right", sinks=options.sinks, **{"allowed" if kind == "mask" else "bias": full}
    )
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for query_block, key_block in ((3, 4), (64, 64)):
        out = attention_blocked(q, k, v, options, query_block=query_block, key_block=key_block, workers=2)
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # combine's slope × distance overflows
@pytest.mark.parametrize("dtype, slope", [(np.float32, 1e38), (np.float64, 1e307)])
def test_a_key_block_whose_rows_are_all_minus_infinity_adds_nothing(dtype, slope):
    """ALiBi slopes so large that every logit off the diagonal is −∞: a key
    block wholly below the diagonal holds rows of −∞ only, which add nothing
    to the running sums (before issue 24 they made NaN there, and the kernel
    said V overflowed). Each query then sees its own key alone: the
    reference's output, V."""
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((1, 1, 40, 8)).astype(dtype) for _ in range(3))
    options = {"alibi_slopes": np.array([slope]), "causal": "top-left"}
    expected = attention(q, k, v, **options)[0]
    np.testing.assert_array_equal(expected, v)
    for query_block, key_block in ((8, 8), (16, 4)):
        out = attention_blocked(q, k, v, query_block=query_block, key_block=key_block, workers=1, **options)
        np.testing.assert_array_equal(out, expected)
