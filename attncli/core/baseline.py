"""What ``attn check`` compares with, a block of query rows at a time: the
equation in float64 (the reference's rows) and the naive baselines, attention
as a kernel working in OUT's dtype computes it.

Two naive kernels round differently, and a correct kernel may be either:

- **fused** (FlashAttention, PyTorch's SDPA): the inputs rounded to OUT's
  dtype, RoPE worked out in float32 and rounded once, then every step
  (scores, scaled scores, logits with the soft-cap in one go, weights,
  output) rounded to it;
- **step by step** (Hugging Face's eager attention): RoPE's cos and sin
  rounded to OUT's dtype and each product and sum of the rotation rounded,
  and the soft-cap as three rounded operations, tanh(x / cap) · cap.

The check takes, cell by cell, the larger of the two baselines' errors (they
are the same kernel without RoPE or a soft-cap, or in float32). Products are
summed in float32, as GPU tensor cores and PyTorch's CPU kernels do.

A block of rows works only on the keys some of its rows may see under causal
and the window; the others would add exact zeros to the softmax's sum and to
the product with V, so only the order of those float32 sums differs from the
whole-matrix baseline's (BLAS cuts a product's keys by their number): now and
then a result one unit of OUT's dtype away (tests/test_check_blocks.py says
how often). Without causal or a window a block's numbers are the whole
computation's, bit for bit, and the equation's (float64) always are: its sums
run over every key. Every rounding is numpy's, to the number (``round_float16``,
``round_float16_in_place`` for float16, the costly case).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attncli.core.logits import Problem, check_output, combine, prepare, product
from attncli.core.options import AttentionOptions
from attncli.core.positions import rotate_qk, seen_by_all, visible_keys

Rounding = Callable[[np.ndarray], np.ndarray]


def rounding(dtype: np.dtype, in_place: bool = False) -> Rounding:
    """x -> x rounded to ``dtype`` and held in the working dtype (float32, or float64 for float64).
    ``in_place``: the function may overwrite x (a temporary of its own) with the result."""
    work = np.float64 if dtype == np.float64 else np.float32
    if dtype == work:

        def unchanged(x: np.ndarray) -> np.ndarray:  # rounding to the working dtype is converting to it
            return np.asarray(x, dtype=work)

        return unchanged

    def rounded(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if dtype == np.float16 and x.dtype == np.float32:
            return round_float16_in_place(x) if in_place and x.flags.writeable else round_float16(x)
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(dtype).astype(work)

    return rounded


FLOAT16_LOWEST_EXPONENT = np.uint32(113 << 23)  # float32's exponent field of 2^-14, float16's smallest normal
FLOAT16_PAST_MAX = 65520.0  # float16's largest, 65504, plus half its last step: rounds to inf from here


def round_float16(x: np.ndarray) -> np.ndarray:
    """x [float32] rounded to float16 (to nearest, ties to even) and back: the numbers of
    ``x.astype(np.float16).astype(np.float32)``, bit for bit (checked on every float32),
    without numpy's conversion, which takes 3–5 ns a number, and 100 ns and more for
    numbers below float16's normal range (softmax weights, often).

    |x| + c − c rounds |x| to a multiple of c's last place (the hardware rounds to
    nearest, ties to even); c = 2^(e + 13) for |x| in [2^e, 2^(e+1)) makes that place
    2^(e − 10), float16's step there, and c = 2^−1 below 2^−14 makes it 2^−24, the step
    of float16's subnormal numbers. The sign is put back after; numbers that round past
    float16's largest (and NaN) go through numpy's conversion."""
    a = np.abs(x)
    c = a.view(np.uint32) & np.uint32(0x7F800000)  # |x|'s exponent field
    np.maximum(c, FLOAT16_LOWEST_EXPONENT, out=c)
    c += np.uint32(13 << 23)  # 2^(e + 13)
    step = c.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        np.add(a, step, out=a)
        a -= step
        # |x| ≥ 65520 rounds to 65536 or more here (inf to NaN), as NaN stays NaN: then numpy says
        overflowed = not a.max(initial=0.0) < 2.0**16
    np.copysign(a, x, out=a)
    if overflowed:
        with np.errstate(over="ignore", invalid="ignore"):
            far = ~(np.abs(x) < FLOAT16_PAST_MAX)
            a[far] = x[far].astype(np.float16).astype(np.float32)
    return a


FLOAT16_TINY = 2.0**-14  # float16's smallest normal number
FLOAT16_STEP_BELOW_NORMAL = np.float32(0.75)  # 1.5 · 2^−1: its last place is 2^−24, float16's subnormal step
FLOAT16_STEP_SHIFT = np.float32(1.5 * 2**13)  # 2^e · 1.5 · 2^13: a last place of 2^(e − 10), float16's step


def round_float16_in_place(x: np.ndarray) -> np.ndarray:
    """x [float32] rounded to float16 and back, in place: the values of ``round_float16``
    (a number that rounds to zero is +0 where numpy's conversion gives −0 for a negative
    one; equal as numbers), in five passes over x and a scratch array rather than eight.

    x + c − c with c = 1.5 · 2^(e + 13) for |x| in [2^e, 2^(e+1)) (c = 0.75 below 2^−14):
    x + c lies in c's binade whatever x's sign, whose last place is float16's step at x;
    c is an even multiple of that place, so ties still go to even. Near and beyond
    float16's range (|x| ≥ 32768, inf, NaN: rare) ``round_float16`` does it."""
    step = np.bitwise_and(x.view(np.uint32), np.uint32(0x7F800000)).view(np.float32)  # 2^e (0 below normal)
    with np.errstate(over="ignore", invalid="ignore"):
        step *= FLOAT16_STEP_SHIFT
        if step.size and not step.max() < FLOAT16_STEP_SHIFT * 2.0**15:  # |x| ≥ 32768, inf or NaN somewhere
            x[...] = round_float16(x)
            return x
        np.maximum(step, FLOAT16_STEP_BELOW_NORMAL, out=step)
        x += step
        x -= step
    return x


@dataclass(frozen=True)
class Rows:
    """One block of query rows: ``index`` (a slice, or chosen rows in order) and
    its runs of consecutive rows, (first, stop) within the block and the first's
    row number, which is what causal, the window, ALiBi, a mask and a bias depend on."""

    index: slice | np.ndarray
    runs: tuple[tuple[int, int, int], ...]

    @classmethod
    def span(cls, start: int, stop: int) -> Rows:
        return cls(slice(start, stop), ((0, stop - start, start),))

    @classmethod
    def chosen(cls, rows: np.ndarray) -> Rows:
        """Rows [r] in increasing order, cut into runs of consecutive numbers."""
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        starts, stops = np.concatenate(([0], breaks)), np.concatenate((breaks, [len(rows)]))
        runs = tuple((int(a), int(b), int(rows[a])) for a, b in zip(starts, stops, strict=True))
        return cls(rows, runs)

    def __len__(self) -> int:
        if isinstance(self.index, slice):
            return self.index.stop - self.index.start
        return len(self.index)


@dataclass(frozen=True)
class Baseline:
    """A prepared problem and how its rows are computed from it."""

    problem: Problem  # Q, K (rotated) and V as the kernel stores them
    rounded: Rounding | None = None  # every step rounded to OUT's dtype (in place); None: the equation, unrounded
    softcap_steps: float | None = None  # the soft-cap in three rounded steps (step by step), not in combine
    rounded_tiny: float = 0.0  # the smallest normal number of the dtype ``rounded`` rounds to
    reversed_keys: bool = False  # the keys summed last to first (float64's baseline: another order)

    @property
    def tiny(self) -> float | None:
        """When the factor is 2^−m (d_k = 16, 64, 256 ...): the smallest normal number of the
        rounding dtype, below which a rounded score times the factor needs rounding again
        (above it, the product of a rounded number and 2^−m is one already). Else None."""
        factor = self.problem.factor
        if self.rounded is None or not 0 < factor <= 1 or math.frexp(factor)[0] != 0.5:
            return None
        return self.rounded_tiny

    def rows(self, rows: Rows) -> np.ndarray:
        """The output rows: [..., H_q, r, d_v] in the working dtype.

        The scores are worked out for the keys some row of the block may see under
        causal and the window (``seen``); the rest are forbidden, whatever their
        value. A rounded baseline's softmax and product with V run over those keys
        alone too (the others would add exact zeros: only the float32 sums' order
        changes, by a unit in their last place); the equation's (float64, unrounded)
        run over every key, as the whole computation's did, so that each of its sums
        runs in the same order. ``rounded`` works in place on the block's own arrays."""
        p = self.problem
        r = self.rounded or _same
        first_row, last_row = rows.runs[0][2], rows.runs[-1][2] + rows.runs[-1][1] - rows.runs[-1][0] - 1
        keys = visible_keys(range(first_row, last_row + 1), p.n_q, p.n_k, p.options.causal, p.options.window)
        seen = slice(keys.start, keys.stop)
        logits = r(product(p.q[..., rows.index, :], p.k[..., seen, :], p.options.similarity))  # [..., r, c] q·k
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is combine's (or the baseline check's)
            logits *= np.asarray(p.factor, dtype=logits.dtype)  # [..., r, c] scaled
            logits = r(logits) if self.tiny is None else _rounded_where_small(logits, self.tiny, r)
            if self.softcap_steps is not None:
                cap = np.asarray(self.softcap_steps, dtype=logits.dtype)
                logits = r(r(np.tanh(r(logits / cap))) * cap)
            for first, stop, row in rows.runs:  # soft-cap (fused), bias, ALiBi; −inf where forbidden
                _combine_run(logits[..., first:stop, :], p, range(row, row + stop - first), keys)
            changed = p.options.softcap is not None or p.bias is not None or p.alibi is not None
            if self.rounded is not None and changed:  # otherwise each logit is a rounded value or −inf already
                logits = r(logits)
            v = p.v[..., seen, :]  # [..., c, d_v]
            if self.rounded is None:  # the equation sums over every key, as reference.reference: the same numbers
                every = np.full(logits.shape[:-1] + (p.n_k,), -np.inf, dtype=logits.dtype)  # [..., r, n_k]
                every[..., seen] = logits
                logits, v = every, p.v
            if self.reversed_keys:
                logits, v = np.ascontiguousarray(logits[..., ::-1]), np.ascontiguousarray(v[..., ::-1, :])
            weights = r(_softmax_in_place(logits, p.sinks))  # [..., r, c]
            output = r(weights @ v)  # [..., r, c] @ [..., c, d_v] -> [..., r, d_v]
        return p.ungroup(output)


def _combine_run(logits: np.ndarray, p: Problem, rows: range, keys: range) -> None:
    """``combine`` on consecutive rows' logits [..., r, c] of ``keys``, in place: the keys
    every one of the rows may see need no causal or window band worked out."""
    causal, window = p.options.causal, p.options.window
    every = seen_by_all(rows, p.n_q, p.n_k, causal, window)
    low, high = max(every.start, keys.start), min(every.stop, keys.stop)
    if (causal is None and window is None) or low >= high:
        combine(logits, p, slice(rows.start, rows.stop), slice(keys.start, keys.stop))
        return
    for start, stop, inside in ((keys.start, low, False), (low, high, True), (high, keys.stop, False)):
        if start < stop:
            cols = slice(start - keys.start, stop - keys.start)
            combine(logits[..., cols], p, slice(rows.start, rows.stop), slice(start, stop), inside=inside)


def _softmax_in_place(x: np.ndarray, sink: np.ndarray | None) -> np.ndarray:
    """``reference.softmax(x, sink=sink)`` along the last axis, in x: the same numbers."""
    peak = np.max(x, axis=-1, keepdims=True, initial=-np.inf)  # [..., r, 1]
    if sink is not None:
        peak = np.maximum(peak, sink)
    peak[~np.isfinite(peak)] = 0  # all −inf row: exp(−inf) = 0 below
    x -= peak
    np.exp(x, out=x)
    total = np.sum(x, axis=-1, keepdims=True)
    if sink is not None:
        total = total + np.exp(sink - peak)  # the sink's share of the denominator; it has no value
    empty = ~(total > 0)  # no weight (or NaN): a row of zeros, as reference.softmax gives
    if empty.any():
        total[empty] = 1
        x /= total
        np.copyto(x, 0, where=empty)
    else:
        x /= total
    return x


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _rounded_where_small(x: np.ndarray, tiny: float, rounded: Rounding) -> np.ndarray:
    """``rounded(x)`` for x a rounded number times 2^−m: only the numbers below ``tiny``
    (the rounding dtype's subnormal range, where it has fewer digits) change.

    float16 in float32, in two passes: x + 0.75 − 0.75 rounds x to a multiple of 2^−24
    (0.75's last place), float16's subnormal step, and leaves every other float16 number
    times 2^−m as it is: such a number below 2^21 is a multiple of 2^(e − 10), so x + 0.75
    needs at most 24 bits, and is exact (|x| ≤ 65504 here; inf and NaN stay)."""
    if tiny == FLOAT16_TINY and x.dtype == np.float32:
        x += FLOAT16_STEP_BELOW_NORMAL
        x -= FLOAT16_STEP_BELOW_NORMAL
        return x
    if not x.flags.c_contiguous:
        small = np.abs(x) < tiny
        if small.any():
            x[small] = rounded(x[small])
        return x
    flat = x.reshape(-1)  # a view
    at = np.flatnonzero(np.abs(flat) < tiny)  # one scan of the mask, not two (0.97 rather than 1.16 ns a number)
    if at.size:
        flat[at] = rounded(flat[at])
    return x


def equation(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, reversed_keys: bool = False
) -> Reference:
    """The reference's equation in float64, row by row (``reference.reference``'s steps)."""
    q, k, v = (np.asarray(m, dtype=np.float64) for m in (q, k, v))
    return Reference(prepare(q, k, v, options), reversed_keys=reversed_keys)


@dataclass(frozen=True)
class Reference(Baseline):
    """The equation in float64: its rows are checked as the reference's are (a finite output)."""

    def rows(self, rows: Rows) -> np.ndarray:
        output = super().rows(rows)
        check_output(output)
        return output


def fused(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, dtype: np.dtype) -> Baseline:
    """The naive kernel that rounds as a fused one: inputs rounded, RoPE in the working dtype, rounded once."""
    rounded = rounding(dtype)
    inputs = rounded(q), rounded(k), rounded(v)
    p = prepare(*inputs, options)  # RoPE in the working dtype...

    def stored(x: np.ndarray) -> np.ndarray:  # ...then rounded, as a kernel stores it; what prepare only
        # arranged (no RoPE; GQA's K and V) is rounded already, and rounding a view of a broadcast would copy it
        return x if any(np.may_share_memory(x, m) for m in inputs) else rounded(x)

    p = replace(p, q=stored(p.q), k=stored(p.k), v=stored(p.v))
    return Baseline(p, rounding(dtype, in_place=True), rounded_tiny=smallest_normal(dtype))


def smallest_normal(dtype: np.dtype) -> float:
    """float16's 2^−14, bfloat16's 2^−126 (float32's)."""
    if dtype.name == "bfloat16":
        return float(np.finfo(np.float32).tiny)
    return float(np.finfo(dtype).tiny)


def step_by_step(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, dtype: np.dtype) -> Baseline:
    """The naive kernel that rounds as Hugging Face's eager attention: cos, sin and each
    step of RoPE rounded (q·cos, rotate_half(q)·sin, their sum), the soft-cap in three."""
    rounded = rounding(dtype)
    p = prepare(rounded(q), rounded(k), rounded(v), options.but(rope=None, softcap=None))
    if options.rope is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            q_rot, k_rot = rotate_qk(p.q, p.k, options.rope, rounded=rounded)
        p = replace(p, q=q_rot, k=k_rot)
    p = replace(p, q=rounded(p.q), k=rounded(p.k), v=rounded(p.v))  # its options: no RoPE, no soft-cap in combine
    in_place = rounding(dtype, in_place=True)
    return Baseline(p, in_place, softcap_steps=options.softcap, rounded_tiny=smallest_normal(dtype))


def rounds_differently(options: AttentionOptions, dtype: np.dtype) -> bool:
    """Do the fused and step-by-step kernels differ? Only with RoPE or a soft-cap, below float32."""
    return dtype not in (np.float32, np.float64) and (options.rope is not None or options.softcap is not None)
