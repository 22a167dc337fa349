"""The fused forward and backward (core/grad_fused.py), attention_grad's path past
WHOLE_CELLS: the same gradients and output as the whole closed form and as the
two-pass blocks on every option, in blocks small enough that there are many;
the soft-cap and too many keys go the two-pass way; blocks stay within CELLS;
keys no query of a block may see are never computed; the sums do not depend on
the workers; and torch autograd agrees, live."""

import numpy as np
import pytest
from test_grad_blocks import OPTIONS, SHAPES, assert_same, options_for, problem

import attncli.core.grad as grad
import attncli.core.grad_fused as gf
from attncli import AttentionOptions, attention_grad


def small_blocks(monkeypatch, cells=16 * 45, band_rows=16):
    """attention_grad's automatic choice on small inputs as on large: fused, in many blocks."""
    monkeypatch.setattr(grad, "WHOLE_CELLS", 0)
    monkeypatch.setattr(gf, "CELLS", cells)
    monkeypatch.setattr(gf, "BAND_ROWS", band_rows)
    monkeypatch.setattr(gf, "SMALLEST_ROWS", 4)


def watch_fused(monkeypatch):
    """A list that gets one entry for each call that took the fused path."""
    taken = []
    original = grad.fused
    monkeypatch.setattr(grad, "fused", lambda *a, **k: taken.append(1) or original(*a, **k))
    return taken


@pytest.mark.parametrize("name", list(OPTIONS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)], ids=["mha", "gqa"])
def test_fused_is_the_whole_closed_form_in_many_blocks(name, shape, heads, monkeypatch):
    n_q, n_k = shape = SHAPES[shape]
    q, k, v, dout = problem(7, *heads, n_q=n_q, n_k=n_k)
    options = options_for(name, heads[0], n_q, n_k)
    whole = attention_grad(q, k, v, dout, options, block=0)
    small_blocks(monkeypatch)
    taken = watch_fused(monkeypatch)
    got = attention_grad(q, k, v, dout, options)
    assert bool(taken) == (options.softcap is None), "the fused path takes every option but the soft-cap"
    assert got.steps is None
    assert_same(got.named(), whole.named(), name)
    np.testing.assert_allclose(got.output, whole.output, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", [n for n in OPTIONS if "softcap" not in OPTIONS[n] and "softcap" not in n])
def test_fused_and_two_pass_blocks_agree_at_their_own_sizes(name):
    """The two paths past WHOLE_CELLS against each other, at their default block sizes."""
    q, k, v, dout = problem(11, 4, 2, n_q=300, n_k=260, d_k=16, d_v=8, batch=1)
    options = options_for(name, 4, 300, 260, batch=1)
    fused = attention_grad(q, k, v, dout, options)
    assert fused.steps is None
    two_pass = attention_grad(q, k, v, dout, options, block=grad.BLOCK)
    assert_same(fused.named(), two_pass.named(), name)
    np.testing.assert_allclose(fused.output, two_pass.output, rtol=1e-12, atol=1e-13)


def test_the_soft_cap_and_too_many_keys_go_the_two_pass_way(monkeypatch):
    taken = watch_fused(monkeypatch)
    q, k, v, dout = problem(2, 2, 2, n_q=200, n_k=300, d_k=8, d_v=8, batch=1)
    attention_grad(q, k, v, dout, AttentionOptions(softcap=3.0))
    assert not taken
    attention_grad(q, k, v, dout)
    assert len(taken) == 1
    monkeypatch.setattr(gf, "CELLS", 300 * gf.SMALLEST_ROWS - 1)  # a block of SMALLEST_ROWS queries no longer fits
    attention_grad(q, k, v, dout)
    assert len(taken) == 1


@pytest.mark.parametrize("options", [{}, {"causal": "top-left"}, {"window": (20, 5)}], ids=["full", "causal", "window"])
def test_blocks_stay_within_cells_and_compute_no_key_their_queries_cannot_see(options, monkeypatch):
    """Every block's logits (E and dS) ≤ CELLS numbers, whatever n is; under causal about
    half the logits of full are computed (the band's cut keys of each block, and no more)."""
    small_blocks(monkeypatch, cells=64 * 100, band_rows=32)
    computed, largest = [], []
    original = gf._Part.buffer

    def watched(self, name, *shape):
        size = int(np.prod(shape))
        if name in ("e", "ds"):
            largest.append(size)
        if name == "e":
            computed.append(size)
        return original(self, name, *shape)

    monkeypatch.setattr(gf._Part, "buffer", watched)
    q, k, v, dout = problem(4, 2, 2, n_q=256, n_k=256, d_k=8, d_v=8, batch=1)
    got = attention_grad(q, k, v, dout, AttentionOptions(**options))
    assert max(largest) <= gf.CELLS
    allowed = (np.tri(256, 256, dtype=bool) if options.get("causal") else np.ones((256, 256), bool)).sum() * 2
    if "window" in options:
        i, j = np.indices((256, 256))
        allowed = ((j - i >= -20) & (j - i <= 5)).sum() * 2
    assert allowed <= sum(computed) <= allowed + 2 * 256 * 32  # at most one band_rows × band_rows square a block
    assert_same(got.named(), attention_grad(q, k, v, dout, AttentionOptions(**options), block=0).named())


@pytest.mark.parametrize("scaled", ["v", "dout"])
def test_values_too_large_for_an_unnormalised_e_take_the_running_max(scaled, monkeypatch):
    """Small logits but V or dO so large that exp(logit) unnormalised could overflow
    in E V or E ∘ (dP − D): each row's max is taken first, and the gradients are the
    whole closed form's."""
    small_blocks(monkeypatch)
    taken = []
    original = gf._no_max_needed
    monkeypatch.setattr(gf, "_no_max_needed", lambda *a: taken.append(original(*a)) or taken[-1])
    q, k, v, dout = problem(5, 4, 2, n_q=60, n_k=50)
    options = AttentionOptions(causal="top-left")
    inputs = {"v": v, "dout": dout}
    inputs[scaled] = inputs[scaled] * 1e240
    got = attention_grad(q, k, inputs["v"], inputs["dout"], options)
    assert taken == [False]
    assert_same(got.named(), attention_grad(q, k, inputs["v"], inputs["dout"], options, block=0).named(), scaled)
    taken.clear()
    attention_grad(q, k, v, dout, options)
    assert taken == [True]


@pytest.mark.parametrize("heads", [(1, 1), (4, 2)], ids=["one head", "gqa two kv heads"])
def test_one_head_goes_in_query_ranges_and_the_sums_do_not_depend_on_the_workers(heads, monkeypatch):
    small_blocks(monkeypatch)
    units = []
    original = gf._units
    monkeypatch.setattr(gf, "_units", lambda *a: units.append(original(*a)) or units[-1])
    q, k, v, dout = problem(9, *heads, n_q=200, n_k=180, d_k=8, d_v=6, batch=1)
    options = AttentionOptions(causal="bottom-right", sinks=np.linspace(-1, 1, heads[0]))
    one = attention_grad(q, k, v, dout, options, workers=1)
    two = attention_grad(q, k, v, dout, options, workers=2)
    assert len(units[0]) == gf.UNITS and any(unit.own for unit in units[0])  # fewer heads than UNITS: query ranges
    for key, g in one.named().items():
        np.testing.assert_array_equal(two.named()[key], g, err_msg=key)
    assert_same(one.named(), attention_grad(q, k, v, dout, options, block=0).named())


def test_the_progress_callback_is_told_of_every_unit(monkeypatch):
    taken = watch_fused(monkeypatch)
    rng = np.random.default_rng(3)
    q, k, v, dout = (rng.normal(size=(2, 3, 300, 8)) for _ in range(4))
    calls = []
    grads = attention_grad(q, k, v, dout, progress=lambda done, total: calls.append((done, total)))
    assert taken and calls[-1] == (6, 6) and [d for d, _ in calls] == list(range(1, 7))
    np.testing.assert_allclose(grads.dq, attention_grad(q, k, v, dout, block=0).dq, atol=1e-12)


@pytest.mark.parametrize("causal", [None, "top-left", "bottom-right"])
def test_fused_agrees_with_torch_autograd_live(causal, monkeypatch):
    """GQA, n_q ≠ n_k, several blocks, against torch autograd of SDPA in float64 (causal as SDPA's attn_mask)."""
    torch = pytest.importorskip("torch")
    taken = watch_fused(monkeypatch)
    monkeypatch.setattr(gf, "CELLS", 200 * 2 * 64)  # blocks of 64 queries with their 2 heads
    q, k, v, dout = problem(8, 4, 2, n_q=250, n_k=200, d_k=16, d_v=8, batch=1)
    allowed = np.ones((250, 200), dtype=bool)
    if causal is not None:
        allowed = np.tri(250, 200, k=200 - 250 if causal == "bottom-right" else 0, dtype=bool)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(allowed), enable_gqa=True)
    out.backward(torch.tensor(dout))
    grads = attention_grad(q, k, v, dout, AttentionOptions(causal=causal))
    assert taken
    rows = allowed.any(axis=-1)  # torch gives NaN to a query that may see nothing; attn gives 0
    np.testing.assert_allclose(grads.output[..., rows, :], out.detach().numpy()[..., rows, :], rtol=1e-10, atol=1e-10)
    for got, want in ((grads.dq[..., rows, :], tq.grad[..., rows, :]), (grads.dk, tk.grad), (grads.dv, tv.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-10)


def test_a_thread_keeps_its_buffers_from_call_to_call_up_to_kept_numbers(monkeypatch):
    """One worker runs in the calling thread: its buffers are kept for the next
    call (the same arrays, the same gradients), and not kept past KEPT_NUMBERS."""
    monkeypatch.setattr(gf._kept, "buffers", None, raising=False)
    q, k, v, dout = problem(6, 2, 2, n_q=300, n_k=260, d_k=8, d_v=8, batch=1)
    options = AttentionOptions(causal="top-left")
    first = attention_grad(q, k, v, dout, options, workers=1)
    kept = gf._kept.buffers
    assert kept is not None and sum(b.size for b in kept.values()) <= gf.KEPT_NUMBERS
    again = attention_grad(q, k, v, dout, options, workers=1)
    assert gf._kept.buffers is kept and all(gf._kept.buffers[name] is b for name, b in kept.items())
    for key, g in first.named().items():
        np.testing.assert_array_equal(again.named()[key], g, err_msg=key)
    monkeypatch.setattr(gf, "KEPT_NUMBERS", 1000)
    monkeypatch.setattr(gf._kept, "buffers", None)
    attention_grad(q, k, v, dout, options, workers=1)
    assert gf._kept.buffers is None
