"""``attn explain``: attention step by step, with the user's own numbers.

The same inputs and options as ``attn run``; the view walks through the steps
of the seeds: inputs, scores QKᵀ, scaling, mask, softmax, weighted sum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.options import (
    FROM_OPTIONS,
    FROM_READ_OPTIONS,
    AttentionFlags,
    FilesArgument,
    Layout,
    LayoutOption,
    PrecisionOption,
    ReadFlags,
    attention_options,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OUTPUT_OR_WEIGHTS, OutputFlags, output_options
from attncli.cli.paths import READS
from attncli.cli.qkv import Problem, compute, describe, load_problem, readings, run_result, shown_labels
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options
from attncli.errors import UsageError
from attncli.text import clip, parse_index, plural

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions

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

TERMS = 8  # terms written out in a sum before the rest are summarised


@attention_options()
@read_options()
@view_options()
@output_options(**OUTPUT_OR_WEIGHTS)
def explain(
    files: FilesArgument,
    query: Annotated[str | None, typer.Option(
        "--query", "-q", metavar="N|LABEL", show_default=False,
        help="The query whose dot product and weighted sum are written out term by term: "
             "its row number (from 0) or its label. Default: the first.",
    )] = None,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    batch: Annotated[int | None, typer.Option(
        "--batch", min=0, metavar="B", show_default=False,
        help="For tensors: the batch whose steps are shown (from 0). Default: the first.")] = None,
    head: Annotated[int | None, typer.Option(
        "--head", min=0, metavar="H", show_default=False,
        help="For tensors: the query head whose steps are shown (from 0). Default: the first.")] = None,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    look: ViewFlags = FROM_VIEW_OPTIONS,
    grad: Annotated[bool, typer.Option(
        "--grad", help="Also the backward pass for --dout: dP, the softmax's Jacobian, dS, and the query's dQ "
                       "row term by term.")] = False,
    dout: Annotated[str | None, typer.Option(
        "--dout", metavar="FILE", show_default=False,
        help="With --grad: the gradient of the output, dO (or a bundle entry dout).",
    ), READS] = None,
) -> Result:
    """Show every step of softmax(QKᵀ/√d_k)V on matrices from files.

    In order: the inputs and their shapes, RoPE when asked, the scores QKᵀ,
    the scaled (and soft-capped) scores, the mask, bias, ALiBi and window,
    the softmax weights (with sinks) and the output as a weighted sum,
    written out term by term for one query. Takes the same inputs and options
    as 'attn run'; for tensors, one (batch, head) is explained. In a pipe:
    JSON with scores, scaled, logits, weights, output.
    """
    if dout is not None and not grad:
        raise UsageError("--dout is for the backward pass", hint="add --grad")
    problem = load_problem(files, attention, reading.settings(), layout, wanted=("dout",) if grad else ())
    options = problem.options
    steps = compute(problem, options)
    backward = backward_of(problem, steps, dout, reading, batch, head) if grad else None
    if problem.tensors or steps.rotated is not None:
        problem, steps = one_head(problem, steps, batch, head)
    return explain_result(problem, steps, precision, options, pick_query(problem, query), look.style(), backward)


def pick_query(problem: Problem, query: str | None) -> int:
    """The row --query names: a label first, else a row number from 0."""
    labels = problem.queries
    if query is None:
        return 0
    if query in labels:
        return labels.index(query)
    row = parse_index(query)
    if row is not None and 0 <= row < len(labels) and query.strip()[:1] != "-":
        return row
    rows = "row 0" if len(labels) == 1 else f"rows 0 to {len(labels) - 1}"
    raise UsageError(f"--query {clip(query)}: no such query", hint=f"Q has {rows}; give a number or a label")


def backward_of(problem: Problem, steps, dout: str | None, reading: ReadFlags, batch: int | None,
                head: int | None) -> dict:
    """The backward pass of the (batch, head) explained: dO, dP, delta, dS, dZ, dQ, dK, dV as matrices."""
    from attncli.cli.qkv import output_gradient, slice_of
    from attncli.core.grad import attention_grad

    d_out = output_gradient(problem, dout, reading.settings())
    grads = attention_grad(problem.q.values, problem.k.values, problem.v.values, d_out, problem.options,
                           block=0)  # whole, as the forward steps explained are
    assert grads.steps is not None
    b, h = batch or 0, head or 0
    lead = steps.weights.shape[:-2]
    parts = {"dp": grads.steps.dp, "delta": grads.steps.delta, "ds": grads.steps.ds, "dz": grads.steps.dz}
    one = {name: slice_of(values, b, h) for name, values in parts.items()}
    for name, values in (("dout", d_out), ("dq", grads.dq), ("dk", grads.dk), ("dv", grads.dv)):
        one[name] = _head_of(values, lead, b, h)
    return one


def explain_result(problem: Problem, steps, precision: int, options: AttentionOptions, i: int,
                   style=None, backward: dict | None = None) -> Result:
    """JSON with every step, and the step-by-step view, for query row ``i``."""
    import math

    base = run_result(problem, steps, precision, options, style=style)  # the JSON fields and matrices run writes
    scaled = steps.scores * (steps.scale / options.temperature)  # as the reference scales them
    data = {
        "queries": base.data["queries"], "keys": base.data["keys"], "columns": base.data["columns"],
        "query": problem.queries[i], "query_index": i,
        "q": problem.q.values, "k": problem.k.values, "v": problem.v.values,
        "scores": steps.scores, "scale": steps.scale, "temperature": options.temperature,
        "scaled": scaled,
        "allowed": steps.allowed,
        # scaled scores plus the mask; a forbidden pair (-inf) is null, as JSON has no infinity
        "logits": [[x if math.isfinite(x) else None for x in row] for row in steps.logits.tolist()],
        "weights": steps.weights, "output": steps.output,
    }
    if "slice" in problem.meta:
        data["batch"], data["head"] = problem.meta["slice"]
    data.update((key, value) for key, value in base.data.items() if key not in data)
    if backward is not None:
        data["backward"] = {name: values for name, values in backward.items()}
    return Result(data, explain_view(problem, steps, precision, options, i, scaled, style, backward),
                  base.matrices, base.maps)


def explain_view(problem: Problem, steps, precision: int, options: AttentionOptions, i: int, scaled, style=None,
                 backward: dict | None = None):
    """The steps one under another: a heading, a sentence or two, the numbers."""
    import itertools

    from rich.text import Text

    from attncli.cli.guards import rows_sum
    from attncli.output.render import heatmap, number_table, stack

    q, k, v = problem.q.values, problem.k.values, problem.v.values
    (n_q, d_k), (n_k, d_v) = q.shape, v.shape
    rows, key_rows, key_cols = shown_labels(problem)
    label = problem.queries[i]
    description = problem.meta.get("description")
    cosine = options.similarity == "cosine"

    def table(values, row_labels, col_labels, title):
        return number_table(values, row_labels, col_labels, precision=precision, title=title)

    numbers = itertools.count(1)

    def heading(title: str, *sentences) -> Text:
        """'3. Scaled scores' and the sentences under it, numbered in the order shown."""
        return Text.assemble((f"{next(numbers)}. {title}", "bold underline"),
                             *("\n" + s for s in sentences if s))

    sections = [
        Text.assemble(("attention, step by step: ", "bold"), "softmax(QKᵀ/√d_k)V",
                      ("\n" + str(description)) if description else "", "\n", describe(steps, d_k, options),
                      *(part for line in variant_lines(problem, options) for part in ("\n", line))),
        heading("The inputs",
                "Each row is a vector. Every query is compared with every key, and each key has a value."),
        table(q, rows, problem.q.col_labels or _columns(d_k),
              f"Q: {plural(n_q, 'query', 'queries')}, {n_q}×{d_k}"),
        table(k, key_rows, problem.k.col_labels or _columns(d_k),
              f"K: {plural(n_k, 'key')}, {n_k}×{d_k}"),
        table(v, key_rows, problem.columns, f"V: one value per key, {n_k}×{d_v}"),
        *rope_section(problem, steps, options, rows, key_rows, precision, heading),
        heading("Scores: cos(q, k)" if cosine else "Scores: QKᵀ",
                *score_sentences(problem, options, i, precision, steps.rotated)),
        table(steps.scores, rows, key_cols, "scores = cos(q, k) of each query and key, queries down, keys across"
              if cosine else "scores = Q · Kᵀ, queries down, keys across"),
        heading("Scaled scores", *scale_sentences(steps, d_k, options, precision)),
        table(scaled, rows, key_cols, "scaled scores"),
        *softcap_section(scaled, options, rows, key_cols, precision, heading),
        *mask_section(problem, steps, scaled, rows, key_cols, precision, heading, options),
        heading("Weights: softmax of each row", *softmax_sentences(options)),
        heatmap(steps.weights, rows, key_cols, precision=precision, allowed=steps.allowed,
                title=f"weights, {rows_sum(options, n_q, n_k)}", style=style),
        heading("Output: weights · V",
                "Each query's output is the values added up, each times the query's weight for its key:"),
        Text(weighted_sum(label, steps.weights[i], v, steps.output[i], precision,
                          None if steps.allowed is None else steps.allowed[i])),
        table(steps.output, rows, problem.columns, "output = weights · V"),
        readings(problem, steps, precision, rows=[i]),
    ]
    if backward is not None:
        sections += backward_sections(problem, steps, backward, options, i, precision, heading, table)
    return stack(*sections)


def backward_sections(problem: Problem, steps, b: dict, options: AttentionOptions, i: int, precision: int,
                      heading, table) -> list:
    """The backward pass with the user's numbers: dP, the softmax's Jacobian step, dS, and dQ row i term by term."""
    from rich.text import Text

    from attncli.output.render import fmt

    rows, key_rows, key_cols = shown_labels(problem)
    d_k = problem.q.values.shape[-1]
    factor_ = steps.scale / options.temperature
    k_met = steps.rotated[1] if steps.rotated is not None else problem.k.values  # K as it met Q
    shown = [j for j in range(len(key_rows)) if b["dz"][i, j] != 0][:TERMS]
    terms = [f"{factor(b['dz'][i, j], precision)} × {_vector(k_met[j], precision)}" for j in shown]
    row = factor_ * (b["dz"][i] @ k_met)
    softcap = options.softcap is not None
    turned = [f"RoPE's rotation is then turned back (by minus each position's angle): dQ row = "
              f"{_vector(b['dq'][i], precision)}."] if steps.rotated is not None else []
    cosine = ["With cosine similarity Q and K are unit rows here; the gradient is then taken back through "
              "their normalisation."] if options.similarity == "cosine" else []
    return [
        heading("Backward: dP = dO · Vᵀ",
                "Given dO, the gradient of something with respect to each output, every weight's gradient "
                "is how its value lines up with dO: dP[i, j] = dO[i] · v[j]."),
        table(b["dout"], rows, problem.columns, "dO, the output's gradient"),
        table(b["dp"], rows, key_cols, "dP = dO · Vᵀ"),
        heading("The softmax's Jacobian: rowsum(dO ∘ O)",
                "Softmax ties each row's weights together (they sum to 1), so raising one lowers the others: "
                "the gradient of a logit is P[i, j] (dP[i, j] − δ[i]), with δ[i] = Σ_j P[i, j] dP[i, j] "
                "= dO[i] · O[i]."),
        table(b["delta"], rows, ["δ"], "δ = rowsum(dO ∘ O)"),
        heading("dS = P ∘ (dP − δ)",
                "A pair the mask forbids has P = 0, so no gradient; a query that sees no key gets none."
                + (" The sinks take no gradient here; theirs is Σ_i −p_sink[i] · δ[i]." if options.sinks is not None
                   else "")),
        table(b["ds"], rows, key_cols, "dS, the logits' gradient"),
        *([heading("Through the soft-cap", f"cap · tanh(x / cap) has slope 1 − tanh²(x / cap): "
                   f"dZ = dS ∘ (1 − tanh²(scaled / {fmt(float(options.softcap), precision)})).")  # type: ignore[arg-type]
           , table(b["dz"], rows, key_cols, "dZ, the scaled scores' gradient")] if softcap else []),
        heading(f"dQ for {problem.queries[i]}: dZ · K · scale",
                f"Each query's gradient is the keys, each times its {'dZ' if softcap else 'dS'}, times the "
                f"scale {fmt(factor_, precision)}:", *cosine),
        Text(f"{problem.queries[i]}: {fmt(factor_, precision)} × ({' + '.join(terms) or '0'}"
             f"{' + …' if len(shown) < sum(1 for j in range(len(key_rows)) if b['dz'][i, j] != 0) else ''}) = "
             f"{_vector(row, precision)}" + ("".join("\n" + line for line in turned))),
        table(b["dq"], rows, problem.q.col_labels or _columns(d_k), "dQ = dZ · K · scale"),
        table(b["dk"], key_rows, problem.k.col_labels or _columns(d_k),
              "dK = dZᵀ · Q · scale (summed over the query heads of a K/V head's group)"),
        table(b["dv"], key_rows, problem.columns, "dV = Pᵀ · dO (summed over the group's query heads)"),
    ]


def factor(x: float, precision: int) -> str:
    """A number in a product, as the tables show it, in brackets when negative: 2.000 × (-1.000)."""
    from attncli.output.render import fmt

    text = fmt(x, precision)
    return f"({text})" if text.startswith("-") else text


def score_sentences(problem: Problem, options: AttentionOptions, i: int, precision: int,
                    rotated=None) -> list[str]:
    """What a score is, and the first one written out for query ``i`` (of the
    rotated Q and K with RoPE), in the tables' number format."""
    import math

    from attncli.output.render import fmt

    q, k = (problem.q.values[i], problem.k.values[0]) if rotated is None else (rotated[0][i], rotated[1][0])
    products = [f"{factor(a, precision)} × {factor(b, precision)}" for a, b in zip(q.tolist(), k.tolist(), strict=True)]
    dot = f"{problem.queries[i]} · {problem.keys[0]} = {_sum(products)} = {fmt(float(q @ k), precision)}"
    if options.similarity == "cosine":
        lengths = math.sqrt(float(q @ q)) * math.sqrt(float(k @ k))
        cosine = float(q @ k) / lengths if lengths else 0.0
        return ["A score is the cosine similarity of a query and a key: their dot product divided by both "
                "lengths, from −1 (opposite directions) to 1 (the same direction).",
                dot,
                f"cos({problem.queries[i]}, {problem.keys[0]}) = {fmt(float(q @ k), precision)} / "
                f"({fmt(math.sqrt(float(q @ q)), precision)} × {fmt(math.sqrt(float(k @ k)), precision)}) "
                f"= {fmt(cosine, precision)}"]
    return [
        "A score is the dot product of a query and a key: multiply them number by number and add up. "
        "The more alike they are, the bigger the score.",
        dot,
    ]


def scale_sentences(steps, d_k: int, options: AttentionOptions, precision: int) -> list[str | None]:
    """Which scale, and why."""
    from attncli.output.render import fmt

    if options.scale is not None:
        first = f"The scores are multiplied by {steps.scale:g}, as --scale asks."
    elif options.similarity == "cosine":
        first = "Cosine similarities are already between −1 and 1, so they are not scaled (scale 1)."
    else:
        first = (f"The scores are multiplied by 1/√d_k = 1/√{d_k} = {fmt(steps.scale, precision)}: dot products of "
                 "longer vectors spread wider, and scaling keeps softmax from piling all the weight "
                 "on one key.")
    temperature = options.temperature
    second = None if temperature == 1 else (
        f"Then they are divided by the temperature {temperature:g}, which "
        f"{'flattens' if temperature > 1 else 'sharpens'} the weights.")
    return [first, second]


def mask_section(problem: Problem, steps, scaled, rows, key_cols, precision: int, heading,
                 options: AttentionOptions | None = None) -> list:
    """Step 4 when there is a mask, causal, a window, ALiBi or a bias: which pairs
    are forbidden, and the scores they change."""
    import numpy as np

    from attncli.output.render import number_table

    options = options or problem.options
    if options.softcap is not None:
        scaled = options.softcap * np.tanh(scaled / options.softcap)
    biased = options.bias is not None
    if steps.allowed is None and not biased and np.array_equal(steps.logits, scaled):
        return []
    parts = []
    alibi = options is not None and options.uses_alibi
    if steps.allowed is not None:
        forbidden = int((~steps.allowed).sum())
        why = ""
        if options.window is not None:
            from attncli.core.positions import band

            left, right = options.window
            n_q, n_k = steps.allowed.shape[-2:]
            lo, hi = band(n_q, n_k, None, options.window)  # a side past every key is open
            why += f" The window ({left},{right}) lets query i see keys {_end(lo, '0')} to {_end(hi, 'the last')}."
        if not problem.masked and options.causal is not None:
            why += " Causal: each query sees only the keys up to its own position."
        parts.append(f"The mask forbids {forbidden} of {steps.allowed.size} query–key pairs (–).{why} "
                     "A forbidden pair's score becomes −∞, so softmax gives it weight 0.")
    if alibi:
        parts.append("ALiBi adds −m·|i + n_k − n_q − j| to each score: the farther the key from the query, "
                     "the lower its score (m is this head's slope).")
    if biased:
        parts.append("The bias adds its numbers to the scaled scores; −∞ there forbids a pair too.")
    shown = [name for name, used in (("mask", steps.allowed is not None), ("bias", biased), ("ALiBi", alibi)) if used]
    title = " and ".join(shown) or "mask"
    title = title[0].upper() + title[1:]
    return [heading(title, *parts),
            number_table(steps.logits, rows, key_cols, precision=precision,
                         title=f"scaled scores with the {' and '.join(shown) or 'mask'} (−inf = forbidden)")]


def _end(bound: int | None, open_end: str) -> str:
    """'i − 3', 'i', 'i + 2', or ``open_end`` for an open side: one end of a window's keys, j − i bounded."""
    if bound is None:
        return open_end
    return "i" if bound == 0 else f"i {'+' if bound > 0 else '−'} {abs(bound)}"


def variant_lines(problem: Problem, options: AttentionOptions) -> list[str]:
    """The order the variants act in, and which (batch, head) of a tensor is shown."""
    from attncli.cli.qkv import variant_parts

    lines = []
    if variant_parts(options):
        lines.append("logits = softcap(scale · q·k / temperature) + bias + ALiBi (q, k rotated by RoPE first); "
                     "causal, window and mask set −∞; weights = e^logit / (Σ e^logit + e^sink)")
    where = problem.meta.get("slice")
    if where:
        lines.append(f"batch {where[0]} · head {where[1]} of the tensors (--batch, --head choose another)")
    return lines


def rope_section(problem: Problem, steps, options: AttentionOptions, rows, key_rows, precision: int,
                 heading) -> list:
    """With RoPE: Q and K rotated by their positions, the step before the scores."""
    if steps.rotated is None or options.rope is None:
        return []
    from attncli.output.render import number_table

    rope = options.rope
    n_q, n_k, d_k = steps.scores.shape[-2], steps.scores.shape[-1], steps.rotated[0].shape[-1]
    dim = rope.dim or d_k
    start = n_k - n_q if rope.offset is None else rope.offset
    pairs = (f"feature i with feature i + {dim // 2} (rotate_half)" if rope.style == "neox"
             else "features 2i and 2i + 1 (interleaved)")
    rest = f" Features {dim} to {d_k - 1} are left as they are." if dim < d_k else ""
    columns = [f"d{j}" for j in range(d_k)]
    return [
        heading(f"RoPE ({rope.style}): Q and K rotated by position",
                f"Each pair of features turns by the angle position · {rope.theta:g}^(−2i/{dim}); {rope.style} pairs "
                f"{pairs}.{rest} Keys sit at positions 0 to {n_k - 1}, queries at {start} to {start + n_q - 1}, "
                "so a score depends on how far apart the two are."),
        number_table(steps.rotated[0], rows, columns, precision=precision, title="RoPE(Q)"),
        number_table(steps.rotated[1], key_rows, columns, precision=precision, title="RoPE(K)"),
    ]


def softcap_section(scaled, options: AttentionOptions, rows, key_cols, precision: int, heading) -> list:
    """With a soft-cap: the scaled scores squashed into ±C."""
    if options.softcap is None:
        return []
    import numpy as np

    from attncli.output.render import number_table

    cap = options.softcap
    return [heading("Soft-cap", f"Each scaled score x becomes {cap:g} · tanh(x / {cap:g}): about x when small, never "
                                f"beyond ±{cap:g} (Gemma 2)."),
            number_table(cap * np.tanh(scaled / cap), rows, key_cols, precision=precision, title="soft-capped scores")]


def softmax_sentences(options: AttentionOptions) -> list[str]:
    """How weights come from the logits (with sinks: one more term in the denominator)."""
    if options.sinks is None:
        return ["Softmax turns each row of scaled scores into weights between 0 and 1 that sum to 1: "
                "e^x / Σ e^x, so the biggest score gets the most weight. Brighter = more attention."]
    return ["Softmax turns each row into weights e^x / (Σ e^x + e^s), where s is the head's sink: a logit with "
            "no key and no value that takes its share of the denominator (gpt-oss). So each row sums to less "
            "than 1, and a query that finds no good key can give little weight to all of them."]


def weighted_sum(label: str, weights, v, output, precision: int, allowed=None) -> str:
    """'#8517dc: 0.150 × [1, 0] + 0.128 × [1, 0] + … = [0.488, 0.512]'.

    Forbidden keys are left out; past TERMS keys only the heaviest are written,
    in key order, and the rest are counted."""
    from attncli.output.render import fmt

    keys = [j for j in range(len(weights)) if allowed is None or allowed[j]]
    shown = sorted(sorted(keys, key=lambda j: -weights[j])[:TERMS])
    terms = [f"{fmt(weights[j], precision)} × {_vector(v[j], precision)}" for j in shown]
    rest = [j for j in keys if j not in shown]
    tail = f" + … ({len(rest)} more keys, weight {fmt(sum(weights[j] for j in rest), precision)})" if rest else ""
    return f"{label}: {' + '.join(terms) or '0'}{tail} = {_vector(output, precision)}"


def _vector(row, precision: int, limit: int = 4) -> str:
    """'[1.000, 0.000]', or '[0.100, 0.200, 0.300, 0.400, … 46 more]' for a long row."""
    from attncli.output.render import fmt

    values = [fmt(x, precision) for x in row.tolist()[:limit]]
    more = f", … {len(row) - limit} more" if len(row) > limit else ""
    return f"[{', '.join(values)}{more}]"


def _sum(terms: list[str]) -> str:
    """'a + b + c', or the first TERMS terms and how many more."""
    more = len(terms) - TERMS
    return " + ".join(terms[:TERMS]) + (f" + … ({more} more)" if more > 0 else "")


def _columns(d: int) -> list[str]:
    return [f"d{j}" for j in range(d)]


def one_head(problem: Problem, steps, batch: int | None, head: int | None):
    """The 2-D problem and steps of one (batch, head) of tensors, to explain
    as any matrix; K and V from the head that query head serves (grouped-query)."""
    from attncli.cli.qkv import slice_of, slices
    from attncli.core.reference import Steps
    from attncli.readers import Matrix

    b, h = batch or 0, head or 0
    slices(steps.weights.shape, b, h)  # a usage error when out of range
    lead = steps.weights.shape[:-2]

    def cut(values):
        return _head_of(values, lead, b, h)

    q, k, v = (Matrix(cut(m.values), m.row_labels, m.col_labels) for m in (problem.q, problem.k, problem.v))
    rotated = None if steps.rotated is None else (cut(steps.rotated[0]), cut(steps.rotated[1]))
    one = Steps(slice_of(steps.scores, b, h), steps.scale, slice_of(steps.logits, b, h),
                None if steps.allowed is None else slice_of(steps.allowed, b, h), slice_of(steps.weights, b, h),
                slice_of(steps.output, b, h), rotated)
    meta = {**problem.meta, **({"slice": (b, h)} if problem.tensors else {})}
    return Problem(q, k, v, problem.options, meta, problem.masked, flags=problem.flags, arrays=problem.arrays,
                   layout=problem.layout), one


def _head_of(values, lead: tuple[int, ...], b: int, h: int):
    """[..., H_x, n, d] -> [n, d]: batch b (leading axes flattened) for query head h,
    where H_x is H (one per query head), fewer (K/V heads of grouped-query) or 1."""
    import numpy as np

    if values.ndim == 2:
        return values
    heads = lead[-1] if lead else 1
    values = values.reshape((1,) * (len(lead) + 2 - values.ndim) + values.shape)  # as many axes as the weights
    h_x = values.shape[-3]
    values = np.broadcast_to(values, lead[:-1] + (h_x,) + values.shape[-2:])
    return np.asarray(values.reshape(-1, h_x, *values.shape[-2:])[b, h * h_x // heads], dtype=values.dtype)


COMMAND = CommandSpec(explain, EXAMPLES)
