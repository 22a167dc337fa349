"""The blocked backward (core/grad_blocks.py, FlashAttention-2's): the same gradients
as the whole closed form on every option, in blocks small enough that there
are many; the blocks the causal triangle and the window forbid are never
visited; the forward kernel's log-sum-exp it starts from."""

import numpy as np
import pytest

import attncli.core.grad_blocks as gb
from attncli import AttentionOptions, attention_grad
from attncli.core.options import Rope

RTOL, ATOL = 1e-12, 1e-13  # two float64 summation orders of the same closed form (atol: per unit of max|g|)


def problem(seed, h_q=4, h_kv=2, n_q=37, n_k=45, d_k=8, d_v=5, batch=2):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(batch, h_q, n_q, d_k))
    k = rng.normal(size=(batch, h_kv, n_k, d_k))
    v = rng.normal(size=(batch, h_kv, n_k, d_v))
    dout = rng.normal(size=(batch, h_q, n_q, d_v))
    return q, k, v, dout


def assert_same(blocked, whole, what=""):
    assert sorted(blocked) == sorted(whole)
    for key, g in whole.items():
        assert blocked[key].shape == g.shape, key
        scale = max(1.0, float(np.abs(g).max()))  # large logits: dP − D cancels, to a few ulps of the largest
        np.testing.assert_allclose(blocked[key], g, rtol=RTOL, atol=ATOL * scale, err_msg=f"{what} {key}")


def mask_with_an_empty_row(n_q, n_k, seed=5):
    allowed = np.random.default_rng(seed).random((n_q, n_k)) < 0.7
    allowed[3] = False  # a query that may see nothing
    return allowed


OPTIONS = {
    "plain": {},
    "scale and temperature": {"scale": 0.7, "temperature": 1.6},
    "causal top-left": {"causal": "top-left"},
    "causal bottom-right": {"causal": "bottom-right"},
    "window both sides": {"window": (9, 4)},
    "window left only": {"window": (6, 0)},
    "window right open": {"window": (3, -1)},
    "window left open": {"window": (-1, 2)},
    "causal and a window": {"causal": "top-left", "window": (5, 3)},
    "mask with an empty row": {"mask": "empty row"},
    "softcap": {"softcap": 0.8},
    "softcap and a bias": {"softcap": 1.5, "bias": (1, 1)},
    "alibi": {"alibi": True},
    "alibi causal bottom-right": {"alibi": True, "causal": "bottom-right"},
    "rope neox": {"rope": Rope("neox")},
    "rope gptj, partial, offset": {"rope": Rope("gptj", theta=100.0, dim=4, offset=3)},
    "cosine": {"similarity": "cosine", "scale": 3.0},
    "sinks": {"sinks": True},
    "sinks, a mask with an empty row, causal": {"sinks": True, "mask": "empty row", "causal": "top-left"},
    "bias shared by batches and heads": {"bias": ()},
    "bias per head": {"bias": ("heads",)},
    "bias per batch and head": {"bias": ("batch", "heads")},
    "bias per key, per head": {"bias": ("batch", "heads", "one query")},
    "bias per query": {"bias": ("one key",)},
    "large logits (a running max)": {"scale": 40.0, "causal": "bottom-right"},
    "everything": {
        "softcap": 1.5,
        "alibi": True,
        "rope": Rope("neox"),
        "sinks": True,
        "causal": "bottom-right",
        "window": (7, -1),
        "temperature": 0.8,
        "bias": ("heads",),
        "mask": "empty row",
    },
}


def options_for(name, h_q, n_q, n_k, batch=2, seed=3):
    settings = dict(OPTIONS[name])
    rng = np.random.default_rng(seed)
    if settings.get("sinks") is True:
        settings["sinks"] = np.linspace(-1.0, 1.5, h_q)
    if settings.get("mask") == "empty row":
        settings["mask"] = mask_with_an_empty_row(n_q, n_k)
    if "bias" in settings:
        axes = settings["bias"]
        if axes == (1, 1):
            shape = (n_q, n_k)
        else:
            shape = (
                ((batch,) if "batch" in axes else ())
                + ((h_q,) if "heads" in axes else ())
                + (1 if "one query" in axes else n_q, 1 if "one key" in axes else n_k)
            )
        settings["bias"] = rng.normal(size=shape)
    return AttentionOptions(**settings)


SHAPES = {"n_q < n_k": (37, 45), "n_q > n_k": (45, 37)}


@pytest.mark.parametrize("name", list(OPTIONS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)], ids=["mha", "gqa"])
def test_blocked_backward_is_the_whole_one_in_many_blocks(name, shape, heads, monkeypatch):
    monkeypatch.setattr(gb, "SMALLEST_ROWS", 2)  # the band's blocks cut in halves of queries, as at full size
    n_q, n_k = SHAPES[shape]
    q, k, v, dout = problem(len(name) + n_q, *heads, n_q=n_q, n_k=n_k)
    options = options_for(name, heads[0], n_q, n_k)
    whole = attention_grad(q, k, v, dout, options, block=0).named()
    for block, chunk in ((4, 16), (16, gb.KEY_CHUNK)):  # keys at hand 4 blocks at a time, or all of them
        monkeypatch.setattr(gb, "KEY_CHUNK", chunk)
        assert_same(attention_grad(q, k, v, dout, options, block=block).named(), whole, f"{name} block {block}")


@pytest.mark.parametrize("name", ["plain", "causal top-left", "causal bottom-right", "window both sides", "everything"])
def test_one_head_goes_in_key_ranges_and_the_sums_do_not_depend_on_the_workers(name, monkeypatch):
    """2-D inputs are one part: its keys go in UNITS ranges, each with a dQ of its own, added up in order."""
    units = []
    original = gb._units
    monkeypatch.setattr(gb, "_units", lambda *a: units.append(original(*a)) or units[-1])
    rng = np.random.default_rng(4)
    n_q, n_k = 70, 90
    q, k, v, dout = (
        rng.normal(size=(n_q, 8)),
        rng.normal(size=(n_k, 8)),
        rng.normal(size=(n_k, 6)),
        rng.normal(size=(n_q, 6)),
    )
    settings = dict(OPTIONS[name])
    settings["sinks"] = np.array([0.5]) if settings.get("sinks") else None
    if settings.get("mask") == "empty row":
        settings["mask"] = mask_with_an_empty_row(n_q, n_k)
    if settings.get("bias"):
        settings["bias"] = rng.normal(size=(n_q, n_k))
    options = AttentionOptions(**settings)
    one = attention_grad(q, k, v, dout, options, block=8, workers=1).named()
    two = attention_grad(q, k, v, dout, options, block=8, workers=2).named()
    assert len(units[0]) == gb.UNITS and sorted(unit.key_range for unit in units[0]) == list(range(gb.UNITS))
    for key in one:
        if key != "dbias":  # a bias shared by the key ranges is added to in the order the threads come
            np.testing.assert_array_equal(two[key], one[key], err_msg=key)
    assert_same(one, attention_grad(q, k, v, dout, options, block=0).named(), name)


def allowed_pairs(n_q, n_k, causal, window):
    """[n_q, n_k] bool, where query i may see key j, written out here (FlashAttention's window)."""
    shift = n_k - n_q
    i, j = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    allowed = np.ones((n_q, n_k), dtype=bool)
    if causal is not None:
        allowed &= j <= i + (shift if causal == "bottom-right" else 0)
    if window is not None:
        left, right = window
        if left != -1:
            allowed &= j >= i + shift - left
        if right != -1:
            allowed &= j <= i + shift + right
    return allowed


BANDS = {
    "causal top-left, square": (64, 64, "top-left", None),
    "causal top-left, more keys": (48, 80, "top-left", None),
    "causal bottom-right, more keys": (48, 80, "bottom-right", None),
    "causal bottom-right, more queries": (80, 48, "bottom-right", None),
    "window (16, 0)": (96, 96, None, (16, 0)),
    "window (5, 9), more keys": (64, 100, None, (5, 9)),
}


@pytest.mark.parametrize("band", list(BANDS))
@pytest.mark.parametrize("smallest", [2, 1000], ids=["halves", "whole blocks"])
def test_blocks_the_band_forbids_are_never_visited(band, smallest, monkeypatch):
    monkeypatch.setattr(gb, "SMALLEST_ROWS", smallest)
    n_q, n_k, causal, window = BANDS[band]
    allowed = allowed_pairs(n_q, n_k, causal, window)
    visits = []
    original = gb._backward_block

    def counted(p, rows, cols, inside, *rest):
        visits.append((rows, cols, inside))
        return original(p, rows, cols, inside, *rest)

    monkeypatch.setattr(gb, "_backward_block", counted)
    rng = np.random.default_rng(9)
    q, k, v, dout = (
        rng.normal(size=(n_q, 8)),
        rng.normal(size=(n_k, 8)),
        rng.normal(size=(n_k, 4)),
        rng.normal(size=(n_q, 4)),
    )
    options = AttentionOptions(causal=causal, window=window)
    got = attention_grad(q, k, v, dout, options, block=8).named()
    covered = np.zeros((n_q, n_k), dtype=int)
    for rows, cols, inside in visits:
        seen = allowed[rows, cols]
        assert seen.any(), f"a block the band forbids was visited: {rows}, {cols}"
        assert seen.all() or not inside, f"a block marked inside is cut by the band: {rows}, {cols}"
        covered[rows, cols] += 1
    assert (covered[allowed] == 1).all()  # every allowed pair once
    computed = sum((r.stop - r.start) * (c.stop - c.start) for r, c, _ in visits)
    blocks_touched = sum(allowed[i : i + 8, j : j + 8].any() for i in range(0, n_q, 8) for j in range(0, n_k, 8))
    assert computed <= 64 * blocks_touched  # no more than the 8 × 8 blocks the band touches
    if smallest == 1000:
        assert len(visits) == blocks_touched
    assert_same(got, attention_grad(q, k, v, dout, options, block=0).named(), band)


def test_causal_visits_about_half_the_blocks_of_full():
    plan = gb._block_plan
    from attncli.core.logits import prepare

    x = np.zeros((1024, 8))
    full = plan(prepare(x, x, x, AttentionOptions()), 128, 128)
    causal = plan(prepare(x, x, x, AttentionOptions(causal="top-left")), 128, 128)

    def logits(p):
        return sum((rows.stop - rows.start) * (cols.stop - cols.start) for rows, blocks in p for cols, _ in blocks)

    assert logits(full) == 1024 * 1024
    # 28 blocks of 128 × 128 below the diagonal, 8 on it as 64 × 64 and 64 × 128 (3/4 of a block)
    assert logits(causal) == (28 + 8 * 3 / 4) * 128 * 128


def test_gqa_shares_k_and_v_with_every_query_head_of_its_group(monkeypatch):
    """Each part's K and V are views of the inputs (no copy per query head);
    one product sums dK and dV over the group."""
    q, k, v, dout = problem(6, 8, 2, n_q=20, n_k=24)
    seen = []
    original = gb._backward_part

    def watched(unit, qm, km, vm, *rest):
        seen.append((np.shares_memory(km, k), np.shares_memory(vm, v), unit.part.group))
        return original(unit, qm, km, vm, *rest)

    monkeypatch.setattr(gb, "_backward_part", watched)
    options = AttentionOptions(causal="bottom-right")
    got = attention_grad(q, k, v, dout, options, block=8).named()
    assert seen and all(seen_k and seen_v and group == 4 for seen_k, seen_v, group in seen)
    assert_same(got, attention_grad(q, k, v, dout, options, block=0).named())
    np.testing.assert_allclose(
        got["dk"],
        attention_grad(q, np.repeat(k, 4, axis=1), np.repeat(v, 4, axis=1), dout, options)
        .dk.reshape(2, 2, 4, 24, 8)
        .sum(axis=2),
        rtol=RTOL,
        atol=ATOL,
    )


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"causal": "bottom-right", "sinks": np.array([0.5, -2.0])},
        {"scale": 50.0},
        {"window": (24, 0)},
        {"window": (24, 0), "scale": 50.0},
        {"mask": "empty row"},
    ],
    ids=["bounded", "causal with sinks", "a running max", "window stacks", "window, running max", "empty row"],
)
def test_the_forward_kernel_gives_each_row_its_log_sum_exp(settings):
    from attncli.core.kernel import forward
    from attncli.core.logits import prepare
    from attncli.core.reference import reference

    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 300, 8)), rng.normal(size=(2, 300, 8)), rng.normal(size=(2, 300, 4))
    settings = dict(settings)
    if settings.get("mask") == "empty row":
        settings["mask"] = mask_with_an_empty_row(300, 300)
    options = AttentionOptions(**settings)
    p = prepare(q, k, v, options)
    lse = np.full(p.logits_shape[:-1] + (1,), np.nan)
    out = forward(p, query_block=32, key_block=128, lse=lse)
    steps = reference(q, k, v, options)
    np.testing.assert_allclose(out, steps.output, rtol=1e-12, atol=1e-13)
    with np.errstate(invalid="ignore"):
        weights = np.exp(steps.logits - lse)  # P = exp(logits − L)
    if settings.get("mask") is not None:
        assert np.isneginf(lse[:, 3]).all()  # log 0: the row that sees nothing
        weights[:, 3] = 0.0
    np.testing.assert_allclose(weights, steps.weights, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("causal", ["top-left", "bottom-right"])
def test_blocked_backward_agrees_with_torch_autograd_live(causal):
    """Several blocks, GQA, n_q ≠ n_k, against torch autograd of SDPA in float64 (the mask as SDPA's attn_mask)."""
    torch = pytest.importorskip("torch")
    q, k, v, dout = problem(8, 4, 2, n_q=150, n_k=200, d_k=16, d_v=8, batch=1)
    allowed = allowed_pairs(150, 200, causal, None)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(allowed), enable_gqa=True)
    out.backward(torch.tensor(dout))
    grads = attention_grad(q, k, v, dout, AttentionOptions(causal=causal), block=32)
    for got, want in ((grads.dq, tq.grad), (grads.dk, tk.grad), (grads.dv, tv.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-10)


def test_the_progress_callback_is_told_of_every_part():
    """attention_grad(progress=) counts the blocked backward's parts up to the whole (attn grad's bar)."""
    from attncli import attention_grad

    rng = np.random.default_rng(3)
    q, k, v, dout = (rng.normal(size=(2, 3, 300, 8)) for _ in range(4))
    calls = []
    grads = attention_grad(q, k, v, dout, block=64, progress=lambda done, total: calls.append((done, total)))
    whole = attention_grad(q, k, v, dout, block=0)
    assert calls and calls[-1][0] == calls[-1][1] and [d for d, _ in calls] == list(range(1, len(calls) + 1))
    np.testing.assert_allclose(grads.dq, whole.dq, atol=1e-12)
