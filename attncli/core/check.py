"""Is a kernel's output right? FlashAttention's rule, with attn's reference.

    passes  ⇔  max|OUT − ref| ≤ factor · max|baseline − ref| + atol

``ref`` is the reference in float64 (attn's blocked kernel). ``baseline`` is
what a naive kernel working in OUT's dtype gets: the inputs rounded to that
dtype and every step (RoPE, scores, scaled scores, logits, weights, output)
rounded to it, with products summed in float32 as GPU tensor cores and
PyTorch's CPU kernels do; where a fused kernel and a step-by-step one round
differently (RoPE, a soft-cap), the larger of their errors, cell by cell
(``core/baseline.py``). A correct low-precision kernel should be about as
close to the truth as that baseline; ``atol`` (default: two units in the last
place of OUT's dtype at the output's largest magnitude) covers a baseline
that happens to be exact.

In float64 a naive kernel *is* the reference, so its error would be 0 and
any other summation order would fail; there the reference is the equation
row by row and the baseline the blocked kernel (online softmax over blocks of
64 keys), whose sums run in another order, as another correct float64
kernel's would (with ``rows``: the equation with the keys summed last to
first).

Nothing the size of heads × n_q × n_k is ever held: the problem goes by
parts (batch × K/V heads, ``core/parts.py``) and each part by blocks of
query rows, compared as they come. ``rows`` checks a sample of the query
rows of every (batch, head) (``core/sample.py``) rather than all of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attncli.core.arrays import is_bfloat16, shape_text
from attncli.core.baseline import Baseline, Rows, equation, fused, rounding, rounds_differently, step_by_step
from attncli.core.kernel import blocked
from attncli.core.options import AttentionOptions
from attncli.core.parallel import map_blocks
from attncli.core.parts import Layout, Part, parts, validate
from attncli.core.positions import visible_keys
from attncli.core.sample import Sample, sample_rows
from attncli.errors import AttnError, ShapeError

__all__ = ["ULPS", "Verdict", "check", "check_baseline", "naive", "rounding", "ulp"]

ULPS = 2.0  # the default atol, in units in the last place of OUT's dtype at max|ref|
FLOAT64_KEY_BLOCK = 64  # the float64 baseline's key blocks
PART_BYTES = 64 << 20  # a part's Q, K, V in float64, at most (one K/V head at least)
# A block's rows × keys it may see × heads, at most (one row at least): 2 MiB of float32, which
# its dozen passes (roundings, the softmax) run through in the cache; 1 << 20 took 1.3× the time,
# 1 << 18 about the same ([1, 1, 8192, 64] causal float16, one thread).
BLOCK_CELLS = 1 << 19
# Query rows a block should have at least: the products Q·Kᵀ and P·V repack K and V for every
# block, which blocks of 12 rows (5 heads of 8,192 keys) paid for 4-5 times over; parts are of
# as few K/V heads as give their blocks this many rows.
BLOCK_ROWS = 64

Progress = Callable[[int, int], None]


@dataclass
class Verdict:
    """The figures of one check. Indices are of an array [..., H, n_q, d_v] like the output."""

    dtype: str  # OUT's dtype
    max_error: float  # max |OUT − ref| (NaN when OUT holds NaN)
    max_baseline_error: float  # max |baseline − ref|
    scale: float  # max |ref|: what relative errors are relative to
    worst: tuple[int, ...]  # the index of the largest error (a NaN counts as the largest)
    worst_out: float  # OUT there
    worst_reference: float  # the reference there
    finite: bool  # every |OUT − ref| finite
    factor: float
    atol: float
    # The output's figures, by (batch, head) and query row checked: [..., H, rows] (None for gradients)
    by_query: np.ndarray | None = None  # max |OUT − ref| over the columns
    baseline_by_query: np.ndarray | None = None  # max |baseline − ref| over the columns
    rows: np.ndarray | None = None  # the query rows checked ([rows]); None: every row
    n_q: int = 0  # the output's query rows
    sample: Sample | None = None  # how the rows were chosen (--rows)
    error: np.ndarray | None = field(default=None, repr=False)  # |OUT − ref| whole, when kept
    reference: np.ndarray | None = field(default=None, repr=False)  # the reference whole, when kept

    @property
    def max_relative_error(self) -> float:
        """max|OUT − ref| / max|ref| (0 when the reference is all zeros and so is the error)."""
        return self.max_error / self.scale if self.scale else (0.0 if self.max_error == 0 else math.inf)

    @property
    def worst_error(self) -> float:
        """|OUT − ref| at the worst index (NaN there when OUT is NaN)."""
        return abs(self.worst_out - self.worst_reference)

    @property
    def tolerance(self) -> float:
        return (self.factor * self.max_baseline_error if self.factor else 0.0) + self.atol

    @property
    def passed(self) -> bool:
        return self.finite and self.max_error <= self.tolerance

    @classmethod
    def of(
        cls,
        dtype: str,
        got: np.ndarray,
        error: np.ndarray,
        baseline_error: np.ndarray,
        reference: np.ndarray,
        factor: float,
        atol: float,
    ) -> Verdict:
        """The figures of whole arrays (a gradient and its reference)."""
        worst = _first_worst(error)
        return cls(
            dtype,
            _largest(error),
            _largest(baseline_error),
            float(np.abs(reference).max()) if reference.size else 0.0,
            worst,
            float(got[worst]) if got.size else 0.0,
            float(reference[worst]) if reference.size else 0.0,
            bool(np.isfinite(error).all()),
            factor,
            atol,
            error=error,
            reference=reference,
        )


def _largest(x: np.ndarray) -> float:
    return float(x.max()) if x.size else 0.0


def _first_worst(error: np.ndarray) -> tuple[int, ...]:
    """The index of the first NaN, else of the first largest value (0s for an empty array)."""
    if not error.size:
        return (0,) * error.ndim
    bad = np.isnan(error)
    flat = int(np.argmax(bad)) if bad.any() else int(np.argmax(error))
    return tuple(int(i) for i in np.unravel_index(flat, error.shape))


def check(
    out: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    options: AttentionOptions,
    factor: float = 2.0,
    atol: float | None = None,
    *,
    rows: int | None = None,
    seed: int | None = None,
    keep: bool = False,
    progress: Progress | None = None,
) -> Verdict:
    """Compare a kernel's output [..., H_q, n_q, d_v] with the float64 reference
    and the naive baseline in OUT's dtype (see the module's docstring).

    ``rows``: check that many query rows of every (batch, head), chosen by
    ``sample.sample_rows`` (with ``seed``). ``keep``: keep |OUT − ref| and the
    reference whole ([..., H_q, rows, d_v]) in the verdict. ``progress(done, total)``
    is called as the work goes, from the calling thread."""
    layout = validate(q, k, v, options)
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    expected = layout.lead + (n_q, d_v)
    if tuple(out.shape) != expected:
        raise ShapeError(
            f"OUT is {shape_text(tuple(out.shape))} but the output of Q, K and V is {shape_text(expected)}",
            hint="the same inputs, options and layout as the kernel's",
        )
    dtype = np.asarray(out).dtype
    sample = None if rows is None else sample_rows(n_q, n_k, rows, options.causal, options.window, seed)
    figures = _Figures(layout.lead, n_q if sample is None else len(sample.rows), d_v, keep)
    heads = max(1, BLOCK_CELLS // (BLOCK_ROWS * max(1, n_k) * layout.group))  # K/V heads a part of such blocks has
    work = list(parts(q, k, v, options, layout, PART_BYTES, heads))
    ticks = _Ticks(progress, 2 * len(work) * figures.n_rows)
    for part in work:
        _check_part(out, part, dtype, sample, figures, ticks)
    if atol is None:
        atol = ULPS * ulp(figures.scale, dtype)
    if factor and not figures.baseline_finite:
        raise check_failure(dtype)
    return figures.verdict(out, dtype, factor, atol, n_q, sample)


def check_baseline(baseline_error: np.ndarray, dtype: np.dtype, factor: float, what: str = "the output") -> None:
    """A baseline that overflows ``dtype`` gives the rule no tolerance: say so, never pass or fail on NaN."""
    if factor and not np.isfinite(baseline_error).all():
        raise check_failure(dtype, what)


def check_failure(dtype: np.dtype, what: str = "the output") -> AttnError:
    return AttnError(
        f"the naive {dtype.name} baseline overflows on these inputs, so the rule has no tolerance for {what}",
        hint="scale Q or K down, or give one: --factor 0 --atol A",
    )


def _check_part(
    out: np.ndarray, part: Part, dtype: np.dtype, sample: Sample | None, figures: _Figures, ticks: _Ticks
) -> None:
    """One part: its reference and baselines, block by block of query rows, into ``figures``."""
    n_q, n_k = part.q.shape[-2], part.k.shape[-2]
    got = out[part.where] if part.where else out  # [h, n_q, d_v]
    whole: np.ndarray | None = None  # the reference (or float64's baseline) of every row of the part
    reference: Baseline | None = None  # the reference row by row (float64 OUT, or --rows)
    baselines: list[Baseline] = []
    q64, k64, v64 = (np.asarray(m, dtype=np.float64) for m in (part.q, part.k, part.v))
    if sample is not None:
        ticks.skip(figures.n_rows)
    if dtype == np.float64:
        reference = equation(q64, k64, v64, part.options)
        if sample is None:
            whole = blocked(
                q64, k64, v64, part.options, query_block=64, key_block=FLOAT64_KEY_BLOCK, workers=1,
                progress=ticks.share(n_q),
            )  # fmt: skip
        else:
            baselines.append(equation(q64, k64, v64, part.options, reversed_keys=True))
    else:
        if sample is None:
            whole = blocked(q64, k64, v64, part.options, progress=ticks.share(n_q))
        else:
            reference = equation(q64, k64, v64, part.options)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # an overflow: the baseline check's
            baselines.append(fused(part.q, part.k, part.v, part.options, dtype))
            if rounds_differently(part.options, dtype):
                baselines.append(step_by_step(part.q, part.k, part.v, part.options, dtype))
    del q64, k64, v64
    chosen = None if sample is None else sample.rows
    row_of = np.arange(n_q) if chosen is None else chosen
    blocks = [
        (Rows.span(at.start, at.stop) if chosen is None else Rows.chosen(chosen[at]), at)
        for at in _blocks(row_of, n_q, part.heads, n_k, part.options)
    ]
    progress = ticks.share(figures.n_rows)
    if not blocks:
        return

    def run(block: tuple[Rows, slice]) -> None:
        rows, at = block
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if reference is not None:
                ref = reference.rows(rows)
                other = None if whole is None else whole[..., rows.index, :]
            else:
                assert whole is not None
                ref, other = whole[..., rows.index, :], None
            base_error = None if other is None else np.abs(other.astype(np.float64) - ref)
            for baseline in baselines:
                err = np.abs(baseline.rows(rows).astype(np.float64) - ref)
                base_error = err if base_error is None else np.maximum(base_error, err)  # NaN stays
            got_rows = np.asarray(got[..., rows.index, :]).astype(np.float64)
            error = np.abs(got_rows - ref)  # NaN where OUT is NaN
        assert base_error is not None
        figures.add(part.where, at, error, base_error, ref)

    map_blocks(run, blocks, None, progress)


def _blocks(row_of: np.ndarray, n_q: int, heads: int, n_k: int, options: AttentionOptions) -> list[slice]:
    """The rows ``row_of`` [n] in blocks of heads × rows × keys they may see ≤ BLOCK_CELLS
    (one row at least): under causal or a window, the earlier blocks see fewer keys and
    take more rows. None is of one row unless n is 1: numpy multiplies a row by a matrix
    with BLAS's gemv, which sums in another order than gemm (a last block of one row
    joins the one before, so that every row's numbers are the whole's)."""
    n = len(row_of)
    most = max(1, BLOCK_CELLS // max(1, heads))  # rows × keys

    def cells(start: int, stop: int) -> int:
        rows = range(int(row_of[start]), int(row_of[stop - 1]) + 1)
        return (stop - start) * max(1, len(visible_keys(rows, n_q, n_k, options.causal, options.window)))

    starts, start = [], 0
    while start < n:
        size = max(1, most // max(1, n_k))
        while start + size < n and cells(start, min(n, start + 2 * size)) <= most:
            size *= 2
        starts.append(start)
        start += size
    if len(starts) > 1 and n - starts[-1] == 1:
        starts.pop()
    return [slice(a, b) for a, b in zip(starts, [*starts[1:], n], strict=True)]


class _Ticks:
    """Progress in query rows: each part's reference (when worked out whole) and then its blocks."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, max(1, total), 0

    def share(self, rows: int) -> Progress | None:
        """A progress(done, total) that moves ``rows`` of the whole over its own total."""
        if self.progress is None:
            self.done += rows
            return None
        start = self.done
        self.done += rows

        def tick(done: int, total: int) -> None:
            assert self.progress is not None
            self.progress(min(self.total, start + rows * done // max(1, total)), self.total)

        return tick

    def skip(self, rows: int) -> None:
        """``rows`` of the whole done at once (a reference that goes with the blocks)."""
        self.done += rows
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total)


class _Figures:
    """What the comparison keeps as blocks come in: per (…, head, row) maxima over the
    columns, where in the row they are, and the reference there."""

    def __init__(self, lead: tuple[int, ...], n_rows: int, d_v: int, keep: bool) -> None:
        shape = lead + (n_rows,)
        self.n_rows = n_rows
        self.error = np.zeros(shape)  # [..., H, rows] max |OUT − ref| over the columns
        self.baseline = np.zeros(shape)  # [..., H, rows] max |baseline − ref|
        self.column = np.zeros(shape, dtype=np.int64)  # [..., H, rows] the column of that error (first NaN first)
        self.at_column = np.zeros(shape)  # [..., H, rows] the reference there
        self.scales = np.zeros(shape)  # [..., H, rows] max |ref| over the columns
        self.kept = (np.zeros(shape + (d_v,)), np.zeros(shape + (d_v,))) if keep else None

    def add(self, where: tuple, at: slice, error: np.ndarray, base_error: np.ndarray, ref: np.ndarray) -> None:
        """A block's |OUT − ref|, |baseline − ref| and ref, [h, r, d_v] (or [r, d_v]), for rows ``at``."""
        cells = (*where, at)
        if error.shape[-1] == 0:
            return
        nan = np.isnan(error)
        column = np.where(nan.any(axis=-1), np.argmax(nan, axis=-1), np.argmax(error, axis=-1))  # [h, r]
        self.error[cells] = error.max(axis=-1)
        self.baseline[cells] = base_error.max(axis=-1)
        self.column[cells] = column
        self.at_column[cells] = np.take_along_axis(ref, column[..., None], axis=-1)[..., 0]
        self.scales[cells] = np.abs(ref).max(axis=-1)
        if self.kept is not None:
            self.kept[0][cells] = error
            self.kept[1][cells] = ref

    @property
    def scale(self) -> float:
        return float(self.scales.max()) if self.scales.size else 0.0

    @property
    def baseline_finite(self) -> bool:
        return bool(np.isfinite(self.baseline).all())

    def verdict(
        self, out: np.ndarray, dtype: np.dtype, factor: float, atol: float, n_q: int, sample: Sample | None
    ) -> Verdict:
        at = _first_worst(self.error)  # (..., head, row checked)
        row = at[-1] if sample is None or not self.error.size else int(sample.rows[at[-1]])
        worst = (*at[:-1], row, int(self.column[at]) if self.error.size else 0)
        got = float(np.asarray(out[worst])) if np.asarray(out).size else 0.0
        return Verdict(
            dtype.name,
            _largest(self.error),
            _largest(self.baseline),
            self.scale,
            worst,
            got,
            float(self.at_column[at]) if self.error.size else 0.0,
            bool(np.isfinite(self.error).all()),
            factor,
            atol,
            by_query=self.error,
            baseline_by_query=self.baseline,
            rows=None if sample is None else sample.rows,
            n_q=n_q,
            sample=sample,
            error=None if self.kept is None else self.kept[0],
            reference=None if self.kept is None else self.kept[1],
        )


def naive(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, dtype: np.dtype) -> np.ndarray:
    """Attention as a naive fused kernel in ``dtype`` computes it, whole: inputs and
    every intermediate rounded to ``dtype``; sums of products in float32 (float64
    for float64). -> [..., H_q, n_q, d_v] in float32 (float64). For small inputs."""
    baseline = fused(q, k, v, options, np.dtype(dtype))
    return baseline.rows(Rows.span(0, baseline.problem.n_q))


def ulp(x: float, dtype: np.dtype) -> float:
    """The unit in the last place of ``dtype`` at |x|: 2^(⌊log₂|x|⌋ − mantissa bits)."""
    if is_bfloat16(dtype):
        import ml_dtypes

        info = ml_dtypes.finfo(dtype)
    else:
        info = np.finfo(dtype)
    x = max(abs(x), float(info.tiny))
    return 2.0 ** (math.floor(math.log2(x)) - int(info.nmant))


def parts_of(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions, whole_groups: bool = False
) -> tuple[Layout, list[Part]]:
    """The parts a check goes by (for the gradient check); ``whole_groups``: with GQA,
    every K/V head of a batch entry in one part."""
    layout = validate(q, k, v, options)
    most = PART_BYTES if not whole_groups or layout.group == 1 else 1 << 62
    return layout, list(parts(q, k, v, options, layout, most))
