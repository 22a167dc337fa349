"""``attn trace --explain``: one token through one head of one layer of a real
model, with the model's own numbers (``models.explaining.HeadSteps``): the
token's row x after the layer's norm, q = x W_Q + b_q and every k_j, v_j (the
first terms written out), then explain's own steps on the head's Q, K, V
(``explained.attention_sections``: RoPE, each key's score with the dimensions
that made it high, the scale, the mask, the softmax, the weighted sum), then
the head's rows of W_O and what they add to the residual stream. JSON: the
same steps under ``explain``. The same pieces as ``self --explain``
(``self_explained.py``), on a model's head."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.explained import Page, attention_sections, variant_lines
from attncli.cli.written import projected_feature, vector
from attncli.errors import UsageError
from attncli.text import plural

if TYPE_CHECKING:
    from attncli.cli.trace_run import Traced, TraceRequest
    from attncli.models import HeadSteps
    from attncli.output.heatmap import ViewStyle

WIDE = 16  # a model's rows wider than this are written a row a line (the first numbers), not as tables
SHOWN = 8  # numbers of a long row written in a sentence


def check_explain(request: TraceRequest) -> None:
    """--explain walks one token through one head of one layer: each must be one."""
    for other, given in (("--summary", request.summary), ("--aggregate", request.aggregate is not None)):
        if given:
            raise UsageError(
                f"--explain walks one token through one head; {other} "
                + ("summarises every head" if other == "--summary" else "combines heads"),
                hint="give one of them",
            )
    missing = [
        f"one {option} ({len(chosen)} given)" if chosen else f"one {option}"
        for option, chosen in (("--layer L", request.layers), ("--head H", request.heads))
        if len(chosen) != 1
    ] + (["--query TOKEN"] if request.query is None else [])
    if missing:
        raise UsageError(
            "--explain walks one token through one head of one layer: it needs "
            + (missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"),
            hint="e.g. --layer 9 --head 4 --query it --explain",
        )


def labels(tokens: list[str]) -> list[str]:
    """Tokens as the walk names them: without a decoder's leading space (' it' -> 'it')."""
    return [token.strip() or repr(token) for token in tokens]


def explain_data(traced: Traced) -> dict[str, Any]:
    """The JSON under ``explain``: the query's steps in the head, rows as used (after RoPE)."""
    import math

    h = traced.explained
    assert h is not None
    s = h.steps
    data: dict[str, Any] = {
        "layer": h.layer,
        "head": h.head,
        "kv_head": h.kv_head,
        "query": traced.tokens[h.query],
        "position": h.query,  # in tokens below: every token of the sequence, each a key
        "tokens": traced.tokens,
        "x": h.x[h.query],
        "q": h.q_used,
        "k": h.k_used,
        "v": h.v,
    }
    if s.rotated is not None:  # as projected, before RoPE turned them
        data.update(q_projected=h.q[h.query], k_projected=h.k)
    data.update(
        scores=s.scores[0],
        scale=s.scale,
        logits=[x if math.isfinite(x) else None for x in s.logits[0].tolist()],
        weights=s.weights[0],
        output=s.output[0],
        w_o=h.w_o,
        projected=h.projected,
    )
    return data


def head_page(traced: Traced, precision: int, style: ViewStyle | None) -> Page:
    """The head's Q (the query's row), K and V as explain's inputs, the settings said for the whole sequence."""
    from attncli.cli.describe import call_of
    from attncli.cli.inputs import Inputs
    from attncli.readers import Matrix

    h = traced.explained
    assert h is not None
    names = labels(traced.tokens)
    n, q = len(names), h.query
    inputs = Inputs(
        Matrix(h.q[q : q + 1], [names[q]]),
        Matrix(h.k, names),
        Matrix(h.v, names),
        h.options,
    )
    whole = call_of((n, h.d_head), (n, h.d_head))
    return Page(inputs, h.steps, 0, precision, style, whole=whole, wide=WIDE)


def explained_view(traced: Traced, precision: int, style: ViewStyle | None) -> Any:
    """The token's steps one under another."""
    from rich.text import Text

    from attncli.cli.describe import settings_line
    from attncli.output.render import stack

    h = traced.explained
    assert h is not None
    page = head_page(traced, precision, style)
    model = traced.model
    token = traced.tokens[h.query]
    group = (
        [
            f"grouped-query attention: query head {h.head} reads K/V head {h.kv_head} of {h.n_kv_head}, "
            f"which heads {', '.join(map(str, h.group))} share"
        ]
        if h.n_kv_head != h.n_head
        else []
    )
    lines = [*group, *variant_lines(page)]
    header = Text.assemble(
        (f"trace, step by step: {token!r} (token {h.query}) through layer {h.layer} · head {h.head}", "bold"),
        f"\n{model.name} · {model.family.name}, {plural(model.config.n_layer, 'layer')} × "
        f"{plural(h.n_head, 'head')} · {plural(len(traced.tokens), 'token')} · a {model.family.kind}",
        f"\nx = {h.read}; q = x W_Q + b_q, k = x W_K + b_k, v = x W_V + b_v; softmax(q Kᵀ · scale) V; "
        "the head's rows of W_O",
        "\n",
        settings_line(h.options, page.call, h.steps.allowed),
        *(p for line in lines for p in ("\n", line)),
    )
    return stack(
        header,
        *input_section(traced, page),
        *projection_sections(traced, page),
        *attention_sections(page, "Scores: e_ij = q_i · k_j"),
        *output_projection(traced, page),
    )


def input_section(traced: Traced, page: Page) -> list[Any]:
    """The query's row x, as the layer's projections read it."""
    from rich.text import Text

    h = traced.explained
    assert h is not None
    n, d_model = h.x.shape
    query = page.inputs.queries[0]
    return [
        page.heading(
            "The input row",
            f"x is what layer {h.layer}'s projections read: {h.read}, a row of {d_model} numbers for each of the "
            f"{plural(n, 'token')}. "
            f"The query explained is {query} (token {h.query}); every token is a key too.",
        ),
        Text(f"x of {query} = {vector(h.x[h.query], page.precision, SHOWN)} (-f json: every number)"),
    ]


def projection_sections(traced: Traced, page: Page) -> list[Any]:
    """q = x W_Q + b_q for the query, k_j and v_j for every key, the first terms written out."""
    from rich.text import Text

    h = traced.explained
    assert h is not None
    p, d, d_v = page.precision, h.d_head, h.d_v
    d_model = h.x.shape[1]
    names, query = page.inputs.keys, page.inputs.queries[0]
    biases = "" if h.w_q.b is None else ", plus that feature's bias"
    said = (
        f"{_where(h, d_model)} Each feature of q is x times a column of W_Q{biases}; k and v are made the same "
        "way from every token's row."
    )
    first = names[0]
    written = [
        projected_feature(f"q_{query}[0]", h.x[h.query], h.w_q.w[:, 0], h.w_q.b, 0, p),
        projected_feature(f"k_{first}[0]", h.x[0], h.w_k.w[:, 0], h.w_k.b, 0, p),
        projected_feature(f"v_{first}[0]", h.x[0], h.w_v.w[:, 0], h.w_v.b, 0, p),
    ]
    inputs = page.inputs
    n = len(names)
    return [
        page.heading("Projections: q = x W_Q + b_q, k = x W_K + b_k, v = x W_V + b_v", said),
        Text("\n".join(written)),
        page.table(inputs.q.values, [page.rows[0]], [f"d{j}" for j in range(d)], f"q of {query}, 1×{d}", features=True),
        page.table(
            inputs.k.values, page.key_rows, [f"d{j}" for j in range(d)], f"K: a key per token, {n}×{d}", features=True
        ),
        page.table(inputs.v.values, page.key_rows, inputs.columns, f"V: a value per token, {n}×{d_v}", features=True),
    ]


def _where(h: HeadSteps, d_model: int) -> str:
    """Which columns of W_Q, W_K and W_V the head uses: 'W_Q, W_K and W_V are 384×384 each. Head 11 uses …'."""
    d, d_v, n_q, n_kv = h.d_head, h.d_v, h.n_head, h.n_kv_head

    def span(i: int, width: int) -> str:
        return f"{i * width} to {(i + 1) * width - 1}"

    if n_q == n_kv and d == d_v:
        return f"W_Q, W_K and W_V are {d_model}×{n_q * d} each. Head {h.head} uses their columns {span(h.head, d)}."
    kv = f"{d_model}×{n_kv * d}" if d == d_v else f"{d_model}×{n_kv * d} and {d_model}×{n_kv * d_v}"
    heads = f" ({plural(n_kv, 'K/V head')})" if n_kv != n_q else ""
    shared = f" (shared by heads {', '.join(map(str, h.group))})" if len(h.group) > 1 else ""
    columns = (
        f"columns {span(h.kv_head, d)} of W_K and W_V"
        if d == d_v
        else f"columns {span(h.kv_head, d)} of W_K and {span(h.kv_head, d_v)} of W_V"
    )
    return (
        f"W_Q is {d_model}×{n_q * d}, W_K and W_V {kv}{heads}. Head {h.head} uses columns {span(h.head, d)} of "
        f"W_Q; the K/V head it reads, {h.kv_head}{shared}, {columns}."
    )


def output_projection(traced: Traced, page: Page) -> list[Any]:
    """The head's rows of W_O: what its output adds for the query, the first feature written out."""
    from rich.text import Text

    h = traced.explained
    assert h is not None
    p, query = page.precision, page.inputs.queries[0]
    d_v, d_model = h.w_o.shape
    rows = f"{h.head * d_v} to {(h.head + 1) * d_v - 1}"
    bias = ", plus W_O's bias b_o (the heads' together)" if h.b_o is not None else ""
    return [
        page.heading(
            "What the head adds: o W_O",
            f"W_O is {h.n_head * d_v}×{d_model}: the heads' outputs side by side times W_O. Head {h.head}'s "
            f"{d_v} numbers meet rows {rows} of it: times those rows, they are what the head adds to the attention "
            f"output of {query}. Every head's share{bias} is what attention adds to the residual stream.",
        ),
        Text(
            "\n".join(
                [
                    f"o of {query} = {vector(h.attended, p, SHOWN)} (the model's own output of this head)",
                    projected_feature(f"added_{query}[0]", h.attended, h.w_o[:, 0], None, 0, p),
                    f"added by head {h.head} = {vector(h.projected, p, SHOWN)} ({d_model} numbers)",
                ]
            )
        ),
    ]
