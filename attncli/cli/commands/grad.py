"""``attn grad``: the backward pass, dQ, dK, dV (and dsinks, dbias) for an output gradient dO."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.emit import Emitted, Result, emit
from attncli.cli.options import (
    FROM_OPTIONS,
    FROM_READ_OPTIONS,
    AttentionFlags,
    BatchOption,
    Emit,
    FilesArgument,
    FormatOption,
    HeadOption,
    Layout,
    LayoutOption,
    PrecisionOption,
    ReadFlags,
    attention_options,
    read_options,
)
from attncli.cli.paths import check_outputs
from attncli.cli.qkv import load_problem, output_gradient, slice_of, slices, variant_data

if TYPE_CHECKING:
    from attncli.cli.qkv import Problem
    from attncli.core.grad import Grads

EXAMPLES = """\b
Examples:
  attn grad q.npy k.npy v.npy --dout dout.npy -f npz > grads.npz
  attn grad case.npz --causal -f safetensors > grads.safetensors   # a bundle with q, k, v and dout
  attn grad q.npy k.npy v.npy --dout dout.npy --sinks sinks.npy --softcap 30 -f npy --emit dk > dk.npy
  attn grad q.csv k.csv v.csv --dout dout.csv
"""

MAX_SLICES = 4  # (batch, head) pairs the terminal view shows of each gradient


DoutOption = Annotated[str | None, typer.Option(
    "--dout", metavar="FILE", show_default=False,
    help="The gradient of the output, dO: the shape of the output (n_q×d_v, or [..., heads, n_q, d_v]). "
         "A bundle may hold it as 'dout'.",
)]
GradEmitOption = Annotated[Emit, typer.Option(
    "--emit", metavar="dq|dk|dv|dsinks|dbias",
    help="The gradient csv/tsv/npy write; npz and safetensors write every gradient, one entry each.",
)]


@attention_options()
@read_options()
def grad(
    files: FilesArgument,
    dout: DoutOption = None,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    batch: BatchOption = None,
    head: HeadOption = None,
    fmt: FormatOption = None,
    emit_which: GradEmitOption = Emit.dq,
    precision: PrecisionOption = 3,
) -> None:
    """The backward pass: dQ, dK, dV of attention for the output's gradient dO.

    Computed in float64 from the closed form (dP = dO Vᵀ; dS = P ∘ (dP − rowsum(dO ∘ O));
    dQ = dS K · scale; dK = dSᵀ Q · scale; dV = Pᵀ dO), through every attention option:
    with grouped-query heads dK and dV are summed over each group; with --sinks and
    --bias their gradients dsinks and dbias are given too. On a terminal: a table per
    gradient and head; in a pipe, JSON; npz and safetensors hold one entry per gradient.
    """
    from attncli.core.grad import attention_grad

    check_outputs({}, [*files, *attention.files(), *([dout] if dout is not None else [])])
    problem = load_problem(files, attention, reading.settings(), layout, wanted=("dout",))
    grads = attention_grad(problem.q.values, problem.k.values, problem.v.values,
                           output_gradient(problem, dout, reading.settings()), problem.options)
    emit(grad_result(problem, grads, precision, batch, head), fmt, emit_which.value)


def grad_result(problem: Problem, grads: Grads, precision: int, batch: int | None, head: int | None) -> Result:
    """JSON, the table view and the emittable gradients of one backward pass."""
    named = {name: problem.to_file_layout(g) if name in ("dq", "dk", "dv") else g
             for name, g in grads.named().items()}
    labels = {"dq": (problem.q.row_labels, problem.q.col_labels), "dk": (problem.k.row_labels, problem.k.col_labels),
              "dv": (problem.k.row_labels or problem.v.row_labels, problem.v.col_labels)}
    options = problem.options
    heads = grads.dq.shape[-3] if grads.dq.ndim > 2 else 1
    data = {**named, "shapes": {name: list(g.shape) for name, g in named.items()},
            "scale": options.scale_for(problem.q.shape[-1]), "temperature": options.temperature,
            "causal": options.causal or False, "dtype": "float64",
            **({"layout": problem.layout.value} if problem.tensors else {}), **variant_data(options, heads)}
    matrices = {}
    for name, values in named.items():
        rows, cols = labels.get(name, (None, None))
        others = {other: g for other, g in named.items() if other != name}
        matrices[name] = Emitted(values, rows, cols, name=name, also=others)

    def view() -> Any:
        from rich.text import Text

        from attncli.core.arrays import shape_text
        from attncli.output.render import number_table, stack

        parts: list[Any] = [Text.assemble(("gradients ", "bold"), ", ".join(
            f"{name} {shape_text(g)}" for name, g in grads.named().items()), " (float64)")]
        for name in ("dq", "dk", "dv"):
            g = grads.named()[name]
            rows, cols = labels[name]
            shown = slices(g.shape, batch, head)
            for b, h in shown[:MAX_SLICES]:
                where = "" if g.ndim == 2 else f"batch {b} · head {h}: "
                matrix = slice_of(g, b, h)
                parts.append(number_table(matrix, rows or [f"{name[1]}{i}" for i in range(matrix.shape[0])],
                                          cols or [f"d{j}" for j in range(matrix.shape[1])],
                                          precision=precision, title=f"{where}{name}"))
            if len(shown) > MAX_SLICES:
                parts.append(Text(f"… and {len(shown) - MAX_SLICES} more heads of {name}: choose with --batch "
                                  "and --head; data formats (-f json, npz) hold them all", style="dim"))
        for name in ("dsinks", "dbias"):
            if name in named:
                parts.append(Text(f"{name} {named[name].round(precision).tolist()}"))
        return stack(*parts)

    return Result(data, view, matrices)
