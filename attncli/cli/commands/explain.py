"""``attn explain``: attention step by step, with the user's own numbers.

The same inputs and options as ``attn run``; the view walks through the steps
of the seeds: inputs, scores QKᵀ, scaling, mask, softmax, weighted sum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.emit import Result, emit
from attncli.cli.options import (
    FROM_OPTIONS,
    FROM_READ_OPTIONS,
    AttentionFlags,
    Emit,
    EmitOption,
    FilesArgument,
    FormatOption,
    HtmlOption,
    PrecisionOption,
    ReadFlags,
    SvgOption,
    attention_options,
    read_options,
)
from attncli.cli.qkv import Problem, compute, describe, load_problem, readings, run_result, shown_labels
from attncli.errors import UsageError
from attncli.text import plural

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions

EXAMPLES = """\b
Examples:
  attn explain samples/colors.yaml                        # seed 003, every step
  attn explain samples/q.csv samples/k.csv samples/v.csv  # seed 000's footnote
  attn explain q.csv k.csv v.csv --query 2 --causal       # query row 2, term by term
  attn explain samples/colors.yaml -f json | jq .scaled
  attn explain samples/colors.yaml --html colors.html
"""

TERMS = 8  # terms written out in a sum before the rest are summarised


@attention_options()
@read_options()
def explain(
    files: FilesArgument,
    query: Annotated[str | None, typer.Option(
        "--query", "-q", metavar="N|LABEL", show_default=False,
        help="The query whose dot product and weighted sum are written out term by term: "
             "its row number (from 0) or its label. Default: the first.",
    )] = None,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    fmt: FormatOption = None,
    emit_which: EmitOption = Emit.output,
    precision: PrecisionOption = 3,
    svg: SvgOption = None, html: HtmlOption = None,
) -> None:
    """Show every step of softmax(QKᵀ/√d_k)V on matrices from files.

    In order: the inputs and their shapes, the scores QKᵀ, the scaled scores,
    the mask, the softmax weights and the output as a weighted sum, written
    out term by term for one query. Takes the same inputs and options as
    'attn run'. In a pipe: JSON with scores, scaled, logits, weights, output.
    """
    problem = load_problem(files, attention, reading.settings())
    options = problem.options
    steps = compute(problem, options)
    result = explain_result(problem, steps, precision, options, pick_query(problem, query))
    emit(result, fmt, emit_which.value, svg=svg, html=html, title="attn explain")


def pick_query(problem: Problem, query: str | None) -> int:
    """The row --query names: a label first, else a row number from 0."""
    labels = problem.queries
    if query is None:
        return 0
    if query in labels:
        return labels.index(query)
    if query.strip().isdigit() and int(query) < len(labels):
        return int(query)
    rows = "row 0" if len(labels) == 1 else f"rows 0 to {len(labels) - 1}"
    raise UsageError(f"--query {query}: no such query", hint=f"Q has {rows}; give a number or a label")


def explain_result(problem: Problem, steps, precision: int, options: AttentionOptions, i: int) -> Result:
    """JSON with every step, and the step-by-step view, for query row ``i``."""
    import math

    base = run_result(problem, steps, precision, options)  # the JSON fields and matrices run writes
    scaled = steps.scores * steps.scale / options.temperature
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
    data.update((key, value) for key, value in base.data.items() if key not in data)
    return Result(data, explain_view(problem, steps, precision, options, i, scaled), base.matrices)


def explain_view(problem: Problem, steps, precision: int, options: AttentionOptions, i: int, scaled):
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

    def table(values, row_labels, col_labels, title):
        return number_table(values, row_labels, col_labels, precision=precision, title=title)

    numbers = itertools.count(1)

    def heading(title: str, *sentences) -> Text:
        """'3. Scaled scores' and the sentences under it, numbered in the order shown."""
        return Text.assemble((f"{next(numbers)}. {title}", "bold underline"),
                             *("\n" + s for s in sentences if s))

    sections = [
        Text.assemble(("attention, step by step: ", "bold"), "softmax(QKᵀ/√d_k)V",
                      ("\n" + str(description)) if description else "", "\n", describe(steps, d_k, options)),
        heading("The inputs",
                "Each row is a vector. Every query is compared with every key, and each key has a value."),
        table(q, rows, problem.q.col_labels or _columns(d_k),
              f"Q: {plural(n_q, 'query', 'queries')}, {n_q}×{d_k}"),
        table(k, key_rows, problem.k.col_labels or _columns(d_k),
              f"K: {plural(n_k, 'key')}, {n_k}×{d_k}"),
        table(v, key_rows, problem.columns, f"V: one value per key, {n_k}×{d_v}"),
        heading("Scores: QKᵀ", *score_sentences(problem, options, i, precision)),
        table(steps.scores, rows, key_cols, "scores = Q · Kᵀ, queries down, keys across"),
        heading("Scaled scores", *scale_sentences(steps, d_k, options)),
        table(scaled, rows, key_cols, "scaled scores"),
        *mask_section(problem, steps, scaled, rows, key_cols, precision, heading),
        heading("Weights: softmax of each row",
                "Softmax turns each row of scaled scores into weights between 0 and 1 that sum to 1: "
                "e^x / Σ e^x, so the biggest score gets the most weight. Brighter = more attention."),
        heatmap(steps.weights, rows, key_cols, precision=precision, allowed=steps.allowed,
                title=f"weights, {rows_sum(options, n_q, n_k)}"),
        heading("Output: weights · V",
                "Each query's output is the values added up, each times the query's weight for its key:"),
        Text(weighted_sum(label, steps.weights[i], v, steps.output[i], precision,
                          None if steps.allowed is None else steps.allowed[i])),
        table(steps.output, rows, problem.columns, "output = weights · V"),
        readings(problem, steps, precision, rows=[i]),
    ]
    return stack(*sections)


def score_sentences(problem: Problem, options: AttentionOptions, i: int, precision: int) -> list[str]:
    """What a score is, and the first one written out for query ``i``."""
    if options.similarity == "cosine":
        return ["A score is the cosine similarity of a query and a key: the dot product of the two rows "
                "scaled to length 1, from −1 (opposite directions) to 1 (the same direction)."]
    from attncli.output.render import short

    q, k = problem.q.values[i], problem.k.values[0]
    products = [f"{short(a, precision)} × {short(b, precision)}" for a, b in zip(q.tolist(), k.tolist(), strict=True)]
    return [
        "A score is the dot product of a query and a key: multiply them number by number and add up. "
        "The more alike they are, the bigger the score.",
        f"{problem.queries[i]} · {problem.keys[0]} = {_sum(products)} "
        f"= {short(float(q @ k), precision)}",
    ]


def scale_sentences(steps, d_k: int, options: AttentionOptions) -> list[str | None]:
    """Which scale, and why."""
    if options.scale is not None:
        first = f"The scores are multiplied by {steps.scale:g}, as --scale asks."
    elif options.similarity == "cosine":
        first = "Cosine similarities are already between −1 and 1, so they are not scaled (scale 1)."
    else:
        first = (f"The scores are multiplied by 1/√d_k = 1/√{d_k} = {steps.scale:.4g}: dot products of "
                 "longer vectors spread wider, and scaling keeps softmax from piling all the weight "
                 "on one key.")
    temperature = options.temperature
    second = None if temperature == 1 else (
        f"Then they are divided by the temperature {temperature:g}, which "
        f"{'flattens' if temperature > 1 else 'sharpens'} the weights.")
    return [first, second]


def mask_section(problem: Problem, steps, scaled, rows, key_cols, precision: int, heading) -> list:
    """Step 4 when there is a mask or a bias: which pairs are forbidden, and the scores it changes."""
    from attncli.output.render import number_table

    if steps.allowed is None and problem.options.bias is None:
        return []
    parts = []
    if steps.allowed is not None:
        forbidden = int((~steps.allowed).sum())
        why = " Causal: each query sees only the keys up to its own position." if not problem.masked else ""
        parts.append(f"The mask forbids {forbidden} of {steps.allowed.size} query–key pairs (–).{why} "
                     "A forbidden pair's score becomes −∞, so softmax gives it weight 0.")
    biased = problem.options.bias is not None
    if biased:
        parts.append("The bias adds its numbers to the scaled scores; −∞ there forbids a pair too.")
    title = "Mask and bias" if biased and steps.allowed is not None else "Bias" if biased else "Mask"
    return [heading(title, *parts), number_table(steps.logits, rows, key_cols, precision=precision,
                                 title=f"scaled scores with the {title.lower()} (−inf = forbidden)")]


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
    """'[1, 0]', or '[0.1, 0.2, 0.3, 0.4, … 46 more]' for a long row."""
    from attncli.output.render import short

    values = [short(x, precision) for x in row.tolist()[:limit]]
    more = f", … {len(row) - limit} more" if len(row) > limit else ""
    return f"[{', '.join(values)}{more}]"


def _sum(terms: list[str]) -> str:
    """'a + b + c', or the first TERMS terms and how many more."""
    more = len(terms) - TERMS
    return " + ".join(terms[:TERMS]) + (f" + … ({more} more)" if more > 0 else "")


def _columns(d: int) -> list[str]:
    return [f"d{j}" for j in range(d)]
