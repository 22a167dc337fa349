"""``attn explain``'s view: the steps one under another (with --grad the backward pass's too),
each a heading, a sentence or two and the numbers, from the reference's ``Steps`` (nothing
worked out again) and each setting's sentence from the core (``core.options.SAYINGS``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attncli.cli.describe import call_of, sentence, settings_line
from attncli.cli.explained_scores import score_sentences, score_terms
from attncli.cli.model_options import model_line
from attncli.cli.written import TERMS, columns, factor, vector
from attncli.errors import UsageError
from attncli.text import clip, parse_index, plural

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.core.options import Call
    from attncli.core.reference import Steps
    from attncli.output.heatmap import ViewStyle

ORDER = (
    "logits = softcap(scale · q·k / temperature) + bias + ALiBi (q, k rotated by RoPE first); "
    "causal, window and mask set −∞; weights = e^logit / (Σ e^logit + e^sink)"
)


def pick_query(labels: list[str], query: str | None, what: str) -> int:
    """The row --query names: a label first, else a row number from 0 (``what``: the matrix, for the hint)."""
    if query is None:
        return 0
    if query in labels:
        return labels.index(query)
    row = parse_index(query)
    if row is not None and 0 <= row < len(labels) and query.strip()[:1] != "-":
        return row
    rows = "row 0" if len(labels) == 1 else f"rows 0 to {len(labels) - 1}"
    raise UsageError(f"--query {clip(query)}: no such query", hint=f"{what} has {rows}; give a number or a label")


@dataclass
class Page:
    """What every section draws with: the inputs and steps of one head, the query
    explained, the labels, and numbered headings."""

    inputs: Inputs
    steps: Steps
    i: int  # the query written out term by term
    precision: int
    style: ViewStyle | None = None
    whole: Call | None = None  # the call the settings are said for, when Q is one row of it (trace --explain)
    wide: int | None = None  # rows of features wider than this are written a row a line, their first numbers

    def __post_init__(self) -> None:
        from attncli.cli.run_result import shown_labels

        self.call: Call = self.whole or call_of(self.inputs.q.shape, self.inputs.k.shape)
        self.rows, self.key_rows, self.key_cols = shown_labels(self.inputs)
        self.numbers: Iterator[int] = itertools.count(1)

    def said(self, field: str) -> str | None:
        """The setting ``field``'s sentence, as the core declares it (None: not in force)."""
        return sentence(self.inputs.options, self.call, field)

    def heading(self, title: str, *sentences: str | None) -> Any:
        """'3. Scaled scores' and the sentences under it, numbered in the order shown."""
        from rich.text import Text

        return Text.assemble((f"{next(self.numbers)}. {title}", "bold underline"), *("\n" + s for s in sentences if s))

    def table(
        self, values: np.ndarray, row_labels: list[Any], col_labels: list[Any], title: str, features: bool = False
    ) -> Any:
        """A matrix as a table; rows of ``features`` (q, k, v: not one column per key) wider than
        ``wide`` a row a line."""
        from attncli.output.render import number_table, vector_lines

        if features and self.wide is not None and values.shape[-1] > self.wide:
            shown = [vector(row, self.precision, self.wide // 2) for row in values]
            return vector_lines(shown, row_labels, title=f"{title} (-f json: every number)")
        return number_table(values, row_labels, col_labels, precision=self.precision, title=title)


def explain_view(
    inputs: Inputs,
    steps: Steps,
    i: int,
    precision: int,
    style: ViewStyle | None = None,
    backward: dict[str, np.ndarray] | None = None,
) -> Any:
    """The steps one under another, for query row ``i`` of one head."""
    from rich.text import Text

    from attncli.cli.run_result import readings
    from attncli.output.render import stack

    page = Page(inputs, steps, i, precision, style)
    options = inputs.options
    q, k, v = inputs.q.values, inputs.k.values, inputs.v.values
    (n_q, d_k), (n_k, d_v) = q.shape, v.shape
    lines = variant_lines(page)
    if inputs.head is not None:
        lines.append(f"batch {inputs.head[0]} · head {inputs.head[1]} of the tensors (--batch, --head choose another)")
    sections = [
        Text.assemble(
            ("attention, step by step: ", "bold"),
            "softmax(QKᵀ/√d_k)V",
            ("\n" + inputs.description) if inputs.description else "",
            "\n",
            settings_line(options, page.call, steps.allowed),
            model_line(inputs.flags),
            *(p for line in lines for p in ("\n", line)),
        ),
        page.heading(
            "The inputs", "Each row is a vector. Every query is compared with every key, and each key has a value."
        ),
        page.table(
            q, page.rows, inputs.q.col_labels or columns(d_k), f"Q: {plural(n_q, 'query', 'queries')}, {n_q}×{d_k}"
        ),
        page.table(k, page.key_rows, inputs.k.col_labels or columns(d_k), f"K: {plural(n_k, 'key')}, {n_k}×{d_k}"),
        page.table(v, page.key_rows, inputs.columns, f"V: one value per key, {n_k}×{d_v}"),
        *attention_sections(page),
        readings(inputs, steps, precision, rows=[i]),
    ]
    if backward is not None:
        sections += backward_sections(page, backward)
    return stack(*sections)


def variant_lines(page: Page) -> list[str]:
    """The whole formula, in the order the settings act, when a variant is in force."""
    return [ORDER] if any(page.said(f) for f in ("rope", "softcap", "alibi_slopes", "window", "sinks")) else []


def attention_sections(page: Page, scores_title: str = "Scores: QKᵀ") -> list[Any]:
    """From Q, K and V to the output, for ``page``'s query: RoPE, the scores (the
    query's written out, with the terms that made each big), the scale, the
    soft-cap, the mask, the softmax and the weighted sum. What ``explain`` and
    ``self --explain`` share."""
    from rich.text import Text

    from attncli.cli.guards import rows_sum
    from attncli.output.render import heatmap

    inputs, steps, i, precision = page.inputs, page.steps, page.i, page.precision
    options = inputs.options
    n_q, n_k = steps.weights.shape
    cosine = options.similarity == "cosine"
    return [
        *rope_section(page),
        page.heading("Scores: cos(q, k)" if cosine else scores_title, *score_sentences(page)),
        *score_terms(page),
        page.table(
            steps.scores,
            page.rows,
            page.key_cols,
            "scores = cos(q, k) of each query and key, queries down, keys across"
            if cosine
            else "scores = Q · Kᵀ, queries down, keys across",
        ),
        page.heading("Scaled scores", page.said("scale"), page.said("temperature")),
        page.table(steps.scaled, page.rows, page.key_cols, "scaled scores"),
        *softcap_section(page),
        *mask_section(page),
        page.heading(
            "Weights: softmax of each row",
            page.said("sinks")
            or (
                "Softmax turns each row of scaled scores into weights between 0 and 1 that sum to 1: e^x / Σ e^x, so "
                "the biggest score gets the most weight. Brighter = more attention."
            ),
        ),
        heatmap(
            steps.weights,
            page.rows,
            page.key_cols,
            precision=precision,
            allowed=steps.allowed,
            title=f"weights, {rows_sum(options, n_q, n_k)}",
            style=page.style,
        ),
        page.heading(
            "Output: weights · V",
            "Each query's output is the values added up, each times the query's weight for its key:",
        ),
        Text(
            weighted_sum(
                inputs.queries[i],
                steps.weights[i],
                inputs.v.values,
                steps.output[i],
                precision,
                None if steps.allowed is None else steps.allowed[i],
            )
        ),
        page.table(steps.output, page.rows, inputs.columns, "output = weights · V", features=True),
    ]


def rope_section(page: Page) -> list[Any]:
    """With RoPE: Q and K rotated by their positions, the step before the scores."""
    rotated, rope = page.steps.rotated, page.inputs.options.rope
    if rotated is None or rope is None:
        return []
    names = [f"d{j}" for j in range(rotated[0].shape[-1])]
    return [
        page.heading(f"RoPE ({rope.style}): Q and K rotated by position", page.said("rope")),
        *frequency_table(page),
        page.table(rotated[0], page.rows, names, "RoPE(Q)", features=True),
        page.table(rotated[1], page.key_rows, names, "RoPE(K)", features=True),
    ]


def frequency_table(page: Page) -> list[Any]:
    """Under RoPE scaling: the frequencies, plain and scaled, and their ratio, one column a pair."""
    import numpy as np

    from attncli.cli.describe import scaled_frequencies

    got = scaled_frequencies(page.inputs.options, page.call)
    rope = page.inputs.options.rope
    if got is None or rope is None or rope.scaling is None:
        return []
    kind, factor = rope.scaling.kind, got["attention_factor"]
    table = np.stack([got["plain"], got["scaled"], got["scaled"] / got["plain"]])  # [3, dim / 2]
    pairs = [f"pair {i}" for i in range(table.shape[1])]
    said = f"cos and sin are multiplied by the attention factor {factor:.6g}." if factor != 1 else None
    title = f"frequencies, plain and {kind}-scaled (sequence length {got['length']})"
    return [page.table(table, ["θ^(−2i/d)", kind, "ratio"], pairs, title), *([said] if said else [])]


def softcap_section(page: Page) -> list[Any]:
    """With a soft-cap: the scaled scores squashed into ±C."""
    if page.steps.capped is None:
        return []
    return [
        page.heading("Soft-cap", page.said("softcap")),
        page.table(page.steps.capped, page.rows, page.key_cols, "soft-capped scores"),
    ]


# The settings whose sentences have a place of their own above; any other setting's sentence
# (a setting added later) is said where the logits are shown, so every setting is explained.
PLACED = frozenset(
    {"scale", "temperature", "similarity", "rope", "softcap", "window", "causal", "alibi_slopes", "bias", "sinks"}
)


def mask_section(page: Page) -> list[Any]:
    """When a mask, causal, a window, ALiBi, a bias or another setting changes the
    scores: which pairs are forbidden, and the logits."""
    import numpy as np

    from attncli.core.options import said

    steps, options = page.steps, page.inputs.options
    last = steps.capped if steps.capped is not None else steps.scaled
    biased, alibi = options.bias is not None, options.uses_alibi
    others = [s.explain for s in said(options, page.call) if s.explain and s.field not in PLACED]
    if steps.allowed is None and not biased and not others and np.array_equal(steps.logits, last):
        return []
    parts = []
    if steps.allowed is not None:
        why = "".join(" " + s for s in (page.said("window"), None if page.inputs.masked else page.said("causal")) if s)
        parts.append(
            f"The mask forbids {int((~steps.allowed).sum())} of {steps.allowed.size} query–key pairs (–)."
            f"{why} A forbidden pair's score becomes −∞, so softmax gives it weight 0."
        )
    parts += [s for s in (page.said("alibi_slopes"), page.said("bias")) if s] + others
    shown = [name for name, used in (("mask", steps.allowed is not None), ("bias", biased), ("ALiBi", alibi)) if used]
    title = " and ".join(shown) or "mask"
    return [
        page.heading(title[0].upper() + title[1:], *parts),
        page.table(
            steps.logits,
            page.rows,
            page.key_cols,
            f"scaled scores with the {' and '.join(shown) or 'mask'} (−inf = forbidden)",
        ),
    ]


def weighted_sum(
    label: str,
    weights: np.ndarray,
    v: np.ndarray,
    output: np.ndarray,
    precision: int,
    allowed: np.ndarray | None = None,
) -> str:
    """'#8517dc: 0.150 × [1, 0] + 0.128 × [1, 0] + … = [0.488, 0.512]'.

    Forbidden keys are left out; past TERMS keys only the heaviest are written,
    in key order, and the rest are counted."""
    from attncli.output.blocks import fmt

    keys = [j for j in range(len(weights)) if allowed is None or allowed[j]]
    shown = sorted(sorted(keys, key=lambda j: -weights[j])[:TERMS])
    written = [f"{fmt(weights[j], precision)} × {vector(v[j], precision)}" for j in shown]
    rest = [j for j in keys if j not in shown]
    tail = f" + … ({len(rest)} more keys, weight {fmt(sum(weights[j] for j in rest), precision)})" if rest else ""
    return f"{label}: {' + '.join(written) or '0'}{tail} = {vector(output, precision)}"


def backward_sections(page: Page, b: dict[str, np.ndarray]) -> list[Any]:
    """dP, the softmax's Jacobian step, dS, and dQ row i term by term."""
    from rich.text import Text

    from attncli.output.blocks import fmt

    inputs, steps, i, precision = page.inputs, page.steps, page.i, page.precision
    options = inputs.options
    rows, key_rows, key_cols = page.rows, page.key_rows, page.key_cols
    d_k = inputs.q.values.shape[-1]
    factor_ = steps.scale / options.temperature
    k_met = steps.rotated[1] if steps.rotated is not None else inputs.k.values  # K as it met Q
    nonzero = [j for j in range(len(key_rows)) if b["dz"][i, j] != 0]
    shown = nonzero[:TERMS]
    written = [f"{factor(b['dz'][i, j], precision)} × {vector(k_met[j], precision)}" for j in shown]
    row = factor_ * (b["dz"][i] @ k_met)
    softcap = options.softcap is not None
    turned = (
        [
            f"RoPE's rotation is then turned back (by minus each position's angle): dQ row = "
            f"{vector(b['dq'][i], precision)}."
        ]
        if steps.rotated is not None
        else []
    )
    cosine = (
        [
            "With cosine similarity Q and K are unit rows here; the gradient is then taken back through "
            "their normalisation."
        ]
        if options.similarity == "cosine"
        else []
    )
    sections = [
        page.heading(
            "Backward: dP = dO · Vᵀ",
            "Given dO, the gradient of something with respect to each output, every weight's gradient "
            "is how its value lines up with dO: dP[i, j] = dO[i] · v[j].",
        ),
        page.table(b["dout"], rows, inputs.columns, "dO, the output's gradient"),
        page.table(b["dp"], rows, key_cols, "dP = dO · Vᵀ"),
        page.heading(
            "The softmax's Jacobian: rowsum(dO ∘ O)",
            "Softmax ties each row's weights together (they sum to 1), so raising one lowers the others: "
            "the gradient of a logit is P[i, j] (dP[i, j] − δ[i]), with δ[i] = Σ_j P[i, j] dP[i, j] "
            "= dO[i] · O[i].",
        ),
        page.table(b["delta"], rows, ["δ"], "δ = rowsum(dO ∘ O)"),
        page.heading(
            "dS = P ∘ (dP − δ)",
            "A pair the mask forbids has P = 0, so no gradient; a query that sees no key gets none."
            + (
                " The sinks take no gradient here; theirs is Σ_i −p_sink[i] · δ[i]."
                if options.sinks is not None
                else ""
            ),
        ),
        page.table(b["ds"], rows, key_cols, "dS, the logits' gradient"),
    ]
    if softcap:
        sections += [
            page.heading(
                "Through the soft-cap",
                f"cap · tanh(x / cap) has slope 1 − tanh²(x / cap): "
                f"dZ = dS ∘ (1 − tanh²(scaled / {fmt(float(options.softcap or 0), precision)})).",
            ),
            page.table(b["dz"], rows, key_cols, "dZ, the scaled scores' gradient"),
        ]
    sections += [
        page.heading(
            f"dQ for {inputs.queries[i]}: dZ · K · scale",
            f"Each query's gradient is the keys, each times its {'dZ' if softcap else 'dS'}, times the "
            f"scale {fmt(factor_, precision)}:",
            *cosine,
        ),
        Text(
            f"{inputs.queries[i]}: {fmt(factor_, precision)} × ({' + '.join(written) or '0'}"
            f"{' + …' if len(shown) < len(nonzero) else ''}) = {vector(row, precision)}"
            + "".join("\n" + line for line in turned)
        ),
        page.table(b["dq"], rows, inputs.q.col_labels or columns(d_k), "dQ = dZ · K · scale"),
        page.table(
            b["dk"],
            key_rows,
            inputs.k.col_labels or columns(d_k),
            "dK = dZᵀ · Q · scale (summed over the query heads of a K/V head's group)",
        ),
        page.table(b["dv"], key_rows, inputs.columns, "dV = Pᵀ · dO (summed over the group's query heads)"),
    ]
    return sections
