"""``attn check``: is a kernel's output right?

OUT is compared with attn's float64 reference for the same Q, K, V and
options, under FlashAttention's rule (``attncli.core.check``). Exit 0 when
within tolerance, 3 when not; 1 and 2 keep meaning bad data and bad usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.check_grads import check_gradients, grad_factors
from attncli.cli.check_result import check_result, failure
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.options import (
    FROM_READ_OPTIONS,
    DoutOption,
    Layout,
    LayoutOption,
    PrecisionOption,
    ReadFlags,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS
from attncli.errors import CheckFailed, ShapeError, UsageError

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs

EXAMPLES = """\b
Examples:
  attn check out.npy q.npy k.npy v.npy                        # a kernel's output for q, k, v
  attn check out.safetensors case.safetensors --rope neox --window 127,0 --softcap 50
  attn check out.npy q.npy k.npy v.npy --layout bshd --causal-align bottom-right
  attn check out.npy q.npy k.npy v.npy -f json | jq .max_abs_error
  attn check out.npy q.npy k.npy v.npy -f npy --emit error > err.npy     # |OUT - ref|
  attn check out.npy case.npz || echo "exit $?: 3 disagrees, 1 bad data, 2 bad usage"
  attn check --grad grads.npz q.npy k.npy v.npy --dout dout.npy --causal   # dq, dk, dv (dsinks, dbias)
  attn check --grad grads.npz case.npz --grad-factor dq=160 --grad-factor dk=25
  attn check --grad dq.npy dk.npy dv.npy q.npy k.npy v.npy --dout dout.npy
  attn check out.npy q.npy k.npy v.npy --causal --rows 1024              # 1,024 rows a head, for long inputs
  attn check out.npy q.npy k.npy v.npy --causal --rows 1024 --seed 7     # the same rows again
"""


@attention_options()
@read_options()
@output_options(
    emit=("error", "reference"),
    pictures=("svg", "html"),
    emit_help="The array csv/tsv/npy/npz/safetensors write: error (|OUT - ref|, the default) or the reference output.",
)
def check(
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="OUT [Q K V | BUNDLE]",
            show_default=False,
            help="OUT, the output a kernel computed (NPY, NPZ or safetensors; float16, bfloat16, float32 or "
            "float64; (batch, heads, seq, dim) or any rank, as Q), then three files Q K V or one bundle, "
            "as for 'attn run'.",
        ),
        READS,
    ],
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    factor: Annotated[
        float,
        typer.Option(
            "--factor",
            metavar="F",
            help="OUT may be F times as far from the reference as the naive baseline in OUT's dtype is (plus --atol).",
        ),
    ] = 2.0,
    atol: Annotated[
        float | None,
        typer.Option(
            "--atol",
            metavar="A",
            show_default=False,
            help="Absolute slack added to the tolerance. Default: 2 units in the last place of OUT's dtype at the "
            "largest |reference| value.",
        ),
    ] = None,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    grad: Annotated[
        bool,
        typer.Option(
            "--grad",
            help="Check gradients instead: OUT is an NPZ or safetensors bundle of dq, dk, dv (and dsinks, "
            "dbias), as 'attn grad -f npz' writes, or three files dQ dK dV, against attn's float64 "
            "backward pass for --dout.",
        ),
    ] = False,
    dout: DoutOption = None,
    grad_factor: Annotated[
        list[str] | None,
        typer.Option(
            "--grad-factor",
            metavar="NAME=F",
            show_default=False,
            help="With --grad: one gradient's factor, e.g. dq=160 (PyTorch's SDPA tests); default --factor for each.",
        ),
    ] = None,
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows",
            metavar="K",
            min=1,
            show_default=False,
            help="Check K query rows of every (batch, head) rather than all: the first and last row of every "
            "block of 256 queries, the rows where the causal or window band meets a block edge, and the rest "
            "at random (the seed is printed). For very long inputs.",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            metavar="S",
            min=0,
            max=2**32 - 1,
            show_default=False,
            help="With --rows: the seed of the random rows (a check's output names its seed), to check the same rows.",
        ),
    ] = None,
) -> Result:
    """Check a kernel's attention output against attn's float64 reference.

    OUT passes when max|OUT - ref| <= factor × max|baseline - ref| + atol
    (FlashAttention's rule): the baseline is naive attention in OUT's dtype,
    inputs and every step rounded to it. Prints the verdict, the largest
    absolute and relative errors and where, a table per head and a heatmap of
    the error over heads and queries. Exit 0 within tolerance, 3 not (1 bad
    data, 2 bad usage).
    """
    import math

    from attncli.cli.emit import MATRIX_FORMATS, choose_format
    from attncli.cli.inputs import read_inputs, to_layout
    from attncli.cli.io import open_input, progress_bar
    from attncli.core.check import check as compare
    from attncli.readers import read_matrix

    counted = f"got {len(files)} {'file' if len(files) == 1 else 'files'}"
    if grad and len(files) not in (2, 4, 6):
        raise UsageError(
            f"expected the gradients (one bundle, or dQ dK dV) and one bundle or three files Q K V, {counted}"
        )
    if not grad and len(files) not in (2, 4):
        raise UsageError(f"expected OUT and one bundle, or OUT and three files Q K V, {counted}")
    for name, value in (("--factor", factor), ("--atol", atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{name} must be a finite number ≥ 0, got {value}")
    if seed is not None and rows is None:
        raise UsageError("--seed chooses the random rows of --rows", hint="add --rows K")
    if grad and rows is not None:
        raise UsageError("--rows checks rows of the output, not gradients", hint="leave out --rows or --grad")
    keep = choose_format(out.fmt) in MATRIX_FORMATS  # |OUT - ref| (or the reference) written whole
    if grad:
        return check_gradients(
            files, attention, reading, layout, dout, factor, grad_factors(grad_factor or [], factor), atol, keep
        )
    if dout is not None or grad_factor:
        raise UsageError(
            f"{'--dout' if dout is not None else '--grad-factor'} is for checking gradients", hint="add --grad"
        )
    out_source = open_input(files[0])
    kernel_out = read_matrix(out_source, tensors=True, finite=False)  # NaN in OUT is a finding, not bad data
    inputs = read_inputs(files[1:], attention, reading.settings(), layout)
    options = inputs.options
    out_values = to_layout(kernel_out.values, layout)
    check_shape(out_values, inputs)
    with progress_bar("check") as progress:
        verdict = compare(
            out_values, inputs.q.values, inputs.k.values, inputs.v.values, options, factor, atol,
            rows=rows, seed=seed, keep=keep, progress=progress,
        )  # fmt: skip
    result = check_result(out_source.name, inputs, verdict, options, precision)
    if not verdict.passed:
        result.failure = CheckFailed(failure(verdict), source=out_source.name)
    return result


def check_shape(out: np.ndarray, inputs: Inputs) -> None:
    """OUT must have the shape of the output of Q, K and V: [..., H_q, n_q, d_v], as the files hold them."""
    from attncli.cli.inputs import layout_shape
    from attncli.core.arrays import shape_text
    from attncli.core.logits import check_shapes, leading_axes

    q, k, v = inputs.q.values, inputs.k.values, inputs.v.values
    check_shapes(q, k, v)
    lead, _ = leading_axes(q, k, v)
    expected = lead + (q.shape[-2], v.shape[-1])
    if tuple(out.shape) != expected:
        shown = (shape_text(layout_shape(shape, inputs.layout)) for shape in (tuple(out.shape), expected))
        raise ShapeError(
            "OUT is {} but the output of Q, K and V is {}".format(*shown),
            hint="the same inputs, options and layout as the kernel's",
        )


COMMAND = CommandSpec(check, EXAMPLES)
