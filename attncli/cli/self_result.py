"""``attn self``'s result: its JSON (every head's weights, the projections, the
sizes of the spaces), its terminal view (a header, a heatmap per head, the
output) and the maps its pictures draw."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attncli.cli.describe import attention_data, settings_line
from attncli.cli.emit import Emitted, Result
from attncli.output.labels import value_columns
from attncli.text import plural

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.self_explained import Explained
    from attncli.cli.self_inputs import SelfInputs
    from attncli.core.multihead import MultiHeadSteps
    from attncli.core.options import Call
    from attncli.output.heatmap import ViewStyle

MAX_TABLE_COLUMNS = 12  # output columns shown on a terminal; data formats have them all


@dataclass(frozen=True)
class SelfShown:
    """How a self-attention run is shown: its seed and the weights drawn from it,
    the one head chosen (None: all) and the view's style."""

    seed: int
    random: list[str]  # the names of the weights drawn at random: W_Q, W_K, W_V
    head: int | None
    style: ViewStyle
    explained: Explained | None = None  # --explain: one token through one head


def self_result(inputs: SelfInputs, steps: MultiHeadSteps, shown: SelfShown, precision: int) -> Result:
    """JSON, terminal view and emittable matrices of one `attn self` run."""
    dims = _dims(inputs, steps, n_head=steps.weights.shape[0])
    out_labels = _output_columns(inputs)
    data = {
        "queries": inputs.queries,
        "keys": inputs.keys,
        "columns": out_labels or value_columns(steps.output.shape[1]),
        "weights": steps.weights,  # [heads, n_q, n_k], always 3-D
        "scores": steps.heads.scores,  # [heads, n_q, n_k] q_i·k_j before the scale: seed 001's e_ij
        "output": steps.output,
        "q": steps.q,
        "k": steps.k,
        "v": steps.v,
        **dims,
        **attention_data(inputs.options, _call(inputs, steps)),
        "seed": shown.seed,
        "random": shown.random,
    }
    if shown.explained is not None:
        data["explain"] = shown.explained.data()
    matrices = {
        "output": Emitted(steps.output, inputs.x.row_labels, out_labels),
        "weights": _weights_to_emit(inputs, steps.weights, shown.head),
        "scores": _weights_to_emit(inputs, steps.heads.scores, shown.head),
        "q": Emitted(steps.q, inputs.x.row_labels),
        "k": Emitted(steps.k, inputs.context.row_labels),
        "v": Emitted(steps.v, inputs.context.row_labels),
    }
    view = functools.partial(_view, inputs, steps, dims, shown, data["columns"], precision)
    if shown.explained is not None:
        from attncli.cli.self_explained import explained_view

        view = functools.partial(explained_view, shown.explained, precision, shown.style)
    return Result(data, view, matrices, functools.partial(_maps, inputs, steps, shown))


def random_line(shown: SelfShown) -> str:
    """What a header says when projections are random: that the pattern means nothing."""
    return (
        f"random {', '.join(shown.random)} (seed {shown.seed}): the pattern means nothing; "
        "`attn trace` shows a trained model"
    )


def _maps(inputs: SelfInputs, steps: MultiHeadSteps, shown: SelfShown) -> Any:
    """Every head's weights (or the one --head picks) for the head view and figures."""
    from attncli.output.maps import AttentionMaps

    n_head = steps.weights.shape[0]
    heads = list(range(n_head)) if shown.head is None else [shown.head]
    allowed = steps.heads.allowed
    if allowed is not None:
        allowed = allowed[heads] if allowed.ndim == 3 else allowed
    kind = "self-attention" if inputs.z is None else "cross-attention"
    return AttentionMaps(
        steps.weights[None, heads],
        inputs.queries,
        inputs.keys,
        [""],
        [f"head {h}" for h in heads],
        None if allowed is None else allowed[None],
        f"{kind}, {plural(n_head, 'head')}" + (f" — {random_line(shown)}" if shown.random else ""),
        shown.style.scale(steps.weights[heads]),
    )


def _dims(inputs: SelfInputs, steps: MultiHeadSteps, n_head: int) -> dict[str, int]:
    """The sizes of the three spaces (seed 004) and of the heads."""
    d_attn, d_v = steps.q.shape[1], steps.v.shape[1]
    dims = {"heads": n_head, "d_in": inputs.x.shape[1]}
    if inputs.z is not None:
        dims["d_z"] = inputs.z.shape[1]
    dims.update(d_attn=d_attn, d_head=d_attn // n_head, d_v=d_v, d_out=steps.output.shape[1])
    return dims


def _output_columns(inputs: SelfInputs) -> list[str] | None:
    last = inputs.weights.get("wo", inputs.weights.get("wv"))
    return None if last is None else last.col_labels


def _weights_to_emit(inputs: SelfInputs, weights: np.ndarray, head: int | None) -> Emitted:
    """One head as n_q×n_k, else every head as [heads, n_q, n_k] (which csv/tsv
    write as the heads' rows stacked, labelled head:query)."""
    keys = inputs.context.row_labels
    if head is not None:
        return Emitted(weights[head], inputs.x.row_labels, keys)
    return Emitted(weights, inputs.queries, keys)


def _view(
    inputs: SelfInputs,
    steps: MultiHeadSteps,
    dims: dict[str, int],
    shown: SelfShown,
    out_labels: list[str],
    precision: int,
) -> Any:
    """Header, one heatmap per head (or the one --head asks for), the output."""
    from rich.text import Text

    from attncli.cli.guards import rows_sum
    from attncli.output.render import heatmap, number_table, stack
    from attncli.output.summary import SHOWN_TABLES, first_lines

    n_head = dims["heads"]
    kind = "self-attention" if inputs.z is None else "cross-attention"
    z_part = "" if inputs.z is None else f" over Z {inputs.z.shape[0]}×{dims['d_z']}"
    sizes = " · ".join(
        f"{name} {dims[name]}"
        for name in ("d_in", "d_z", "d_attn", "d_v", "d_out")
        if name in dims and (name != "d_v" or "wo" in inputs.weights)
    )
    details = [
        sizes,
        f"{plural(n_head, 'head')} of d_head {dims['d_head']}",
        settings_line(inputs.options, _call(inputs, steps), steps.heads.allowed),
        *([] if shown.random else ["no random weights"]),
    ]
    allowed = steps.heads.allowed
    description = inputs.description
    header = Text.assemble(
        (kind + " ", "bold"),
        f"X {inputs.x.shape[0]}×{dims['d_in']}{z_part} → output {steps.output.shape[0]}×{dims['d_out']}\n",
        f"{description}\n" if description else "",
        " · ".join(details),
        *(("\n", (random_line(shown), "bold")) if shown.random else ()),
    )
    parts: list = [header]
    heads, more_heads = first_lines(n_head, SHOWN_TABLES, "heads (--head N shows one)")
    if shown.head is not None:
        heads, more_heads = range(shown.head, shown.head + 1), None
    sums = rows_sum(inputs.options, len(inputs.queries), len(inputs.keys))
    for h in heads:
        title = f"head {h} of {n_head}: weights = softmax of head {h}'s scaled scores, {sums}"
        parts.append(
            heatmap(
                steps.weights[h],
                inputs.queries,
                inputs.keys,
                precision=precision,
                title=title,
                allowed=None if allowed is None else allowed[h],
                style=shown.style,
            )
        )
    if more_heads is not None:
        parts.append(more_heads)
    if "wo" in inputs.weights:
        how = "concat(heads) · W_O" + (" + b_o" if "bo" in inputs.weights else "")
    else:
        how = "weights · V" + (", heads side by side" if n_head > 1 else "")
    cut = steps.output.shape[1] > MAX_TABLE_COLUMNS
    parts.append(
        number_table(
            steps.output[:, :MAX_TABLE_COLUMNS],
            inputs.queries,
            out_labels[:MAX_TABLE_COLUMNS],
            precision=precision,
            title=f"output = {how}",
        )
    )
    if cut:
        parts.append(
            Text(
                f"… and {steps.output.shape[1] - MAX_TABLE_COLUMNS} more columns "
                "(all of them with --format json, csv or npy)",
                style="dim",
            )
        )
    return stack(*parts)


def _call(inputs: SelfInputs, steps: MultiHeadSteps) -> Call:
    """What saying the settings needs: a head's width, the queries, keys and heads."""
    from attncli.core.options import Call

    n_head = steps.weights.shape[0]
    return Call(d_k=steps.q.shape[1] // n_head, n_q=len(inputs.queries), n_k=len(inputs.keys), heads=n_head)
