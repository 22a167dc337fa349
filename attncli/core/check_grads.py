"""Are a kernel's gradients right? The forward check's rule on each of dQ, dK,
dV (and dsinks, dbias), against attn's float64 backward pass."""

from __future__ import annotations

import math

import numpy as np

from attncli.core.arrays import shape_text
from attncli.core.baseline import rounding
from attncli.core.check import ULPS, Progress, Verdict, check_failure, parts_of, ulp
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
    progress: Progress | None = None,
    keep: bool = False,
) -> dict[str, Verdict]:
    """Each gradient a kernel computed (``dq``, ``dk``, ``dv``, and ``dsinks``,
    ``dbias`` when given) against ``attention_grad``'s float64 reference, by
    the forward's rule: max|G − ref| ≤ factor · max|baseline − ref| + atol, the
    baseline the same closed form in G's dtype with every step rounded to it.
    In float64 that baseline would be the reference itself, so there, as the
    forward check does, it is the same backward summed in another order: the
    blocked backward (FlashAttention's) in blocks of FLOAT64_GRAD_BLOCK queries
    and keys, as another correct float64 kernel's sums would run.

    The problem goes by parts (batch × K/V heads, each with its group of query
    heads, whose dK and dV it sums: ``core/parts.py``), each part's gradients
    compared as they come; an input broadcast over batch or heads, dsinks and
    dbias are summed over the parts first. ``progress(done, parts)`` after each.
    -> a Verdict per gradient, by name."""
    from attncli.core.grad import attention_grad, backward

    factors = {**GRAD_FACTORS, **(factors or {})}
    # With GQA a part holds every K/V head of a batch entry: one K/V head alone would be
    # broadcast to its query heads, and RoPE would then be turned back before dK is
    # summed over them rather than after (another rounding of the baseline).
    layout, work = parts_of(q, k, v, options, whole_groups=True)
    dout = np.asarray(dout)
    lead = layout.lead
    expected = lead + (q.shape[-2], v.shape[-1])
    if dout.shape != expected:
        raise ShapeError(
            f"dO is {shape_text(dout)} but the output is {shape_text(expected)}",
            hint="give the gradient of the output, one number per output cell",
        )
    shapes = {"dq": q.shape, "dk": k.shape, "dv": v.shape}
    if options.sinks is not None:
        shapes["dsinks"] = options.sinks.shape
    if options.bias is not None:
        shapes["dbias"] = options.bias.shape
    for name, got in grads.items():
        if name not in shapes:
            raise ShapeError(
                f"{name} is given but there is no {name} to compare it with", hint="dsinks needs sinks and dbias a bias"
            )
        if tuple(got.shape) != tuple(shapes[name]):
            raise ShapeError(
                f"{name} is {shape_text(tuple(got.shape))} but the reference {name} is {shape_text(shapes[name])}",
                hint="the same inputs, options and layout as the kernel's",
            )
    kv_lead = lead[:-1] + (lead[-1] // layout.group,) if lead else ()
    leads = {"dq": lead, "dk": kv_lead, "dv": kv_lead, "dsinks": lead, "dbias": lead}  # what each broadcasts against
    trailing = {"dq": 2, "dk": 2, "dv": 2, "dsinks": 0, "dbias": 2}
    streamed = {  # a part's gradient is the whole gradient's slice: compared as it comes
        "dq": tuple(q.shape[:-2]) == lead,
        "dk": tuple(k.shape[:-2]) == kv_lead,
        "dv": tuple(v.shape[:-2]) == kv_lead,
    }
    figures = {
        name: _Figures(
            name,
            np.asarray(got).dtype,
            streamed.get(name, False),
            shapes[name],
            _padded(shapes[name], len(leads[name]), trailing[name]),
            keep,
        )
        for name, got in grads.items()
    }
    for done, part in enumerate(work, 1):
        dout_part = dout[part.where] if part.where else dout
        ref = attention_grad(part.q, part.k, part.v, dout_part, part.options).named()
        other: dict[str, np.ndarray] = {}  # the float64 baseline, once if a gradient is float64
        rounded_by: dict[str, dict[str, np.ndarray]] = {}  # the rounded baseline, once per dtype
        for name, fig in figures.items():
            if fig.dtype == np.float64:
                other = (
                    other
                    or attention_grad(part.q, part.k, part.v, dout_part, part.options, block=FLOAT64_GRAD_BLOCK).named()
                )
                base = other[name]
            else:
                if fig.dtype.name not in rounded_by:
                    rounded = rounding(fig.dtype)
                    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # an overflow: check_baseline's
                        rounded_by[fig.dtype.name] = backward(
                            rounded(part.q), rounded(part.k), rounded(part.v), rounded(dout_part), part.options, rounded
                        ).named()
                base = rounded_by[fig.dtype.name][name]
            where = part.where
            if where and name != "dq":  # K/V heads, and per-head arrays as the options hold them
                heads = where[-1]
                assert isinstance(heads, slice)
                if name in ("dk", "dv"):
                    where = (*where[:-1], slice(heads.start // layout.group, heads.stop // layout.group))
            fig.add(where, grads[name], ref[name], base)
        if progress is not None:
            progress(done, len(work))
    verdicts = {}
    for name, fig in figures.items():
        verdicts[name] = fig.verdict(grads[name], factors[name], atol)
    return verdicts


class _Figures:
    """One gradient's comparison, part by part: streamed when each part's gradient is a
    slice of the whole (dQ, dK, dV of inputs not broadcast), else summed over the parts
    into whole arrays first (dsinks, dbias, a broadcast input)."""

    def __init__(
        self, name: str, dtype: np.dtype, streamed: bool, shape: tuple[int, ...], padded: tuple[int, ...], keep: bool
    ) -> None:
        self.name, self.dtype, self.streamed, self.keep = name, dtype, streamed, keep
        self.padded = padded  # the shape with as many leading axes as the output's (1 where it broadcasts)
        self.parts: list[tuple[tuple[int | slice, ...], Verdict]] = []  # streamed: (where, figures), in order
        self.ref = None if streamed else np.zeros(shape)
        self.base: np.ndarray | None = None  # summed in the baseline's own dtype, as the whole backward sums it
        self.error = np.zeros(shape) if streamed and keep else None

    def add(self, where: tuple[int | slice, ...], got: np.ndarray, ref: np.ndarray, base: np.ndarray) -> None:
        if not self.streamed:
            assert self.ref is not None
            if self.base is None:
                self.base = np.zeros(self.ref.shape, dtype=np.asarray(base).dtype)
            cut = _place(where, self.padded)
            _sum_into(self.ref.reshape(self.padded)[cut], ref)
            _sum_into(self.base.reshape(self.padded)[cut], base)
            return
        got64 = np.asarray(got[where]).astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(got64 - ref)
            baseline_error = np.abs(np.asarray(base, dtype=np.float64) - ref)
        figures = Verdict.of(self.dtype.name, got64, error, baseline_error, ref, 0.0, 0.0)  # factor, atol: at the end
        figures.error = figures.reference = None  # the figures only: a part's arrays are let go
        if self.error is not None:
            self.error[where] = error
        self.parts.append((where, figures))

    def verdict(self, got: np.ndarray, factor: float, atol: float | None) -> Verdict:
        if self.streamed:
            result = _joined(self.parts, factor)
            result.error = self.error
        else:
            assert self.ref is not None and self.base is not None
            got64 = np.asarray(got).astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                error = np.abs(got64 - self.ref)
                baseline_error = np.abs(self.base.astype(np.float64) - self.ref)
            result = Verdict.of(self.dtype.name, got64, error, baseline_error, self.ref, factor, 0.0)
            if not np.isfinite(baseline_error).all():
                result.max_baseline_error = math.nan
        ulps = FLOAT64_GRAD_ULPS if self.dtype == np.float64 else ULPS
        result.atol = ulps * ulp(result.scale, self.dtype) if atol is None else atol
        if factor and not math.isfinite(result.max_baseline_error):
            raise check_failure(self.dtype, self.name)
        return result


def _padded(shape: tuple[int, ...], leading: int, trailing: int) -> tuple[int, ...]:
    """``shape`` with exactly ``leading`` axes before its ``trailing`` own ones: leading 1s
    added or dropped (as an input broadcasts against the output's leading axes)."""
    shape = tuple(shape)
    while len(shape) > leading + trailing and shape[0] == 1:
        shape = shape[1:]
    return (1,) * (leading + trailing - len(shape)) + shape


def _place(where: tuple[int | slice, ...], padded: tuple[int, ...]) -> tuple:
    """Where a part at ``where`` (on the output's leading axes) goes in an array of the
    ``padded`` shape: an axis of length 1 is every part's (its slot 0:1)."""
    return tuple(w if padded[a] > 1 else slice(0, 1) for a, w in enumerate(where))


def _sum_into(target: np.ndarray, values: np.ndarray) -> None:
    """target += values, values summed over the axes target has 1 (or lacks) for them."""
    extra = values.ndim - target.ndim
    if extra > 0:
        values = values.sum(axis=tuple(range(extra)))
    axes = tuple(
        i for i in range(values.ndim) if target.shape[target.ndim - values.ndim + i] == 1 and values.shape[i] != 1
    )
    if axes:
        values = values.sum(axis=axes, keepdims=True)
    target += values


def _joined(parts: list[tuple[tuple[int | slice, ...], Verdict]], factor: float) -> Verdict:
    """The figures of a whole gradient from its parts' (the parts in the whole's order):
    the first NaN, else the first largest error, as on the whole array."""
    figures = [f for _, f in parts]
    nan = [i for i, f in enumerate(figures) if math.isnan(f.max_error)]
    chosen = nan[0] if nan else int(np.argmax([f.max_error for f in figures]))
    where, first = parts[chosen]
    local = iter(first.worst)
    worst = tuple(w if isinstance(w, int) else w.start + next(local) for w in where) + tuple(local)
    baseline = [f.max_baseline_error for f in figures]
    return Verdict(
        first.dtype,
        first.max_error,
        max(baseline) if all(math.isfinite(b) for b in baseline) else math.nan,
        max(f.scale for f in figures),
        worst,
        first.worst_out,
        first.worst_reference,
        all(f.finite for f in figures),
        factor,
        0.0,
    )
