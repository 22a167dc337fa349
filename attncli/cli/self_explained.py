"""``attn self --explain``: one token's way through one head, with the real
numbers — its input row x, the projections q = x W_Q + b_q and every k_j, v_j
(the first terms written out), then explain's own steps (RoPE, the scores with
the terms that made each high, the scale, the mask, the softmax, the weighted
sum: ``cli/explained.py``'s ``attention_sections``), then W_O. The JSON of the
same steps sits under ``explain``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from attncli.cli.explained import Page, attention_sections, variant_lines
from attncli.cli.written import columns, projected_feature, vector
from attncli.text import plural

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.cli.self_inputs import SelfInputs
    from attncli.core.multihead import MultiHeadSteps
    from attncli.core.reference import Steps
    from attncli.output.heatmap import ViewStyle

WHOLE_X = 16  # X is shown as a table up to this many columns; past it, the query's row


@dataclass(frozen=True)
class Explained:
    """One token's steps through one head of ``attn self``."""

    inputs: SelfInputs
    steps: MultiHeadSteps
    w: dict[str, np.ndarray]  # "wq", "wk", "wv": the projections used (given or drawn)
    head: int
    i: int  # the query explained
    random: list[str]  # the projections drawn at random ("W_Q", ...)

    @property
    def n_head(self) -> int:
        return int(self.steps.weights.shape[0])

    def qk_columns(self) -> slice:
        d = self.steps.q.shape[1] // self.n_head
        return slice(self.head * d, (self.head + 1) * d)

    def v_columns(self) -> slice:
        d = self.steps.v.shape[1] // self.n_head
        return slice(self.head * d, (self.head + 1) * d)

    def head_inputs(self) -> Inputs:
        """The head's Q, K, V as ``attn explain``'s inputs, labelled by the tokens."""
        from attncli.cli.inputs import Inputs
        from attncli.readers import Matrix

        x, z = self.inputs.x, self.inputs.context
        wv = self.inputs.weights.get("wv")
        v_labels = None if wv is None or wv.col_labels is None else wv.col_labels[self.v_columns()]
        return Inputs(
            Matrix(self.steps.q[:, self.qk_columns()], x.row_labels or self.inputs.queries),
            Matrix(self.steps.k[:, self.qk_columns()], z.row_labels or self.inputs.keys),
            Matrix(self.steps.v[:, self.v_columns()], z.row_labels or self.inputs.keys, v_labels),
            self.inputs.options,
            description=self.inputs.description,
        )

    def head_steps(self) -> Steps:
        """The head's steps, [n_q, n_k] each."""
        s, h = self.steps.heads, self.head

        def one(values: np.ndarray | None) -> np.ndarray | None:
            return None if values is None or values.ndim == 2 else values[h]

        rotated = None if s.rotated is None else (s.rotated[0][h], s.rotated[1][h])
        return replace(
            s,
            scores=s.scores[h],
            scaled=s.scaled[h],
            capped=one(s.capped),
            logits=s.logits[h],
            allowed=s.allowed if s.allowed is None or s.allowed.ndim == 2 else s.allowed[h],
            weights=s.weights[h],
            output=s.output[h],
            rotated=rotated,
        )

    def data(self) -> dict[str, Any]:
        """The JSON under ``explain``: the query's steps in this head, rows as used (after RoPE)."""
        import math

        steps = self.head_steps()
        i = self.i
        q_used, k_used = (self.steps.q[:, self.qk_columns()], self.steps.k[:, self.qk_columns()])
        if steps.rotated is not None:
            q_used, k_used = steps.rotated
        w_o = self.inputs.given("wo")
        return {
            "query": self.inputs.queries[i],
            "query_index": i,
            "head": self.head,
            "x": self.inputs.x.values[i],
            "q": q_used[i],
            "k": k_used,
            "v": self.steps.v[:, self.v_columns()],
            "scores": steps.scores[i],
            "scale": steps.scale,
            "temperature": self.inputs.options.temperature,
            "logits": [x if math.isfinite(x) else None for x in steps.logits[i].tolist()],
            "weights": steps.weights[i],
            "output": steps.output[i],
            "merged": self.steps.merged[i],
            "w_o": w_o,
            "projected": self.steps.output[i],
        }


def explained_view(e: Explained, precision: int, style: ViewStyle | None) -> Any:
    """The token's steps one under another."""
    from rich.text import Text

    from attncli.cli.describe import settings_line
    from attncli.output.render import stack

    inputs = e.head_inputs()
    steps = e.head_steps()
    page = Page(inputs, steps, e.i, precision, style)
    query = e.inputs.queries[e.i]
    kind = "self-attention" if e.inputs.z is None else "cross-attention"
    head = f"head {e.head} of {e.n_head}" if e.n_head > 1 else "one head"
    random = (
        [
            f"{', '.join(e.random)} are random (seed {e.inputs.settings.seed}): these numbers show the steps, "
            "the pattern means nothing; `attn trace` shows a trained model."
        ]
        if e.random
        else []
    )
    lines = [*random, *variant_lines(page)]
    header = Text.assemble(
        (f"{kind}, step by step, for {query} in {head}: ", "bold"),
        "q = x W_Q + b_q, k = z W_K + b_k, v = z W_V + b_v; softmax(q Kᵀ/√d_head) V",
        ("\n" + e.inputs.description) if e.inputs.description else "",
        "\n",
        settings_line(e.inputs.options, page.call, steps.allowed),
        *(p for line in lines for p in ("\n", line)),
    )
    return stack(
        header,
        *input_sections(e, page),
        *projection_sections(e, page),
        *attention_sections(page, "Scores: e_ij = q_i · k_j"),
        *output_projection(e, page),
    )


def input_sections(e: Explained, page: Page) -> list[Any]:
    """The rows that attend: X (the query's row when X is wide), and Z for cross-attention."""
    from rich.text import Text

    x = e.inputs.x
    n, d_in = x.shape
    query = e.inputs.queries[e.i]
    words = "its word vector" if e.inputs.sentence else "its input vector"
    parts: list[Any] = [
        page.heading(
            "The input rows",
            f"Each token is a row of X, {n}×{d_in}: {words}. The query explained is {query}"
            + (
                f"; keys and values come from the context Z, {e.inputs.z.shape[0]}×{e.inputs.z.shape[1]}."
                if e.inputs.z is not None
                else ", and every token is a key too."
            ),
        )
    ]
    names = x.col_labels or columns(d_in)
    if d_in <= WHOLE_X:
        parts.append(page.table(x.values, e.inputs.queries, names, f"X: {plural(n, 'token')}, {n}×{d_in}"))
    else:
        parts.append(Text(f"x of {query} = {vector(x.values[e.i], page.precision)} (-f json: every number)"))
    return parts


def projection_sections(e: Explained, page: Page) -> list[Any]:
    """q = x W_Q + b_q for the query, k_j and v_j for every key, the first terms written out."""
    from rich.text import Text

    p = page.precision
    qk, vc = e.qk_columns(), e.v_columns()
    d_head, d_vh = qk.stop - qk.start, vc.stop - vc.start
    x = e.inputs.x.values
    z = e.inputs.context.values
    keys = e.inputs.keys
    where = (
        f"Head {e.head} uses columns {qk.start} to {qk.stop - 1} of W_Q and W_K and columns {vc.start} to "
        f"{vc.stop - 1} of W_V. "
        if e.n_head > 1
        else ""
    )
    said = (
        f"{where}Each feature of q is the query's row times a column of W_Q, plus that feature's bias; "
        "k and v are made the same way from every key's row."
    )
    written = [
        projected_feature(
            f"q_{e.inputs.queries[e.i]}[0]", x[e.i], e.w["wq"][:, qk.start], e.inputs.given("bq"), qk.start, p
        ),
        projected_feature(f"k_{keys[0]}[0]", z[0], e.w["wk"][:, qk.start], e.inputs.given("bk"), qk.start, p),
        projected_feature(f"v_{keys[0]}[0]", z[0], e.w["wv"][:, vc.start], e.inputs.given("bv"), vc.start, p),
    ]
    shapes = f"W_Q and W_K {x.shape[1]}×{e.w['wq'].shape[1]}, W_V {z.shape[1]}×{e.w['wv'].shape[1]}"
    random = f" ({', '.join(e.random)} drawn at random)" if e.random else ""
    inputs = page.inputs
    return [
        page.heading("Projections: q = x W_Q + b_q, k = z W_K + b_k, v = z W_V + b_v", f"{shapes}{random}. {said}"),
        Text("\n".join(written)),
        page.table(
            inputs.q.values[e.i : e.i + 1],
            [page.rows[e.i]],
            columns(d_head),
            f"q of {e.inputs.queries[e.i]}, 1×{d_head}",
        ),
        page.table(inputs.k.values, page.key_rows, columns(d_head), f"K: a key per token, {len(keys)}×{d_head}"),
        page.table(inputs.v.values, page.key_rows, inputs.columns, f"V: a value per token, {len(keys)}×{d_vh}"),
    ]


def output_projection(e: Explained, page: Page) -> list[Any]:
    """The heads side by side and, with W_O, the output projection written out for its first feature."""
    from rich.text import Text

    p = page.precision
    i, query = e.i, e.inputs.queries[e.i]
    merged, output = e.steps.merged[i], e.steps.output[i]
    w_o = e.inputs.given("wo")
    heads = "The heads' outputs side by side" if e.n_head > 1 else "The head's output"
    if w_o is None:
        are = "are" if e.n_head > 1 else "is"
        return [
            page.heading("The output", f"{heads} {are} the output: there is no W_O."),
            Text(f"output of {query} = {vector(output, p)}"),
        ]
    lines = [
        f"concat of {query} = {vector(merged, p)}",
        projected_feature(f"output_{query}[0]", merged, w_o[:, 0], e.inputs.given("bo"), 0, p),
        f"output of {query} = {vector(output, p)}",
    ]
    bias = " + b_o" if e.inputs.given("bo") is not None else ""
    return [
        page.heading(
            f"Output projection: concat(heads) W_O{bias}",
            f"{heads}, {len(merged)} numbers, times W_O ({w_o.shape[0]}×{w_o.shape[1]}){bias}: each output feature "
            "is the concatenated row times a column of W_O.",
        ),
        Text("\n".join(lines)),
    ]
