"""``attn grad``: the backward pass, dQ, dK, dV (and dsinks, dbias) for an output gradient dO."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Emitted, Result
from attncli.cli.options import (
    FROM_READ_OPTIONS,
    BatchOption,
    DoutOption,
    FilesArgument,
    HeadOption,
    Layout,
    LayoutOption,
    PrecisionOption,
    ReadFlags,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.views import View
from attncli.errors import UsageError

if TYPE_CHECKING:
    from attncli.cli.inputs import Inputs
    from attncli.core.grad import Grads

EXAMPLES = """\b
Examples:
  attn grad q.npy k.npy v.npy --dout dout.npy -f npz > grads.npz
  attn grad case.npz --causal -f safetensors > grads.safetensors   # a bundle with q, k, v and dout
  attn grad q.npy k.npy v.npy --dout dout.npy --sinks sinks.npy --softcap 30 -f npy --emit dk > dk.npy
  attn grad q.csv k.csv v.csv --dout dout.csv
"""

MAX_SLICES = 4  # (batch, head) pairs the terminal view shows of each gradient


AUTO = View("auto")
GradViewOption = Annotated[
    View,
    typer.Option(
        "--view",
        metavar="auto|compact|numbers",
        help="How gradients are drawn on a terminal. auto: a heatmap per gradient and head on a diverging "
        "scale (blue below 0, red above, symmetric around its largest |value|), the numbers in the cells "
        "while they fit, else one coloured cell per value; compact: one cell per value; numbers: number tables.",
    ),
]


@attention_options()
@read_options()
@output_options(
    emit=("dq", "dk", "dv", "dsinks", "dbias"),
    pictures=(),
    emit_help="The gradient csv/tsv/npy write (default dq); npz and safetensors write every gradient, one entry each.",
)
def grad(
    files: FilesArgument,
    dout: DoutOption = None,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    batch: BatchOption = None,
    head: HeadOption = None,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    view: GradViewOption = AUTO,
) -> Result:
    """The backward pass: dQ, dK, dV of attention for the output's gradient dO.

    Computed in float64 from the closed form (dP = dO Vᵀ; dS = P ∘ (dP − rowsum(dO ∘ O));
    dQ = dS K · scale; dK = dSᵀ Q · scale; dV = Pᵀ dO), through every attention option:
    with grouped-query heads dK and dV are summed over each group; with --sinks and
    --bias their gradients dsinks and dbias are given too. On a terminal: a heatmap per
    gradient and head (blue below 0, red above, symmetric around the largest |value|),
    or --view numbers for number tables; in a pipe, JSON; npz and safetensors hold one
    entry per gradient.
    """

    from attncli.cli.inputs import output_gradient, read_inputs
    from attncli.cli.io import progress_bar
    from attncli.core.grad import attention_grad

    if view.value == "top":
        raise UsageError(
            "attn grad has no top view: a gradient has no heaviest keys", hint="--view auto, compact or numbers"
        )
    inputs = read_inputs(files, attention, reading.settings(), layout, wanted=("dout",))
    d_out = output_gradient(inputs, dout, reading.settings())
    with progress_bar("gradients") as progress:
        grads = attention_grad(
            inputs.q.values, inputs.k.values, inputs.v.values, d_out, inputs.options, progress=progress
        )
    return grad_result(inputs, grads, precision, batch, head, view.value)


def grad_result(
    inputs: Inputs, grads: Grads, precision: int, batch: int | None, head: int | None, view: str = "auto"
) -> Result:
    """JSON, the terminal view and the emittable gradients of one backward pass.
    The view: a heatmap per gradient and head on the diverging scale (``view``
    auto or compact, as ``output.heatmap`` draws it), or number tables (numbers)."""

    from attncli.cli.describe import attention_data, call_of
    from attncli.cli.model_options import model_data, model_line
    from attncli.cli.run_result import slice_of, slices

    named = {name: inputs.to_file_layout(g) if name in ("dq", "dk", "dv") else g for name, g in grads.named().items()}
    labels = {
        "dq": (inputs.q.row_labels, inputs.q.col_labels),
        "dk": (inputs.k.row_labels, inputs.k.col_labels),
        "dv": (inputs.k.row_labels or inputs.v.row_labels, inputs.v.col_labels),
    }
    options = inputs.options
    slices(grads.dq.shape, batch, head)  # a usage error when out of range, whatever the format (as run's)
    heads = grads.dq.shape[-3] if grads.dq.ndim > 2 else 1
    data = {
        **named,
        "shapes": {name: list(g.shape) for name, g in named.items()},
        **attention_data(options, call_of(grads.dq.shape, inputs.k.shape)),
        **model_data(inputs.flags),
        "dtype": "float64",
        **({"layout": inputs.layout.value} if inputs.tensors else {}),
    }
    matrices = {}
    for name, values in named.items():
        rows, cols = labels.get(name, (None, None))
        others = {other: g for other, g in named.items() if other != name}
        matrices[name] = Emitted(values, rows, cols, name=name, also=others)

    def shown() -> Any:
        from rich.text import Text

        from attncli.core.arrays import shape_text
        from attncli.output.render import stack

        draw = GradientView(view, precision)
        parts: list[Any] = [
            Text.assemble(
                ("gradients ", "bold"),
                ", ".join(f"{name} {shape_text(g)}" for name, g in grads.named().items()),
                " (float64)",
                model_line(inputs.flags),
            )
        ]
        group = heads // grads.dk.shape[-3] if grads.dk.ndim > 2 else 1
        for name in ("dq", "dk", "dv"):
            g = grads.named()[name]
            rows, cols = labels[name]
            kv = name != "dq" and group > 1  # dK, dV of grouped-query attention: one per K/V head
            pairs = slices(g.shape, batch, None if head is None else head // group if kv else head)
            for b, h in pairs[:MAX_SLICES]:
                where = "" if g.ndim == 2 else f"batch {b} · {'K/V head' if kv else 'head'} {h}: "
                matrix = slice_of(g, b, h)
                parts.append(
                    draw(
                        matrix,
                        rows or [f"{name[1]}{i}" for i in range(matrix.shape[0])],
                        cols or [f"d{j}" for j in range(matrix.shape[1])],
                        f"{where}{name}",
                        ("dims", "queries" if name == "dq" else "keys"),
                    )
                )
            parts.append(more(pairs, name))
        if grads.dsinks is not None:
            sinks = grads.dsinks.reshape(-1, grads.dsinks.shape[-1])  # [batches, H]
            parts.append(
                draw(
                    sinks,
                    ["dsinks"] if len(sinks) == 1 else [f"batch {b}" for b in range(len(sinks))],
                    [f"head {h}" for h in range(sinks.shape[-1])],
                    "dsinks, one per head",
                    ("heads", "batches"),
                )
            )
        if grads.dbias is not None:
            bias = grads.dbias if grads.dbias.ndim >= 2 else grads.dbias.reshape(1, -1)
            pairs = bias_slices(bias.shape, batch, head)
            for b, h in pairs[:MAX_SLICES]:
                where = "" if bias.ndim == 2 else f"batch {b} · head {h}: "
                matrix = slice_of(bias, b, h)
                rows = inputs.queries if matrix.shape[0] == len(inputs.queries) else ["every query"]
                cols = inputs.keys if matrix.shape[1] == len(inputs.keys) else ["every key"]
                parts.append(
                    draw(
                        matrix,
                        rows,
                        cols,
                        f"{where}dbias (the bias's shape, {shape_text(grads.dbias)})",
                        ("keys", "queries"),
                    )
                )
            parts.append(more(pairs, "dbias"))
        return stack(*parts)

    return Result(data, shown, matrices)


class GradientView:
    """One gradient matrix [n, m] as the view asks: a signed heatmap (auto, compact) or a number table."""

    def __init__(self, view: str, precision: int) -> None:
        self.view, self.precision = view, precision

    def __call__(self, matrix: Any, rows: list[Any], cols: list[Any], title: str, axes: tuple[str, str]) -> Any:
        from rich.console import Group
        from rich.text import Text

        from attncli.output.heatmap import Heatmap, ViewStyle
        from attncli.output.render import number_table

        if self.view == "numbers":
            return number_table(matrix, rows, cols, precision=self.precision, title=title)
        return Group(
            Text(title, style="bold"),
            Heatmap(
                matrix, rows, cols, precision=self.precision, style=ViewStyle(view=self.view), signed=True, axes=axes
            ),
        )


def more(pairs: list[tuple[int, int]], name: str) -> Any:
    """The line saying how many heads of a gradient are not shown (None when all are)."""
    from rich.text import Text

    if len(pairs) <= MAX_SLICES:
        return None
    return Text(
        f"… and {len(pairs) - MAX_SLICES} more heads of {name}: choose with --batch "
        "and --head; data formats (-f json, npz) hold them all",
        style="dim",
    )


def bias_slices(shape: tuple[int, ...], batch: int | None, head: int | None) -> list[tuple[int, int]]:
    """The (batch, head) pairs of dbias shown: --batch and --head choose along the
    bias's own axes, but for an axis it was broadcast along (size 1: one for all)."""

    import math

    from attncli.cli.run_result import slices

    heads = shape[-3] if len(shape) > 2 else 1
    batches = math.prod(shape[:-3]) if len(shape) > 3 else 1
    return slices(shape, None if batches == 1 else batch, None if heads == 1 else head)


COMMAND = CommandSpec(grad, EXAMPLES)
