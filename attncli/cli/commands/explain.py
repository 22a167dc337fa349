"""``attn explain``: attention step by step, with the user's own numbers.

The same inputs and options as ``attn run``; the view walks through the steps
of the seeds: inputs, scores QKᵀ, scaling, mask, softmax, weighted sum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.options import (
    FROM_READ_OPTIONS,
    DoutOption,
    FilesArgument,
    Layout,
    LayoutOption,
    PrecisionOption,
    QueryOption,
    ReadFlags,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OUTPUT_OR_WEIGHTS, OutputFlags, output_options
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options
from attncli.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.core.reference import Steps
    from attncli.output.heatmap import ViewStyle

EXAMPLES = """\b
Examples:
  attn explain samples/colors.yaml                        # seed 003, every step
  attn explain samples/q.csv samples/k.csv samples/v.csv  # seed 000's footnote
  attn explain q.csv k.csv v.csv --query 2 --causal       # query row 2, term by term
  attn explain samples/colors.yaml -f json | jq .scaled
  attn explain samples/colors.yaml --html colors.html
  attn explain q.npy k.npy v.npy --head 3 --rope neox --window 3,0 --sinks s.npy   # one head of a tensor
  attn explain q.csv k.csv v.csv --grad --dout dout.csv --query 1   # the backward pass too
"""


@attention_options()
@read_options()
@view_options()
@output_options(**OUTPUT_OR_WEIGHTS)
def explain(
    files: FilesArgument,
    query: QueryOption = None,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch",
            min=0,
            metavar="B",
            show_default=False,
            help="For tensors: the batch whose steps are shown (from 0). Default: the first.",
        ),
    ] = None,
    head: Annotated[
        int | None,
        typer.Option(
            "--head",
            min=0,
            metavar="H",
            show_default=False,
            help="For tensors: the query head whose steps are shown (from 0). Default: the first.",
        ),
    ] = None,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    look: ViewFlags = FROM_VIEW_OPTIONS,
    grad: Annotated[
        bool,
        typer.Option(
            "--grad",
            help="Also the backward pass for --dout: dP, the softmax's Jacobian, dS, and the query's dQ "
            "row term by term.",
        ),
    ] = False,
    dout: DoutOption = None,
) -> Result:
    """Show every step of softmax(QKᵀ/√d_k)V on matrices from files.

    In order: the inputs and their shapes, RoPE when asked, the scores QKᵀ,
    the scaled (and soft-capped) scores, the mask, bias, ALiBi and window,
    the softmax weights (with sinks) and the output as a weighted sum,
    written out term by term for one query. Takes the same inputs and options
    as 'attn run'; for tensors, one (batch, head) is explained. In a pipe:
    JSON with scores, scaled, logits, weights, output.
    """

    from attncli.cli.attend import every_step
    from attncli.cli.explained import pick_query
    from attncli.cli.inputs import read_inputs

    json_by_default(out)
    if dout is not None and not grad:
        raise UsageError("--dout is for the backward pass", hint="add --grad")
    inputs = read_inputs(files, attention, reading.settings(), layout, wanted=("dout",) if grad else ())
    steps = every_step(inputs)
    backward = backward_of(inputs, steps, dout, reading, batch, head) if grad else None
    if inputs.tensors or steps.rotated is not None:
        inputs, steps = one_head(inputs, steps, batch, head)
    return explain_result(inputs, steps, precision, pick_query(inputs.queries, query, "Q"), look.style(), backward)


def json_by_default(out: OutputFlags) -> None:
    """explain's output is a walk through the steps; into a pipe it is JSON (right for jq). When a
    person watches stderr and chose no format, say how to page the walk (``| less`` is a wall of JSON)."""
    from attncli.cli.emit import is_terminal, stderr_is_terminal
    from attncli.cli.notes import note

    if out.fmt is None and not is_terminal() and stderr_is_terminal():
        note(
            "stdout is not a terminal, so this is JSON; -f table writes the steps "
            "(FORCE_COLOR=1 attn explain … -f table | less -R keeps the colours)"
        )


def backward_of(
    inputs: Inputs, steps: Steps, dout: str | None, reading: ReadFlags, batch: int | None, head: int | None
) -> dict[str, np.ndarray]:
    """The backward pass of the (batch, head) explained: dO, dP, delta, dS, dZ, dQ, dK, dV as matrices."""

    from attncli.cli.inputs import output_gradient
    from attncli.cli.run_result import slice_of
    from attncli.core.grad import attention_grad

    d_out = output_gradient(inputs, dout, reading.settings())
    grads = attention_grad(
        inputs.q.values, inputs.k.values, inputs.v.values, d_out, inputs.options, block=0
    )  # whole, as the forward steps explained are
    assert grads.steps is not None
    b, h = batch or 0, head or 0
    lead = steps.weights.shape[:-2]
    parts = {"dp": grads.steps.dp, "delta": grads.steps.delta, "ds": grads.steps.ds, "dz": grads.steps.dz}
    one = {name: slice_of(values, b, h) for name, values in parts.items()}
    for name, values in (("dout", d_out), ("dq", grads.dq), ("dk", grads.dk), ("dv", grads.dv)):
        one[name] = _head_of(values, lead, b, h)
    return one


def explain_result(
    inputs: Inputs,
    steps: Steps,
    precision: int,
    i: int,
    style: ViewStyle | None = None,
    backward: dict[str, np.ndarray] | None = None,
) -> Result:
    """JSON with every step, and the step-by-step view, for query row ``i``."""

    import math

    from attncli.cli.explained import explain_view
    from attncli.cli.run_result import run_result

    base = run_result(inputs, steps, precision, style=style)  # the JSON fields and matrices run writes
    data: dict[str, Any] = {
        "queries": base.data["queries"],
        "keys": base.data["keys"],
        "columns": base.data["columns"],
        "query": inputs.queries[i],
        "query_index": i,
        "q": inputs.q.values,
        "k": inputs.k.values,
        "v": inputs.v.values,
        "scores": steps.scores,
        "scaled": steps.scaled,
        **({"capped": steps.capped} if steps.capped is not None else {}),
        "allowed": steps.allowed,
        # scaled scores plus the mask; a forbidden pair (-inf) is null, as JSON has no infinity
        "logits": [[x if math.isfinite(x) else None for x in row] for row in steps.logits.tolist()],
        "weights": steps.weights,
        "output": steps.output,
    }
    if inputs.head is not None:
        data["batch"], data["head"] = inputs.head
    from attncli.cli.describe import call_of, scaled_frequencies

    frequencies = scaled_frequencies(inputs.options, call_of(inputs.q.shape, inputs.k.shape))
    if frequencies is not None:
        data["rope_frequencies"] = frequencies
    data.update((key, value) for key, value in base.data.items() if key not in data)
    if backward is not None:
        data["backward"] = dict(backward)
    return Result(data, lambda: explain_view(inputs, steps, i, precision, style, backward), base.matrices, base.maps)


def one_head(inputs: Inputs, steps: Steps, batch: int | None, head: int | None) -> tuple[Inputs, Steps]:
    """The 2-D inputs and steps of one (batch, head) of tensors, to explain
    as any matrix; K and V from the head that query head serves (grouped-query)."""

    from dataclasses import replace

    from attncli.cli.run_result import slice_of, slices

    b, h = batch or 0, head or 0
    slices(steps.weights.shape, b, h)  # a usage error when out of range
    lead = steps.weights.shape[:-2]

    def cut(values: np.ndarray) -> np.ndarray:
        return _head_of(values, lead, b, h)

    q, k, v = (replace(m, values=cut(m.values)) for m in (inputs.q, inputs.k, inputs.v))
    rotated = None if steps.rotated is None else (cut(steps.rotated[0]), cut(steps.rotated[1]))
    cut_steps: dict[str, Any] = {
        name: slice_of(getattr(steps, name), b, h)
        for name in ("scores", "scaled", "capped", "logits", "allowed", "weights", "output")
        if getattr(steps, name) is not None
    }
    one = replace(steps, **cut_steps, rotated=rotated)
    return inputs.but(q=q, k=k, v=v, head=(b, h) if inputs.tensors else None), one


def _head_of(values: np.ndarray, lead: tuple[int, ...], b: int, h: int) -> np.ndarray:
    """[..., H_x, n, d] -> [n, d]: batch b (leading axes flattened) for query head h,
    where H_x is H (one per query head), fewer (K/V heads of grouped-query) or 1."""
    import numpy as np

    if values.ndim == 2:
        return values
    heads = lead[-1] if lead else 1
    shape: tuple[int, ...] = (1,) * (len(lead) + 2 - values.ndim) + tuple(values.shape)
    values = values.reshape(shape)  # as many axes as the weights
    h_x = shape[-3]
    values = np.broadcast_to(values, (*lead[:-1], h_x, *values.shape[-2:]))
    return np.asarray(values.reshape(-1, h_x, *values.shape[-2:])[b, h * h_x // heads], dtype=values.dtype)


COMMAND = CommandSpec(explain, EXAMPLES)
