"""One query token through one head of one layer of a real model, every step with
the model's own numbers: what ``attn trace --explain`` walks through.

    model = load_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    ids, _, _ = decoding.encode(model, "The pink elephant tried to get into the car but it was too")
    h = explain_head(model, ids, layer=9, head=4, query=11)
    h.x[h.query]          # [d_model] the token's row as the projections read it (after the layer's norm)
    h.q[h.query]          # [d_head] = x W_Q + b_q, the head's columns (before RoPE)
    h.steps.rotated       # RoPE(q), RoPE(K) as they met; h.steps.scores [1, n] q·k_j, unscaled
    h.steps.weights[0]    # the query's row of the head's weights, as the trace has it
    h.attended            # [d_v] the family's own output of the head: Σ_j α_j v_j
    h.projected           # [d_model] what the head adds through its rows of W_O

The family's ``probe`` runs the sequence as its forward pass does (the same
calls, so the same numbers) and catches the layer; here the head is cut out
(grouped-query: the query head's K/V head) and the query's row goes once more
through the reference with the layer's settings, causal and the window as that
row's mask and RoPE at its position (``decoder.rows_at``), so that every step
is kept: the scores, the scale, the logits, the weights, the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attncli.core.options import AttentionOptions
from attncli.core.reference import Steps, reference
from attncli.errors import UsageError
from attncli.models.blocks import Linear
from attncli.models.decoder import one_head, rows_at
from attncli.models.loading import Model
from attncli.text import plural


@dataclass(frozen=True)
class HeadSteps:
    """One query through one head: its inputs, the head's weights, every step."""

    layer: int
    head: int
    kv_head: int  # the K/V head this query head reads (grouped-query attention: head // (n_head / n_kv_head))
    n_head: int
    n_kv_head: int
    query: int  # the query's position in the sequence
    read: str  # what x is, in words (the family's)
    x: np.ndarray  # [n, d_model] every token's row as the projections read it
    w_q: Linear  # the head's columns of W_Q [d_model, d_head] and of b_q
    w_k: Linear  # the K/V head's columns of W_K [d_model, d_head] and of b_k
    w_v: Linear  # the K/V head's columns of W_V [d_model, d_v] and of b_v
    w_o: np.ndarray  # [d_v, d_model] the head's rows of W_O
    b_o: np.ndarray | None  # [d_model] W_O's bias: the heads' together, no one head's
    q: np.ndarray  # [n, d_head] the head's queries as projected (before RoPE)
    k: np.ndarray  # [n, d_head] the K/V head's keys as projected (before RoPE)
    v: np.ndarray  # [n, d_v] its values
    options: AttentionOptions  # the head's settings (the layer's, per-head ones cut to it)
    steps: Steps  # the query's row through the reference: [1, n] each, RoPE's q and K in ``rotated``
    attended: np.ndarray  # [d_v] the head's output at the query as the family's pass computed it

    @property
    def d_head(self) -> int:
        return int(self.q.shape[-1])

    @property
    def d_v(self) -> int:
        return int(self.v.shape[-1])

    @property
    def group(self) -> list[int]:
        """The query heads that share this head's K/V head."""
        size = self.n_head // self.n_kv_head
        return list(range(self.kv_head * size, (self.kv_head + 1) * size))

    @property
    def q_used(self) -> np.ndarray:
        """[d_head] the query as it met the keys (after RoPE where there is one)."""
        return self.q[self.query] if self.steps.rotated is None else self.steps.rotated[0][0]

    @property
    def k_used(self) -> np.ndarray:
        """[n, d_head] the keys as the query met them (after RoPE where there is one)."""
        return self.k if self.steps.rotated is None else self.steps.rotated[1]

    @property
    def projected(self) -> np.ndarray:
        """[d_model] what this head adds to the layer's attention output: its output times its rows of W_O."""
        # [d_v] @ [d_v, d_model] -> [d_model]
        return self.attended @ self.w_o


def explain_head(model: Model, ids: Sequence[int] | np.ndarray, layer: int, head: int, query: int) -> HeadSteps:
    """The query at position ``query`` of the token ids through ``head`` of ``layer``
    (each from 0, as the model counts them)."""
    ids = np.asarray(ids)
    n = len(ids)
    config = model.config
    for name, value, count, things in (
        ("layer", layer, config.n_layer, "layer"),
        ("head", head, config.n_head, "head"),
        ("query position", query, n, "token"),
    ):
        if not 0 <= value < count:
            raise UsageError(f"{name} {value} is out of range: there are {plural(count, things)}")
    more = model.family.decoder.after_projection(config) if model.family.decoder is not None else None
    if more is not None:  # q would not be x W_Q + b_q, which the explanation works out
        raise UsageError(
            f"--explain: {model.family.name} {more} after the projections, which explain does not show yet",
            hint="see the head's weights with --layer and --head",
        )
    p = model.family.probe(model.params, config, ids, layer)
    n_head, n_kv_head = p.q.shape[0], p.k.shape[0]
    g = head // (n_head // n_kv_head)
    d, d_v = p.q.shape[-1], p.v.shape[-1]
    options = one_head(p.options, head, n_head)
    # [1, d] against [n, d], [n, d_v]: the query's row of the head, as the whole sequence's
    steps = reference(p.q[head, query : query + 1], p.k[g], p.v[g], rows_at(options, query, 1, n))
    qc, kc, vc = slice(head * d, (head + 1) * d), slice(g * d, (g + 1) * d), slice(g * d_v, (g + 1) * d_v)

    def cut(linear: Linear, columns: slice) -> Linear:
        return Linear(linear.w[:, columns], None if linear.b is None else linear.b[columns])

    w = p.params
    return HeadSteps(
        layer=layer,
        head=head,
        kv_head=g,
        n_head=n_head,
        n_kv_head=n_kv_head,
        query=query,
        read=p.read,
        x=p.x,
        w_q=cut(w.q, qc),
        w_k=cut(w.k, kc),
        w_v=cut(w.v, vc),
        w_o=w.o.w[head * d_v : (head + 1) * d_v],
        b_o=w.o.b,
        q=p.q[head],
        k=p.k[g],
        v=p.v[g],
        options=options,
        steps=steps,
        attended=p.attended[head, query],
    )
