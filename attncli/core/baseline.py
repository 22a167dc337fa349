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

Rows are computed whole (every key), as the whole-matrix baseline did, so a
block's numbers are the whole computation's, cell for cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attncli.core.logits import Problem, check_output, combine, prepare, product
from attncli.core.options import AttentionOptions
from attncli.core.positions import rotate_qk, visible_keys
from attncli.core.reference import softmax

Rounding = Callable[[np.ndarray], np.ndarray]


def rounding(dtype: np.dtype) -> Rounding:
    """x -> x rounded to ``dtype`` and held in the working dtype (float32, or float64 for float64)."""
    work = np.float64 if dtype == np.float64 else np.float32
    if dtype == work:

        def unchanged(x: np.ndarray) -> np.ndarray:  # rounding to the working dtype is converting to it
            return np.asarray(x, dtype=work)

        return unchanged

    def rounded(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if dtype == np.float16 and x.dtype == np.float32:
            return round_float16(x)
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
    rounded: Rounding | None = None  # every step rounded to OUT's dtype; None: the equation, unrounded
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

        The scores are worked out for the keys some row of the block may see
        under causal and the window (the rest are forbidden, whatever their
        value); the softmax and the product with V run over every key, as the
        whole computation's did, so that each sum runs in the same order."""
        p = self.problem
        r = self.rounded or _same
        first_row, last_row = rows.runs[0][2], rows.runs[-1][2] + rows.runs[-1][1] - rows.runs[-1][0] - 1
        keys = visible_keys(range(first_row, last_row + 1), p.n_q, p.n_k, p.options.causal, p.options.window)
        seen = slice(keys.start, keys.stop)
        qk = r(product(p.q[..., rows.index, :], p.k[..., seen, :], p.options.similarity))  # [..., r, c] q·k (scores)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is combine's (or the baseline check's)
            scaled = qk * np.asarray(p.factor, dtype=qk.dtype)  # [..., r, c] scaled
            scaled = r(scaled) if self.tiny is None else _rounded_where_small(scaled, self.tiny, r)
            if self.softcap_steps is not None:
                cap = np.asarray(self.softcap_steps, dtype=scaled.dtype)
                scaled = r(r(np.tanh(r(scaled / cap))) * cap)
            logits = np.zeros(scaled.shape[:-1] + (p.n_k,), dtype=scaled.dtype)  # [..., r, n_k]: 0 is forbidden below
            logits[..., seen] = scaled
            for first, stop, row in rows.runs:  # soft-cap (fused), bias, ALiBi; −inf where forbidden
                combine(logits[..., first:stop, :], p, slice(row, row + stop - first))
            changed = p.options.softcap is not None or p.bias is not None or p.alibi is not None
            if self.rounded is not None and changed:  # otherwise each logit is a rounded value or −inf already
                logits = r(logits)
            v = p.v
            if self.reversed_keys:
                logits, v = np.ascontiguousarray(logits[..., ::-1]), np.ascontiguousarray(v[..., ::-1, :])
            weights = softmax(logits, sink=p.sinks, keys=None if self.reversed_keys else seen)  # [..., r, n_k]
            if self.rounded is not None:  # the weights of keys no row sees are 0 already
                weights[..., seen] = r(weights[..., seen])
            output = r(weights @ v)  # [..., r, n_k] @ [..., n_k, d_v] -> [..., r, d_v]
        return p.ungroup(output)


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _rounded_where_small(x: np.ndarray, tiny: float, rounded: Rounding) -> np.ndarray:
    """``rounded(x)`` for x a rounded number times 2^−m: only the numbers below ``tiny``
    (the rounding dtype's subnormal range, where it has fewer digits) change."""
    small = np.abs(x) < tiny
    if small.any():
        x[small] = rounded(x[small])
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
    p = prepare(rounded(q), rounded(k), rounded(v), options)  # RoPE in the working dtype...
    p = replace(p, q=rounded(p.q), k=rounded(p.k), v=rounded(p.v))  # ...then rounded, as a kernel stores it
    return Baseline(p, rounded, rounded_tiny=smallest_normal(dtype))


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
    return Baseline(p, rounded, softcap_steps=options.softcap, rounded_tiny=smallest_normal(dtype))


def rounds_differently(options: AttentionOptions, dtype: np.dtype) -> bool:
    """Do the fused and step-by-step kernels differ? Only with RoPE or a soft-cap, below float32."""
    return dtype not in (np.float32, np.float64) and (options.rope is not None or options.softcap is not None)
