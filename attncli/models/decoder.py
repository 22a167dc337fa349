"""Running a decoder layer by layer: a KV cache, every head through attn's own
``attention`` with its layer's options (``conventions``), and only the weights
asked for kept.

    kept = Kept.plan(Selection(layers=(3,)), n_layer, n_head, n)   # what to keep, checked
    p = run(steps, params, config, ids, kept=kept, predict=[-1])   # hidden [n, d], logits [1, n_vocab]
    kept.weights                                                   # [1, n_head, n, n]

Memory: a long prompt never holds layers × heads × n² weights that will not
be shown (SmolLM2 at 2,048 tokens: 4.5 GB). A layer whose weights are small
(``WHOLE_BYTES``, every head) goes through the reference in one call, kept or
not, so that short texts give the same numbers whatever is shown; past that,
a layer with nothing kept goes through the blocked kernel (no n_q × n_k at
all), and a kept layer's weights are made one head and a block of queries at
a time, only the selected rows kept; head summaries are summed as the blocks
go by. BLAS is held to one
thread for the whole pass (its threads fought attn's pool: 3–10× slower
here), and the kernel's pool splits the heads over the cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attncli.core.api import attention
from attncli.core.options import AttentionOptions
from attncli.core.parallel import one_blas_thread
from attncli.core.positions import LENGTH_DEPENDENT, alibi_slopes, band_allowed
from attncli.errors import AttnError, UsageError
from attncli.models.base import DecoderSteps, Forward, LayerProbe, Probe
from attncli.models.lens import Lens
from attncli.text import plural

WHOLE_BYTES = 64 << 20  # a layer's weights (every head) at most this are made in one reference call
KEPT_BYTES = 2 << 30  # the selection's weights, held to be shown: refused above this, with the figure


@dataclass(frozen=True)
class Selection:
    """The weights to keep: layers, heads and query positions (None: all of them;
    negative counts from the end), whether to summarise every head, and whether to
    sum the kept heads' weights over every query (``columns``: how much all the
    queries together give each key, beside the few rows kept)."""

    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None
    queries: tuple[int, ...] | None = None
    summaries: bool = False
    columns: bool = False

    @classmethod
    def nothing(cls) -> Selection:
        """No weights at all: the forward pass alone (logits, generation)."""
        return cls(layers=(), heads=(), queries=())


@dataclass
class HeadSummaries:
    """One number per layer and head, each averaged over the queries after the
    first (the first token can attend only to itself): what a glance at a
    whole model shows. Summed block by block, never from held weights."""

    entropy: np.ndarray  # [n_layer, n_head] −Σ w ln w of each row, in nats: 0 = one key, ln n = spread evenly
    largest: np.ndarray  # [n_layer, n_head] each row's largest weight
    first: np.ndarray  # [n_layer, n_head] the weight on the first token (the "attention sink")
    previous: np.ndarray  # [n_layer, n_head] the weight on the token just before


class _Sums:
    """Running sums of the summaries, [n_layer, n_head] float64 each."""

    def __init__(self, n_layer: int, n_head: int) -> None:
        self.totals = np.zeros((4, n_layer, n_head))  # entropy, largest, first, previous

    def add(self, layer: int, head: int | slice, w: np.ndarray, positions: np.ndarray) -> None:
        """w [..., r, n_k] the weights of the queries at ``positions`` [r]."""
        later = positions >= 1
        if not later.any():
            return
        w, positions = w[..., later, :], positions[later]
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0.0)
        self.totals[0, layer, head] += -plogp.sum(axis=(-1, -2), dtype=np.float64)
        self.totals[1, layer, head] += w.max(axis=-1).sum(axis=-1, dtype=np.float64)
        self.totals[2, layer, head] += w[..., 0].sum(axis=-1, dtype=np.float64)
        self.totals[3, layer, head] += np.take_along_axis(
            w, np.broadcast_to((positions - 1)[:, None], (*w.shape[:-1], 1)), axis=-1
        ).sum(axis=(-1, -2))

    def result(self, rows: int) -> HeadSummaries:
        mean = self.totals / max(rows, 1)
        return HeadSummaries(*(m.astype(np.float32) for m in mean))


def summarise(weights: np.ndarray) -> HeadSummaries:
    """The summaries of weights held whole (an encoder's trace): [n_layer, n_head, n, n]
    -> HeadSummaries, averaged over the queries after the first as a decoder's are."""
    n_layer, n_head, n = weights.shape[0], weights.shape[1], weights.shape[-1]
    sums = _Sums(n_layer, n_head)
    for layer in range(n_layer):
        sums.add(layer, slice(None), weights[layer], np.arange(n))
    return sums.result(n - 1)


@dataclass
class Kept:
    """What one pass keeps: the selection resolved against the sequence."""

    layers: list[int]
    heads: list[int]
    queries: list[int]  # absolute positions, in the order asked
    weights: np.ndarray  # [len(layers), len(heads), len(queries), n] float32; 0 where a query may not attend
    sums: _Sums | None  # the head summaries as they are summed; None when not asked
    n_head: int
    columns: np.ndarray | None = (
        None  # [len(layers), len(heads), n] float64: each key's weights summed over every query
    )

    @classmethod
    def plan(cls, selection: Selection, n_layer: int, n_head: int, n: int) -> Kept:
        """Resolve and check a selection for a sequence of n tokens; refuse one too big to hold."""
        layers = _resolve(selection.layers, n_layer, "layer", "layers")
        heads = _resolve(selection.heads, n_head, "head", "heads")
        queries = _resolve(selection.queries, n, "query position", "tokens")
        size = len(layers) * len(heads) * len(queries) * n * 4
        if size > KEPT_BYTES:
            raise AttnError(
                f"keeping the weights of {plural(len(layers), 'layer')} × {plural(len(heads), 'head')} "
                f"× {len(queries):,} queries × {n:,} keys needs {size / 2**30:.1f} GiB",
                hint="select fewer layers, heads or queries",
            )
        weights = np.zeros((len(layers), len(heads), len(queries), n), dtype=np.float32)
        sums = _Sums(n_layer, n_head) if selection.summaries else None
        columns = np.zeros((len(layers), len(heads), n)) if selection.columns else None
        return cls(layers, heads, queries, weights, sums, n_head, columns)

    @property
    def summaries(self) -> HeadSummaries | None:
        return None if self.sums is None else self.sums.result(self.weights.shape[-1] - 1)  # rows after the first

    def layer(self, i: int) -> _LayerKeep | None:
        if i not in self.layers and self.sums is None:
            return None
        return _LayerKeep(self, i)


class _LayerKeep:
    """One layer's share of ``Kept``: where its weights go, and its summaries."""

    def __init__(self, kept: Kept, layer: int) -> None:
        self.kept, self.layer = kept, layer
        self.slot = kept.layers.index(layer) if layer in kept.layers else None
        self.heads = (
            list(range(kept.n_head)) if kept.sums is not None else (kept.heads if self.slot is not None else [])
        )

    def take(self, heads: Sequence[int], w: np.ndarray, start: int) -> None:
        """w [len(heads), r, n_k]: the weights of ``heads`` for the queries at start .. start + r − 1."""
        positions = np.arange(start, start + w.shape[-2])
        if self.kept.sums is not None:
            if len(heads) == self.kept.n_head:
                self.kept.sums.add(self.layer, slice(None), w, positions)
            else:
                for a, h in enumerate(heads):
                    self.kept.sums.add(self.layer, h, w[a], positions)
        if self.slot is None:
            return
        if self.kept.columns is not None:
            for a, h in enumerate(heads):
                if h in self.kept.heads:
                    self.kept.columns[self.slot, self.kept.heads.index(h), : w.shape[-1]] += w[a].sum(
                        axis=0, dtype=np.float64
                    )
        rows = [(b, q - start) for b, q in enumerate(self.kept.queries) if start <= q < start + w.shape[-2]]
        if not rows:
            return
        where, which = [b for b, _ in rows], [r for _, r in rows]
        for a, h in enumerate(heads):
            if h in self.kept.heads:
                self.kept.weights[self.slot, self.kept.heads.index(h), where, : w.shape[-1]] = w[a][which]


def _resolve(chosen: tuple[int, ...] | None, n: int, what: str, things: str) -> list[int]:
    """Indices (negative from the end) checked against n, in the order given without repeats."""
    if chosen is None:
        return list(range(n))
    picked: list[int] = []
    for i in chosen:
        if not -n <= i < n:
            raise UsageError(
                f"{what} {i} is out of range: there are {plural(n, things[:-1])}"  # "2 layers"
                + (f" (0 to {n - 1})" if n else "")
            )
        if i % n not in picked:
            picked.append(i % n)
    return picked


class Cache:
    """Each layer's keys and values so far (before RoPE: attention turns them by position)."""

    def __init__(self, n_layer: int, capacity: int) -> None:
        self.capacity, self.length = capacity, 0
        self.k: list[np.ndarray | None] = [None] * n_layer
        self.v: list[np.ndarray | None] = [None] * n_layer

    def add(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """k, v [H_kv, n, d] of the new tokens -> every token's so far, [H_kv, length + n, d] (views)."""
        end = self.length + k.shape[-2]
        if end > self.capacity:
            raise AttnError(f"the cache holds {self.capacity} tokens, not {end}")  # a bug in the caller
        for store, new in ((self.k, k), (self.v, v)):
            if store[layer] is None:
                store[layer] = np.empty((new.shape[0], self.capacity, new.shape[-1]), dtype=new.dtype)
            store[layer][:, self.length : end] = new  # type: ignore[index]
        return self.k[layer][:, :end], self.v[layer][:, :end]  # type: ignore[index]


@dataclass
class Catch:
    """One layer's attention, caught as a pass goes by (``probe``)."""

    layer: int
    found: LayerProbe | None = None


@dataclass
class Pass:
    """What a forward pass gives: the final hidden states and the logits asked for."""

    hidden: np.ndarray  # [n, d_model] after the final norm
    logits: np.ndarray  # [len(predict), n_vocab] at the positions asked


def run(
    steps: DecoderSteps[Any, Any],
    params: Any,
    config: Any,
    ids: np.ndarray,
    *,
    cache: Cache | None = None,
    kept: Kept | None = None,
    predict: Sequence[int] = (),
    catch: Catch | None = None,
    lens: Lens | None = None,
) -> Pass:
    """The decoder on token ids [n], after the cache's tokens (if any).

    Each layer: Q, K, V from the family's ``project`` of its ``attn_input``
    (the layer's norm); attention with the layer's options
    (``config.attention[i].options``: causal bottom-right, so new queries
    follow cached keys); the family's ``finish``. ``kept`` receives the weights
    of the queries of this pass; ``predict`` lists the positions (of this pass,
    negative from the end) whose next-token logits are wanted; ``catch``
    receives its layer's attention as it ran (``LayerProbe``); ``lens`` reads each
    layer's output through the final norm and output head (the logit lens).
    """
    start = cache.length if cache is not None else 0
    with one_blas_thread():
        x = steps.embed(params, config, ids, start)  # [n, d_model]
        for i, lp in enumerate(steps.layers(params)):
            h = steps.attn_input(lp, config, x)  # [n, d_model]
            q, k, v = steps.project(lp, config, h)  # [H, n, d], [H_kv, n, d], [H_kv, n, d]
            if cache is not None:
                k, v = cache.add(i, k, v)  # [H_kv, start + n, d]
            keep = kept.layer(i) if kept is not None else None
            options = config.attention[i].options
            attended = attend(q, k, v, options, start, keep)  # [H, n, d_v]
            if catch is not None and catch.layer == i:
                catch.found = LayerProbe(i, h, q, k, v, attended, steps.attn_params(lp), options, steps.attn_read)
            x = steps.finish(lp, config, x, attended)
            if lens is not None:
                lens.read(steps, params, config, i, x, start)
        if cache is not None:
            cache.length += len(ids)
        hidden = steps.norm(params, config, x)  # [n, d_model]
        logits = (
            steps.logits(params, config, hidden[list(predict)])
            if len(predict)
            else np.zeros((0, config.n_vocab), dtype=hidden.dtype)
        )
    return Pass(hidden, logits)


def attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, start: int, keep: _LayerKeep | None
) -> np.ndarray:
    """Every head's attention output, through attn's ``attention``, keeping what ``keep`` asks.

    q [H, n_q, d] at positions start .. start + n_q − 1; k, v [H_kv, n_k, d] at
    0 .. n_k − 1 (n_k = start + n_q) -> [H, n_q, d_v].
    """
    n_head, n_q, n_k = q.shape[0], q.shape[-2], k.shape[-2]
    if n_head * n_q * n_k * 4 <= WHOLE_BYTES:  # small: the reference, every head's weights at once
        out, w = attention(q, k, v, options)  # [H, n_q, d_v], [H, n_q, n_k]
        assert w is not None
        if keep is not None and keep.heads:
            keep.take(range(n_head), w, start)
        return out
    out, _ = attention(q, k, v, options, need_weights=False)  # the blocked kernel: never n_q × n_k
    if keep is None or not keep.heads:
        return out
    assert options.causal == "bottom-right"  # a block of queries sees keys up to its last query only
    group = n_head // k.shape[0]
    rows = max(1, WHOLE_BYTES // (4 * n_k))
    for h in keep.heads:
        one = one_head(options, h, n_head)
        for a in range(0, n_q, rows):
            b = min(n_q, a + rows)
            kv = slice(h // group, h // group + 1)
            # [1, b − a, d] against keys 0 .. start + b − 1: bottom-right puts the block at start + a (RoPE too)
            block, keys = (one, start + b) if not _length_dependent(one) else (rows_at(one, start + a, b - a, n_k), n_k)
            _, w = attention(q[h : h + 1, a:b], k[kv, :keys], v[kv, :keys], block)
            assert w is not None
            keep.take([h], w, start + a)  # [1, b − a, keys]; later keys stay 0 (forbidden)
    return out


def _length_dependent(options: AttentionOptions) -> bool:
    """RoPE scaling whose frequencies depend on the sequence's length (dynamic, longrope)."""
    return (
        options.rope is not None and options.rope.scaling is not None and options.rope.scaling.kind in LENGTH_DEPENDENT
    )


def rows_at(options: AttentionOptions, first: int, n_q: int, n_k: int) -> AttentionOptions:
    """A block of n_q queries from position ``first`` of an n_k-token sequence against all
    n_k keys, so that RoPE scaling sees the whole sequence's length (as the pass does):
    causal and the window become the band of those rows as a mask, and RoPE places the
    queries explicitly. The block's numbers are then those rows of the whole's."""
    if options.mask is not None:
        raise AttnError("a decoder layer's options carry no mask")  # a bug: none of the families does
    changes: dict[str, Any] = {}
    if options.causal is not None or options.window is not None:
        allowed = band_allowed(range(first, first + n_q), range(n_k), n_k, n_k, options.causal, options.window)
        changes.update(causal=None, window=None, mask=allowed)
    if options.rope is not None:
        changes.update(rope=replace(options.rope, offset=first))
    return options.but(**changes) if changes else options


def one_head(options: AttentionOptions, h: int, n_head: int) -> AttentionOptions:
    """The options of head h alone: per-head settings (ALiBi slopes, sinks) cut to that head."""
    changes: dict[str, Any] = {}
    if options.alibi:
        changes.update(alibi=False, alibi_slopes=alibi_slopes(n_head)[h : h + 1])
    for name in ("alibi_slopes", "sinks"):
        values = changes.get(name, getattr(options, name))
        if values is not None and values.shape[-1] == n_head:
            changes[name] = values[..., h : h + 1]
    if options.mask is not None or options.bias is not None:
        raise AttnError("a decoder layer's options carry no mask or bias")  # a bug: none of the families does
    return options.but(**changes) if changes else options


def probe_layer(steps: DecoderSteps[Any, Any]) -> Probe[Any, Any]:
    """A decoder's ``Family.probe``: the whole sequence through ``run`` (the pass ``decode``
    makes, the same numbers) up to the layer asked, its attention caught as it goes by."""

    def probe(params: Any, config: Any, ids: np.ndarray, layer: int) -> LayerProbe:
        catch = Catch(layer)
        upto = replace(steps, layers=lambda p: steps.layers(p)[: layer + 1])  # no later layer is needed
        run(upto, params, config, np.asarray(ids), catch=catch)
        if catch.found is None:
            raise UsageError(f"layer {layer} is out of range: there are {plural(config.n_layer, 'layer')}")
        return catch.found

    return probe


def forward_all(steps: DecoderSteps[Any, Any]) -> Forward[Any, Any]:
    """A decoder as an encoder's ``Family.forward``: every layer's and head's weights
    of each text in a batch (right-padded), for ``running.trace`` and embeddings."""

    def forward(
        params: Any, config: Any, ids: np.ndarray, types: np.ndarray, allowed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        b, n = ids.shape
        hidden = np.zeros((b, n, config.d_model), dtype=np.float32)
        weights = np.zeros((config.n_layer, b, config.n_head, n, n), dtype=np.float32)
        for row in range(b):
            m = int(allowed[row].sum())  # real tokens come first
            kept = Kept.plan(Selection(), config.n_layer, config.n_head, m)
            hidden[row, :m] = run(steps, params, config, ids[row, :m], kept=kept).hidden
            weights[:, row, :, :m, :m] = kept.weights
        return hidden, weights

    return forward
