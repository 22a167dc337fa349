"""From Q and K to logits: the inputs checked once, the scores of a block of
queries and keys, and ``combine``, the one function that applies the
options to them. The reference and the blocked kernel both go through here,
so every option means the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attncli.core.arrays import broadcasts_to, result_dtype, shape_text, unit_rows
from attncli.core.options import AttentionOptions
from attncli.core.positions import (
    alibi_slopes,
    band_allowed,
    distance,
    rotate_qk,
)
from attncli.errors import AttnError, ShapeError, UsageError
from attncli.text import plural

EVERYTHING = slice(None)


@dataclass
class Problem:
    """Checked inputs of one attention call, ready to be cut into blocks.

    With grouped-query attention (K and V with fewer heads than Q), Q is held
    as [..., H_kv, group, n_q, d_k] against K and V as [..., H_kv, 1, n_k, d]:
    each K/V head meets its group of query heads by broadcasting, never
    copied. Everything per head (mask, bias, ALiBi, sinks) is grouped the same
    way, and ``ungroup`` turns results back into [..., H_q, n_q, ...].
    """

    q: np.ndarray  # [..., n_q, d_k] (rotated when RoPE is on; grouped with GQA)
    k: np.ndarray  # [..., n_k, d_k]
    v: np.ndarray  # [..., n_k, d_v]
    options: AttentionOptions
    scale: float  # the scale in force (options.scale_for(d_k))
    mask: np.ndarray | None  # [..., n_q or 1, n_k or 1] bool, at least 2-D
    bias: np.ndarray | None  # [..., n_q or 1, n_k or 1] in the inputs' dtype, at least 2-D
    logits_shape: tuple[int, ...]  # [..., n_q, n_k] (grouped with GQA)
    score_bound: float  # ≥ every |q·k| and partial sum of it (cosine: of unit rows); NaN when an input holds NaN
    alibi: np.ndarray | None = None  # [..., H or 1, 1, 1] each query head's ALiBi slope (float64)
    sinks: np.ndarray | None = None  # [..., H or 1, 1, 1] each query head's sink logit, in the inputs' dtype
    group: int = 1  # query heads per K/V head; 1: no grouping

    @property
    def n_q(self) -> int:
        return self.logits_shape[-2]

    @property
    def n_k(self) -> int:
        return self.logits_shape[-1]

    @property
    def factor(self) -> float:
        """scale / temperature: what multiplies q·k (multiplied in the scores' dtype, see product)."""
        return self.scale / self.options.temperature

    @property
    def cannot_overflow(self) -> bool:
        """The bound shows that no block of scores needs checking for inf/NaN."""
        return bool(self.score_bound * max(1.0, self.factor) < float(np.finfo(self.q.dtype).max))

    @property
    def out_shape(self) -> tuple[int, ...]:  # [..., n_q, d_v]
        return self.logits_shape[:-1] + self.v.shape[-1:]

    # What the kernel's tuned paths rely on (core/kernel.py, core/blocking.py),
    # facts about ``combine`` below: a step added there answers each here
    # (tests/test_blocked.py holds every field of AttentionOptions to one).

    @property
    def logit_bound(self) -> float:
        """An upper bound on every |logit| and sink when one is known, else inf:
        |factor| · max ‖q_i‖ · max ‖k_j‖ (``score_bound``), or the soft-cap; −∞
        is no larger; a bias or ALiBi may add anything. NaN compares false, as inf does."""
        if self.bias is not None or self.alibi is not None:
            return float(np.inf)
        bound = abs(self.factor) * self.score_bound
        if self.options.softcap is not None:
            bound = min(bound, abs(float(self.options.softcap)))
        if self.sinks is not None:
            bound = max(bound, float(np.abs(self.sinks).max()))
        return bound

    @property
    def exact_in_base2(self) -> bool:
        """``combine`` of the scores times log2(e) is log2(e) times the logits: every
        step multiplies or sets −∞ (not the soft-cap's tanh, nor a bias or ALiBi)."""
        return self.options.softcap is None and self.bias is None and self.alibi is None

    @property
    def logits_are_band_functions(self) -> bool:
        """The logit of (i, j) depends on q_i, k_j and j − i alone (the band, ALiBi,
        the soft-cap; RoPE has rotated q and k), so ``combine`` told one block's rows
        and keys is right for every block as far from the diagonal: no mask or bias."""
        return self.mask is None and self.bias is None

    def heads(self, together: int = 1) -> list[tuple[tuple[slice, ...], Problem]]:
        """The problem cut into independent parts over batch × K/V heads, up to
        ``together`` heads a part: [(where its output goes, the part)]. Each
        part keeps every axis and holds views, never copies; with GQA a part
        is K/V heads with their groups of query heads, which share their K and
        V blocks by broadcasting."""
        cut = len(self.logits_shape) - (3 if self.group > 1 else 2)  # leading axes cut into parts
        ndim, lead = len(self.logits_shape), self.logits_shape[:cut]
        if not lead:
            return [((), self)]
        parts = []
        for index in np.ndindex(*lead[:-1]):
            for h in range(0, lead[-1], together):
                where = tuple(slice(i, i + 1) for i in index) + (slice(h, min(h + together, lead[-1])),)
                q, k, v = (_pick(m, where, ndim) for m in (self.q, self.k, self.v))
                mask, bias, alibi, sinks = (
                    None if m is None else _pick(m, where, ndim) for m in (self.mask, self.bias, self.alibi, self.sinks)
                )
                shape = tuple(w.stop - w.start for w in where) + self.logits_shape[cut:]
                parts.append(
                    (
                        where,
                        replace(
                            self, q=q, k=k, v=v, mask=mask, bias=bias, alibi=alibi, sinks=sinks, logits_shape=shape
                        ),
                    )
                )
        return parts

    def ungroup(self, x: np.ndarray) -> np.ndarray:
        """[..., H_kv, group, n, m] -> [..., H_q, n, m]; unchanged without grouping."""
        if self.group == 1:
            return x
        return x.reshape(*x.shape[:-4], x.shape[-4] * x.shape[-3], *x.shape[-2:])


def prepare(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions) -> Problem:
    """Check every input once, before any arithmetic, and gather them: RoPE
    rotates Q and K here, once, and grouped-query heads are arranged here."""
    dtype = result_dtype(q, k, v)
    # np.asarray keeps a memory-mapped float array mapped when its dtype fits.
    q, k, v = (np.asarray(m, dtype=dtype) for m in (q, k, v))
    check_shapes(q, k, v)
    check_softcap(options.softcap, dtype)
    n_q, d_k, n_k = q.shape[-2], q.shape[-1], k.shape[-2]
    scale = options.scale_for(d_k)
    lead, group = leading_axes(q, k, v)  # [..., H_q], query heads per K/V head
    kv = np.broadcast_shapes(k.shape[:-2], v.shape[:-2])  # K may be shared by V's heads, or V by K's (as in PyTorch)
    k, v = np.broadcast_to(k, kv + k.shape[-2:]), np.broadcast_to(v, kv + v.shape[-2:])  # views, no copies
    shape = lead + (n_q, n_k)  # the weights as the user sees them: [..., H_q, n_q, n_k]
    for m in (options.mask, options.bias):
        if m is not None and not broadcasts_to(m.shape, shape):
            raise ShapeError(
                f"the mask is {shape_text(m)} but the weights are {shape_text(shape)} (queries × keys)",
                hint=f"give a {n_q}×{n_k} mask, or 1×{n_k} for every query",
            )
    if options.rope is not None:
        q, k = _rotated(q, k, options)
    heads = lead[-1] if lead else 1
    slopes = None
    if options.uses_alibi:
        given = options.alibi_slopes
        slopes = _per_head("ALiBi slopes", alibi_slopes(heads) if given is None else given, lead)
    sinks = None if options.sinks is None else _per_head("sinks", options.sinks, lead).astype(dtype)
    if group > 1:
        q = q.reshape(*q.shape[:-3], q.shape[-3] // group, group, n_q, d_k)  # [..., H_kv, group, n_q, d_k]
        k, v = np.expand_dims(k, -3), np.expand_dims(v, -3)  # [..., H_kv, 1, n_k, d]
    grouped = (lambda m: m) if group == 1 else (lambda m: _grouped(m, len(shape), group))
    mask = None if options.mask is None else grouped(np.atleast_2d(options.mask))
    bias = None if options.bias is None else grouped(np.atleast_2d(options.bias).astype(dtype))
    logits_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (n_q, n_k)
    return Problem(
        q,
        k,
        v,
        options,
        scale,
        mask,
        bias,
        logits_shape,
        _score_bound(q, k, options.similarity),
        alibi=None if slopes is None else grouped(slopes),
        sinks=None if sinks is None else grouped(sinks),
        group=group,
    )


def check_softcap(cap: float | None, dtype: np.dtype) -> None:
    """cap · tanh(z / cap) is worked out in the scores' dtype: the cap must be a normal number of it."""
    info = np.finfo(dtype)
    if cap is not None and not float(info.tiny) <= cap <= float(info.max):
        raise UsageError(
            f"softcap {cap:g} is outside {np.dtype(dtype).name}'s range "
            f"({float(info.tiny):.3g} to {float(info.max):.3g})",
            hint="give a softcap within it" + ("" if dtype == np.float64 else ", or pass float64 data"),
        )


def check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Q, K, V must chain: same d_k for Q and K, one value row per key."""
    for name, m in (("Q", q), ("K", k), ("V", v)):
        if m.ndim < 2:
            raise ShapeError(f"{name} must be a matrix (rows × columns), got shape {m.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(
            f"Q is {shape_text(q)} but K is {shape_text(k)}", hint="Q and K need the same number of columns, d_k"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"K is {shape_text(k)} but V is {shape_text(v)}",
            hint="K and V need the same number of rows: one value per key",
        )


def leading_axes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[tuple[int, ...], int]:
    """The leading axes [..., heads] of the result, and how many query heads
    share one K/V head (grouped-query attention, decided by shape).

    Leading axes broadcast as in PyTorch; on the head axis (−3) K and V may
    also have H_kv heads where H_kv divides Q's H_q: query head h then uses
    K/V head h // (H_q / H_kv) (PyTorch's ``enable_gqa``, FlashAttention).
    """
    if not _broadcast(k.shape[:-2], v.shape[:-2]):
        raise ShapeError(
            f"K is {shape_text(k)} but V is {shape_text(v)}", hint="K and V need the same batch and head axes"
        )
    kv = np.broadcast_shapes(k.shape[:-2], v.shape[:-2])
    group = 1
    if q.ndim >= 3 and len(kv) >= 1:
        h_q, h_kv = q.shape[-3], kv[-1]
        if h_q != h_kv and 1 not in (h_q, h_kv):
            if h_q % h_kv:
                raise ShapeError(
                    f"Q has {h_q} heads but K and V have {h_kv}",
                    hint="for grouped-query attention the K/V heads must divide the query heads",
                )
            group = h_q // h_kv
            kv = kv[:-1] + (h_q,)
    if not _broadcast(q.shape[:-2], kv):
        raise ShapeError(
            f"Q is {shape_text(q)} but K is {shape_text(k)}",
            hint="their leading axes [batch, heads] must be equal or 1",
        )
    return np.broadcast_shapes(q.shape[:-2], kv), group


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _rotated(q: np.ndarray, k: np.ndarray, options: AttentionOptions) -> tuple[np.ndarray, np.ndarray]:
    """Q and K rotated by their positions (RoPE): keys at 0..n_k−1, queries at offset + i;
    with a scaling's attention factor, cos and sin (and so Q and K, and the score bound
    made from them) are multiplied by it."""
    rope = options.rope
    assert rope is not None
    d_k = q.shape[-1]
    if rope.dim is not None and rope.dim > d_k:
        raise ShapeError(
            f"rope dim is {rope.dim} but Q and K have d_k = {d_k}", hint="rotate at most every feature of a head"
        )
    if rope.dim is None and d_k % 2:
        raise ShapeError(
            f"RoPE rotates features in pairs, but d_k = {d_k} is odd", hint="give an even rope dim of at most d_k"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        return rotate_qk(q, k, rope)


def _per_head(what: str, values: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
    """[..., H] one number per query head -> [..., H, 1, 1], checked against the
    result's leading axes [..., H_q] (a problem without a head axis has one head)."""
    while values.ndim > len(lead) and values.shape[0] == 1:
        values = values[0]
    if not broadcasts_to(values.shape, lead):
        heads = lead[-1] if lead else 1
        got = values.shape[-1] if values.ndim else 1
        raise ShapeError(
            f"{what}: {got} given for {plural(heads, 'query head')}", hint="give one per query head, or one for all"
        )
    return values.reshape(values.shape + (1, 1))


def _grouped(m: np.ndarray, ndim: int, group: int) -> np.ndarray:
    """[..., H_q or 1, n, m] -> [..., H_kv or 1, group or 1, n, m], to meet grouped Q."""
    shape: tuple[int, ...] = (1,) * (ndim - m.ndim) + tuple(m.shape)
    if shape[-3] == 1:
        return np.expand_dims(m.reshape(shape), -3)
    return m.reshape(*shape[:-3], shape[-3] // group, group, *shape[-2:])


def scores(
    p: Problem, rows: slice = EVERYTHING, cols: slice = EVERYTHING, factor: float = 1.0, keys_first: bool = False
) -> np.ndarray:
    """factor · q·k for a block of queries and keys: [..., r, c] (cosine: of unit-length rows)."""
    return product(p.q[..., rows, :], p.k[..., cols, :], p.options.similarity, factor, keys_first)


def product(
    qb: np.ndarray, kb: np.ndarray, similarity: str, factor: float = 1.0, keys_first: bool = False
) -> np.ndarray:
    """factor · q·k of rows of Q and K: [..., r, d_k], [..., c, d_k] -> [..., r, c]
    (cosine: of unit-length rows, made row by row: the same as on whole matrices).

    A factor other than 1 is folded into the (small) query block, so that the
    big block is written once by the matrix product. ``keys_first``: made as
    (K Q^T)^T, a view of a [..., c, r] array (the same numbers: each is one dot
    product of d_k terms either way); OpenBLAS runs that shape 5–15 % faster
    for the kernel's blocks (benchmarks/README.md), and the ufuncs and
    products that follow take either layout.
    """
    if similarity == "cosine":
        qb, kb = unit_rows(qb), unit_rows(kb)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is check_scores' to report
        if factor != 1.0:  # in qb's dtype (numpy 1.x would widen float32 by a python float past its range)
            qb = qb * np.asarray(factor, dtype=qb.dtype)
        if keys_first:  # [..., c, d_k] @ [..., d_k, r] -> [..., c, r], seen as [..., r, c]
            return np.swapaxes(kb @ np.swapaxes(qb, -1, -2), -1, -2)
        return qb @ np.swapaxes(kb, -1, -2)  # [..., r, d_k] @ [..., d_k, c] -> [..., r, c]


def combine(
    logits: np.ndarray,
    p: Problem,
    rows: slice = EVERYTHING,
    cols: slice = EVERYTHING,
    inside: bool = False,
    stages: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Apply the options to scaled scores (scale · q·k / temperature), in place.

    [..., r, c] -> logits [..., r, c] and allowed [..., r, c] bool (None when
    nothing is forbidden). In order: the soft-cap; the bias and ALiBi are
    added; then causal, the window and the mask set −∞ where a query may not
    attend. ``rows`` and ``cols`` say which block of the n_q × n_k matrix this is;
    ``inside`` says the caller knows it lies wholly inside the causal triangle
    and the window (``kernel.key_blocks``), or applies them itself (the
    kernel's base-2 path, as 0/1 weights), so neither is worked out here.
    ``stages``, when given, keeps a copy of the logits after each step that
    is a setting's own (by the setting's name: "softcap"), for explaining.
    """
    if not p.cannot_overflow:
        check_scores(logits)
    options = p.options
    i, j = range(p.n_q)[rows], range(p.n_k)[cols]  # the block's queries and keys
    if options.softcap is not None:
        cap = float(options.softcap)  # softcap · tanh(logits / softcap): smooth, within ±softcap
        np.multiply(np.tanh(np.divide(logits, cap, out=logits), out=logits), cap, out=logits)
        if stages is not None:
            stages["softcap"] = logits.copy()
    if p.bias is not None:
        logits += _cut(p.bias, rows, cols)
    if p.alibi is not None:  # −slope · |i + n_k − n_q − j|, one slope per query head
        slopes = p.alibi.astype(logits.dtype)  # [..., H or 1, 1, 1]
        logits -= slopes * distance(i, j, p.n_q, p.n_k, logits.dtype)  # [..., H, 1, 1] · [r, c]
    allowed = None if p.mask is None else _cut(p.mask, rows, cols)
    if (options.causal is not None or options.window is not None) and not inside:
        band = band_allowed(i, j, p.n_q, p.n_k, options.causal, options.window)  # [r, c]
        allowed = band if allowed is None else band & allowed
    if allowed is not None:
        allowed = np.broadcast_to(allowed, logits.shape)
        np.copyto(logits, -np.inf, where=~allowed)
    return logits, allowed


def causal_mask(n_q: int, n_k: int, align: str = "top-left") -> np.ndarray:
    """[n_q, n_k] bool, True where query i may attend to key j.

    top-left (PyTorch ``is_causal``, JAX, Keras): query i sees keys 0..i.
    bottom-right (the last query sees every key, as when n_q new tokens follow
    n_k - n_q cached ones): query i sees keys 0..i + n_k - n_q.
    """
    if align not in ("top-left", "bottom-right"):
        raise AttnError(f"unknown causal alignment {align!r}", hint="use top-left or bottom-right")
    return np.tri(n_q, n_k, k=n_k - n_q if align == "bottom-right" else 0, dtype=bool)


def check_scores(logits: np.ndarray) -> None:
    """Overflowing scores are an error, never silent infs or NaNs.

    One sum is cheaper than isfinite on every cell; only when the sum is not
    finite (an inf or NaN, or a sum too large) is every cell looked at.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(logits.sum()) or np.isfinite(logits).all():
            return
    raise AttnError(
        f"attention scores overflow {logits.dtype}: scale · q·k / temperature is too large",
        hint="scale Q or K down, use a smaller scale or a larger temperature, or pass float64 data",
    )


def check_output(output: np.ndarray) -> None:
    if not np.isfinite(output).all():
        raise AttnError(
            "the output overflows: V holds numbers too large to add up", hint="scale V down, or pass float64 data"
        )


def _score_bound(q: np.ndarray, k: np.ndarray, similarity: str) -> float:
    """An upper bound on every |q·k| and partial sum of it: max ‖q_i‖ · max ‖k_j‖
    (Cauchy–Schwarz; cosine: about 1). inf when the squares overflow, NaN when
    an input holds NaN, so the checks then run."""
    if similarity == "cosine":
        return 2.0
    return _largest_norm(q) * _largest_norm(k)


def _largest_norm(m: np.ndarray) -> float:
    """max over rows of ‖row‖: [..., n, d] -> a number (0 when empty), in m's dtype
    (a memory-mapped m is read once, not copied)."""
    if m.size == 0:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.einsum("...i,...i->...", m, m).max()))


def _cut(m: np.ndarray, rows: slice, cols: slice) -> np.ndarray:
    """The [rows, cols] block of a mask or bias; an axis of length 1 broadcasts whole."""
    return m[..., rows if m.shape[-2] > 1 else EVERYTHING, cols if m.shape[-1] > 1 else EVERYTHING]


def _pick(m: np.ndarray, where: tuple[slice, ...], ndim: int) -> np.ndarray:
    """The view of m (right-aligned against ``ndim`` axes, broadcasting) at
    ``where`` on the leading axes; an axis of length 1 stays whole."""
    lead = ndim - m.ndim  # m's axis a is axis a + lead of the whole problem
    cut = tuple(where[a + lead] if a + lead < len(where) and m.shape[a] > 1 else EVERYTHING for a in range(m.ndim))
    return m[cut]
