"""Are a kernel's gradients right? The forward check's rule on each of dQ, dK,
dV (and dsinks, dbias), against attn's float64 backward pass."""

from __future__ import annotations

import numpy as np

from attncli.core.arrays import shape_text
from attncli.core.baseline import rounding
from attncli.core.check import ULPS, Verdict, check_baseline, ulp
from attncli.core.options import AttentionOptions
from attncli.errors import ShapeError

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
        verdicts[name] = Verdict.of(dtype.name, got64, error, baseline_error, want, factors[name], tol)
    return verdicts
