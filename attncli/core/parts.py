"""One attention problem cut into independent parts over batch × K/V heads,
before anything is converted or rotated: each part is views of the inputs as
stored (memory-mapped stays mapped) with the options that concern its query
heads (a mask, a bias, ALiBi slopes, sinks), so that a part can go through
``prepare`` alone and give, head for head, the numbers the whole would.

``attn check`` works part by part so that nothing larger than one part is
ever converted to float64 or rounded whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from attncli.core.logits import leading_axes, prepare
from attncli.core.options import AttentionOptions
from attncli.core.positions import alibi_slopes


@dataclass(frozen=True)
class Part:
    """Some K/V heads of one batch entry, with their groups of query heads."""

    where: tuple[int | slice, ...]  # the part's place on the output's leading axes [..., H_q]: batch indices, heads
    q: np.ndarray  # [h_q, n_q, d_k] (2-D problems: [n_q, d_k])
    k: np.ndarray  # [h_kv, n_k, d_k]
    v: np.ndarray  # [h_kv, n_k, d_v]
    options: AttentionOptions  # per-head arrays cut to these query heads

    @property
    def heads(self) -> int:
        """Query heads in the part (1 for a 2-D problem)."""
        return self.q.shape[0] if self.q.ndim == 3 else 1


@dataclass(frozen=True)
class Layout:
    """How a problem is cut: the output's leading axes [..., H_q], query heads per K/V head."""

    lead: tuple[int, ...]
    group: int

    @property
    def batches(self) -> int:
        return math.prod(self.lead[:-1]) if self.lead else 1

    @property
    def heads(self) -> int:
        return self.lead[-1] if self.lead else 1


def validate(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions) -> Layout:
    """Every check ``prepare`` makes of the whole problem, with no array the size of
    the inputs made: on zero-strided float64 stand-ins, RoPE apart (it rotates copies;
    each part's ``prepare`` checks it, and its checks do not depend on the heads)."""
    q0, k0, v0 = (np.broadcast_to(np.zeros((), dtype=np.float64), m.shape) for m in (q, k, v))
    prepare(q0, k0, v0, options.but(rope=None))
    lead, group = leading_axes(q, k, v)
    return Layout(lead, group)


def parts(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    options: AttentionOptions,
    layout: Layout,
    most_bytes: int,
    most_kv_heads: int | None = None,
) -> Iterator[Part]:
    """The parts in the output's order (batch, then heads), each of as many K/V heads
    as keep its Q, K, V in float64 within ``most_bytes`` (at least one), and no more
    than ``most_kv_heads``."""
    lead, group = layout.lead, layout.group
    if not lead:  # matrices: one part
        yield Part((), q, k, v, options)
        return
    h_q = lead[-1]
    h_kv = h_q // group
    kv_lead = lead[:-1] + (h_kv,)
    qb = np.broadcast_to(q, lead + q.shape[-2:])  # views: a broadcast axis costs nothing
    kb, vb = np.broadcast_to(k, kv_lead + k.shape[-2:]), np.broadcast_to(v, kv_lead + v.shape[-2:])
    per_kv_head = 8 * (group * q.shape[-2] * q.shape[-1] + k.shape[-2] * (k.shape[-1] + v.shape[-1]))
    together = max(1, min(h_kv, most_bytes // max(1, per_kv_head), most_kv_heads or h_kv))
    if options.uses_alibi and options.alibi_slopes is None:
        options = options.but(alibi_slopes=alibi_slopes(h_q))  # the slopes of every head, cut below
    for index in np.ndindex(*lead[:-1]):
        for h in range(0, h_kv, together):
            where = (*index, slice(h * group, min(h + together, h_kv) * group))  # query heads
            kv_where = (*index, slice(h, min(h + together, h_kv)))
            yield Part(where, qb[where], kb[kv_where], vb[kv_where], _cut_options(options, lead, where))


def _cut_options(options: AttentionOptions, lead: tuple[int, ...], where: tuple[int | slice, ...]) -> AttentionOptions:
    """The options of the query heads at ``where``: each per-head array cut to them."""
    changes = {}
    for name in ("mask", "bias"):
        m = getattr(options, name)
        if m is not None and m.ndim > 2:
            changes[name] = _cut_matrix(m, lead, where)
    for name in ("sinks", "alibi_slopes"):
        values = getattr(options, name)
        if values is not None:
            while values.ndim > len(lead) and values.shape[0] == 1:
                values = values[0]
            changes[name] = np.broadcast_to(values, lead)[where]
    return options.but(**changes) if changes else options


def _cut_matrix(m: np.ndarray, lead: tuple[int, ...], where: tuple[int | slice, ...]) -> np.ndarray:
    """A mask or bias [..., H_q or 1, n_q or 1, n_k or 1] -> [h or 1, n_q or 1, n_k or 1] of the part's heads."""
    while m.ndim > len(lead) + 2 and m.shape[0] == 1:
        m = m[0]
    m = m.reshape((1,) * (len(lead) + 2 - m.ndim) + m.shape)
    cut = tuple(w if m.shape[a] > 1 else (0 if isinstance(w, int) else slice(0, 1)) for a, w in enumerate(where))
    return m[cut]
