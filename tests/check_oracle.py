"""Today's ``attn check`` (before it went in blocks), kept as the oracle the blocked check is
compared with (tests/test_check_blocks.py): whole [heads, n, n] float64 matrices and whole rounded
low-precision ones. Not used by attn."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from attncli.core.arrays import is_bfloat16, shape_text
from attncli.core.kernel import blocked
from attncli.core.logits import combine, prepare, scores
from attncli.core.options import AttentionOptions
from attncli.core.reference import reference, softmax
from attncli.errors import AttnError, ShapeError  # noqa: F401

ULPS = 2.0  # the default atol, in units in the last place of OUT's dtype at max|ref|
FLOAT64_KEY_BLOCK = 64  # the float64 baseline's key blocks


@dataclass
class Verdict:
    """The figures of one check; arrays are [..., H, n_q, d_v] like the output."""

    dtype: str  # OUT's dtype
    out: np.ndarray  # OUT, float64
    error: np.ndarray  # |OUT − ref|, float64
    baseline_error: np.ndarray  # |baseline − ref|, float64
    reference: np.ndarray  # the float64 reference output
    factor: float
    atol: float

    @property
    def max_error(self) -> float:
        return float(self.error.max()) if self.error.size else 0.0

    @property
    def max_baseline_error(self) -> float:
        return float(self.baseline_error.max()) if self.baseline_error.size else 0.0

    @property
    def scale(self) -> float:
        """max|ref|: what relative errors are relative to."""
        return float(np.abs(self.reference).max()) if self.reference.size else 0.0

    @property
    def max_relative_error(self) -> float:
        """max|OUT − ref| / max|ref| (0 when the reference is all zeros and so is the error)."""
        scale = self.scale
        return self.max_error / scale if scale else (0.0 if self.max_error == 0 else math.inf)

    @property
    def tolerance(self) -> float:
        return (self.factor * self.max_baseline_error if self.factor else 0.0) + self.atol

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.error).all()) and self.max_error <= self.tolerance

    @property
    def worst(self) -> tuple[int, ...]:
        """The index of the largest error (a NaN counts as the largest)."""
        bad = np.isnan(self.error)
        flat = int(np.argmax(bad)) if bad.any() else int(np.argmax(self.error))
        return tuple(int(i) for i in np.unravel_index(flat, self.error.shape))


def check(
    out: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    options: AttentionOptions,
    factor: float = 2.0,
    atol: float | None = None,
) -> Verdict:
    """Compare a kernel's output [..., H_q, n_q, d_v] with the float64 reference
    and the naive baseline in OUT's dtype (see the module's docstring)."""
    q64, k64, v64 = (np.asarray(m).astype(np.float64) for m in (q, k, v))
    ref = reference(q64, k64, v64, options).output
    if tuple(out.shape) != ref.shape:
        raise ShapeError(
            f"OUT is {shape_text(tuple(out.shape))} but the output of Q, K and V is {shape_text(ref)}",
            hint="the same inputs, options and layout as the kernel's",
        )
    dtype = np.asarray(out).dtype
    if dtype == np.float64:
        base = blocked(q64, k64, v64, options, query_block=64, key_block=FLOAT64_KEY_BLOCK, workers=1)
    else:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # an overflow: check_baseline's
            base = naive(q, k, v, options, dtype)
    out64 = np.asarray(out).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(out64 - ref)  # NaN where OUT is NaN
        baseline_error = np.abs(base.astype(np.float64) - ref)
    if atol is None:
        atol = ULPS * ulp(float(np.abs(ref).max()) if ref.size else 0.0, dtype)
    check_baseline(baseline_error, dtype, factor)
    return Verdict(dtype.name, out64, error, baseline_error, ref, factor, atol)


def check_baseline(baseline_error: np.ndarray, dtype: np.dtype, factor: float, what: str = "the output") -> None:
    """A baseline that overflows ``dtype`` gives the rule no tolerance: say so, never pass or fail on NaN."""
    if factor and not np.isfinite(baseline_error).all():
        raise AttnError(
            f"the naive {dtype.name} baseline overflows on these inputs, so the rule has no tolerance for {what}",
            hint="scale Q or K down, or give one: --factor 0 --atol A",
        )


def naive(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, dtype: np.dtype) -> np.ndarray:
    """Attention as a naive kernel in ``dtype`` computes it: inputs and every
    intermediate rounded to ``dtype``; sums of products in float32 (float64 for
    float64). -> [..., H_q, n_q, d_v] in float32 (float64)."""
    rounded = rounding(dtype)
    p = prepare(rounded(q), rounded(k), rounded(v), options)  # RoPE in the working dtype...
    p = replace(p, q=rounded(p.q), k=rounded(p.k), v=rounded(p.v))  # ...then rounded, as a kernel stores it
    qk = rounded(scores(p))  # [..., n_q, n_k]
    logits, _ = combine(rounded(qk * p.factor), p)  # soft-cap, bias, ALiBi, masks in the working dtype
    weights = rounded(softmax(rounded(logits), sink=p.sinks))  # softmax accumulates in the working dtype
    return p.ungroup(rounded(weights @ p.v))  # [..., n_q, n_k] @ [..., n_k, d_v] -> [..., n_q, d_v]


def rounding(dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    """x -> x rounded to ``dtype`` and held in the working dtype (float32, or float64 for float64)."""
    work = np.float64 if dtype == np.float64 else np.float32

    def rounded(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(x).astype(dtype).astype(work)

    return rounded


def ulp(x: float, dtype: np.dtype) -> float:
    """The unit in the last place of ``dtype`` at |x|: 2^(⌊log₂|x|⌋ − mantissa bits)."""
    if is_bfloat16(dtype):
        import ml_dtypes

        info = ml_dtypes.finfo(dtype)
    else:
        info = np.finfo(dtype)
    x = max(abs(x), float(info.tiny))
    return 2.0 ** (math.floor(math.log2(x)) - int(info.nmant))


# ---------------------------------------------------------------- the backward pass

# Each gradient's default factor: FlashAttention's tests allow each of dQ, dK and dV
# 2× the error of a PyTorch implementation in the same dtype (atol aside), as the
# forward rule does. PyTorch's SDPA tests allow more in low precision (160 for dQ,
# 25 for dK, 8 for dV); pass larger factors to follow them.
GRAD_FACTORS = {"dq": 2.0, "dk": 2.0, "dv": 2.0, "dsinks": 2.0, "dbias": 2.0}
FLOAT64_GRAD_BLOCK = 16  # the float64 baseline's query and key blocks (the blocked backward)
FLOAT64_GRAD_ULPS = 16.0  # and its atol, in ulps: measured, PyTorch's float64 backward needs up to 8 past 2 × baseline


def check_grads(
    grads: dict[str, np.ndarray],
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    dout: np.ndarray,
    options: AttentionOptions,
    factors: dict[str, float] | None = None,
    atol: float | None = None,
) -> dict[str, Verdict]:
    """Each gradient a kernel computed (``dq``, ``dk``, ``dv``, and ``dsinks``,
    ``dbias`` when given) against ``attention_grad``'s float64 reference, by
    the forward's rule: max|G − ref| ≤ factor · max|baseline − ref| + atol, the
    baseline the same closed form in G's dtype with every step rounded to it.
    In float64 that baseline would be the reference itself, so there, as the
    forward check does, it is the same backward summed in another order: the
    blocked backward (FlashAttention's) in blocks of FLOAT64_GRAD_BLOCK queries
    and keys, as another correct float64 kernel's sums would run.
    -> a Verdict per gradient, by name."""
    from attncli.core.grad import attention_grad, backward

    factors = {**GRAD_FACTORS, **(factors or {})}
    ref = attention_grad(q, k, v, dout, options).named()
    other_order: dict[str, np.ndarray] = {}  # the float64 baseline, computed once if a gradient is float64
    verdicts = {}
    for name, got in grads.items():
        if name not in ref:
            raise ShapeError(
                f"{name} is given but there is no {name} to compare it with", hint="dsinks needs sinks and dbias a bias"
            )
        want = ref[name]
        if tuple(got.shape) != want.shape:
            raise ShapeError(
                f"{name} is {shape_text(tuple(got.shape))} but the reference {name} is {shape_text(want)}",
                hint="the same inputs, options and layout as the kernel's",
            )
        dtype = np.asarray(got).dtype
        if dtype == np.float64:
            other_order = other_order or attention_grad(q, k, v, dout, options, block=FLOAT64_GRAD_BLOCK).named()
            base = other_order[name]
        else:
            rounded = rounding(dtype)
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # an overflow: check_baseline's
                base = backward(rounded(q), rounded(k), rounded(v), rounded(dout), options, rounded).named()[name]
        got64 = np.asarray(got).astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(got64 - want)
            baseline_error = np.abs(np.asarray(base, dtype=np.float64) - want)
        ulps = FLOAT64_GRAD_ULPS if dtype == np.float64 else ULPS
        tol = ulps * ulp(float(np.abs(want).max()) if want.size else 0.0, dtype) if atol is None else atol
        check_baseline(baseline_error, dtype, factors[name], name)
        verdicts[name] = Verdict(dtype.name, got64, error, baseline_error, want, factors[name], tol)
    return verdicts
