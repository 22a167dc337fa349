"""The terminal views of ``attn trace``, built only when shown: the header (the
family, sizes, grouped-query heads and each layer's attention as the core says
it), the overview grid, the heatmaps, where one token looks, the head
summaries, and a decoder's next-token prediction and generated text. A pair a
decoder's causal attention (or window) forbids is drawn as forbidden (a dash,
a blank cell), never as 0.00."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.text import plural

if TYPE_CHECKING:
    from rich.console import RenderableType

    from attncli.cli.trace_run import Traced
    from attncli.core.options import AttentionOptions
    from attncli.output.heatmap import ViewStyle

QUERY_TOKEN_WIDTH = 10  # characters of a token in the --query grid (longer ones shortened, with a legend)


def layer_ranges(layers: list[int]) -> str:
    """[0, 1, 2, 5] -> 'layers 0–2, 5'; [3] -> 'layer 3'."""
    runs: list[tuple[int, int]] = []
    for i in layers:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    text = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)
    return ("layer " if len(layers) == 1 else "layers ") + text


def heads_text(traced: Traced) -> str:
    """'9 heads (GQA: 9 query heads / 3 key-value heads)', or '12 heads'."""
    config = traced.model.config
    kv = traced.attention[0].shape.n_kv_head if traced.attention else config.n_head
    gqa = f" (GQA: {config.n_head} query heads / {kv} key-value heads)" if kv != config.n_head else ""
    return f"{config.n_head} heads{gqa}"


def layer_options(traced: Traced) -> list[tuple[int, AttentionOptions, int, int]]:
    """(layer, its attention options, d_k, query heads) of every layer of the model: a
    decoder's from its conventions, an encoder's plain attention (scale 1/√d_k, no mask)."""
    from attncli.core.options import AttentionOptions

    if traced.attention:
        return [(la.layer, la.options, la.shape.head_dim, la.shape.n_head) for la in traced.attention]
    config = traced.model.config
    return [(i, AttentionOptions(), config.d_model // config.n_head, config.n_head) for i in range(config.n_layer)]


def settings_groups(traced: Traced) -> list[tuple[list[int], str, str]]:
    """The model's layers grouped by their attention as the core says it (``describe.settings_line``):
    (layers, the settings' words, the config fields they came from)."""
    from attncli.cli.describe import call_of, settings_line

    groups: list[tuple[list[int], str, str]] = []
    n = len(traced.tokens)
    derived = {la.layer: la.derived for la in traced.attention}
    for layer, options, d_k, n_head in layer_options(traced):
        line = settings_line(options, call_of((n_head, n, d_k), (n, d_k)))
        fields = " · ".join(f"{d.setting} from {d.field}" for d in derived.get(layer, ()) if d.field)
        if groups and groups[-1][1] == line and groups[-1][2] == fields:
            groups[-1][0].append(layer)
        else:
            groups.append(([layer], line, fields))
    return groups


def header(traced: Traced) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    model, config = traced.model, traced.model.config
    kind = model.family.kind
    parts: list[RenderableType] = [
        Text.assemble(
            ("trace ", "bold"),
            f"{model.name} · {model.family.name}, {config.n_layer} layers × {heads_text(traced)}, "
            f"d_model {config.d_model} · {plural(len(traced.tokens), 'token')}"
            + (f" ({traced.prompt_length} of the text, {len(traced.generated)} generated)" if traced.generated else "")
            + ("" if kind == "encoder" else f" · a {kind}"),
        )
    ]
    for layers, line, fields in settings_groups(traced):
        every = len(layers) == config.n_layer
        parts.append(Text(f"{'every layer' if every else layer_ranges(layers)}: {line}"))
        if fields:
            parts.append(Text(f"  ({fields})", style="dim"))
    how = "layers and heads count from 0; weights = softmax(QKᵀ/√d_k) of each head"
    if traced.decoder:
        how += "; – or a blank: a pair causal attention (or the window) forbids, not a weight of 0"
    parts.append(Text(how, style="dim"))
    return Group(*parts)


def head_names(traced: Traced) -> list[str]:
    """The names along the head axis of the weights: 'head 3', or the aggregate's."""
    if traced.aggregate == "rollout":
        return [f"rollout of {plural(len(traced.heads), 'head')}"]
    if traced.aggregate is not None:
        return [f"{traced.aggregate} of {plural(len(traced.heads), 'head')}"]
    return [f"head {h}" for h in traced.heads]


def overview(traced: Traced, precision: int, style: ViewStyle) -> RenderableType:
    """Every selected head as a small heatmap, a row of heads per layer (bertviz's model view)."""
    from rich.console import Group
    from rich.text import Text

    from attncli.output.compact import HeatmapGrid, scaled
    from attncli.output.heatmap import scale_text
    from attncli.output.palette import Legend

    top = style.scale(traced.weights)
    allowed = None if traced.allowed is None else traced.allowed[:, None]
    short = [f"h{h}" for h in traced.heads] if traced.aggregate is None else [traced.aggregate]
    grid = HeatmapGrid(scaled(traced.weights, allowed, top), [f"L{layer}" for layer in traced.layers], short)
    tokens = " · ".join(f"{j} {token}" for j, token in enumerate(traced.shown(traced.keys)))
    what = (
        "every head of every layer (L0 = layer 0, h0 = head 0)" if traced.aggregate is None else head_names(traced)[0]
    )
    return Group(
        Text(f"{what}: queries down, keys across, tokens in order", style="bold"),
        grid,
        Legend(top, scale_text(top, precision, style), shades=True),
        Text(f"tokens: {tokens}", style="dim"),
    )


def heatmaps(traced: Traced, precision: int, style: ViewStyle) -> list[RenderableType]:
    """Each selected head (or aggregate) in full, forbidden pairs drawn as such; with
    --query, the query's row and beneath it the other tokens' mean on each key (in
    the top view, the others' mean on the query's top keys, in a line)."""
    import numpy as np
    from rich.console import Group
    from rich.text import Text

    from attncli.output.blocks import fmt
    from attncli.output.render import heatmap
    from attncli.output.topk import top_keys

    shown = np.round(traced.weights, precision)  # tables: 0.00 rather than 3.19e-03 for a weight too small to matter
    rows, cols = traced.shown(traced.rows), traced.shown(traced.keys)
    out: list[RenderableType] = []
    for a, layer in enumerate(traced.layers):
        for b, name in enumerate(head_names(traced)):
            w, allowed = shown[a, b], None if traced.allowed is None else traced.allowed[a]
            labels: list[Any] = list(rows)
            title = f"layer {layer} · {name}"
            other = None if traced.others is None else traced.others[a, b]
            if other is not None and style.view != "top":
                w = np.vstack([w, np.round(np.nan_to_num(other), precision)])
                mine = np.ones(w.shape[1:], bool) if allowed is None else allowed[0]
                allowed = np.vstack([mine, ~np.isnan(other)])
                labels.append("(the others' mean)")
            drawn = heatmap(w, labels, cols, precision=precision, style=style, title=title, allowed=allowed)
            if other is not None and style.view == "top":  # the others' mean on the same keys, not their own top
                keys = top_keys(traced.weights[a, b], allowed, style.top)[0].tolist()
                said = [f"{cols[k]} {'–' if np.isnan(other[k]) else fmt(float(other[k]), precision)}" for k in keys]
                drawn = Group(drawn, Text("the others' mean on the same keys: " + " · ".join(said), style="dim"))
            out.append(drawn)
    return out


def query_grid(traced: Traced, precision: int, style: ViewStyle) -> RenderableType:
    """Where one token looks: heads down, layers across; each cell is the key it
    attends to most in that head and the weight, on the weight's colour, and with
    --query's others the mean weight the other tokens give that key. Layers wrap
    into blocks rather than cutting a cell; long tokens are shortened the same way
    everywhere, with a legend."""
    from rich.console import Group
    from rich.text import Text

    from attncli.output.blocks import ColumnBlocks, fmt
    from attncli.output.heatmap import scale_text
    from attncli.output.labels import abbreviate, legend
    from attncli.output.palette import HeatCell, Legend

    w = traced.weights[:, :, 0, :]  # [layers, heads, keys]
    top = style.scale(w)
    keys = traced.shown(traced.keys)
    names = abbreviate(keys, QUERY_TOKEN_WIDTH)
    body = []
    for b, head in enumerate(head_names(traced)):
        cells = []
        for a in range(len(traced.layers)):
            k = int(w[a, b].argmax())
            weight = float(w[a, b, k])
            text = f"{names[k]} {fmt(weight, precision)}"
            if traced.others is not None:
                other = float(traced.others[a, b, k])
                text += " (–)" if other != other else f" ({fmt(other, precision)})"
            cells.append(HeatCell(text, weight / top))
        body.append((head, cells))
    assert traced.query is not None  # called only with --query
    token = traced.tokens[traced.query]
    parts: list[RenderableType] = [
        Text(f"where {token!r} (token {traced.query}) looks: the token it attends to most, and how much", style="bold")
    ]
    if traced.others is not None:
        parts.append(
            Text("(in brackets: the mean weight the other tokens that may see that token give it)", style="dim")
        )
    parts += [
        ColumnBlocks([f"layer {layer}" for layer in traced.layers], body),
        Legend(top, scale_text(top, precision, style)),
    ]
    shortened = legend(keys, names)
    if shortened:
        parts.append(Text("shortened: " + " · ".join(f"{s} = {full}" for s, full in shortened), style="dim"))
    return Group(*parts)


SUMMARIES = (  # field of HeadSummaries, title, the top of its colour scale (None: ln n)
    ("entropy", "entropy of each row, in nats (0: all on one key; ln n: spread evenly)", None),
    ("largest", "the largest weight of each row", 1.0),
    ("first", "the share on the first token (the attention sink)", 1.0),
    ("previous", "the share on the token just before", 1.0),
)


def summary_view(traced: Traced, precision: int) -> RenderableType:
    """A layers × heads table of each summary, numbers on their colours."""
    import math

    from rich.console import Group
    from rich.text import Text

    from attncli.output.blocks import ColumnBlocks, fmt
    from attncli.output.palette import HeatCell
    from attncli.output.render import stack

    s = traced.summaries
    assert s is not None
    n = len(traced.tokens)
    why = f" (token 0, {traced.tokens[0]!r}, can attend only to itself)" if traced.decoder else ""
    parts: list[RenderableType] = [
        Text(f"head summaries, each averaged over the {plural(n - 1, 'query', 'queries')} after the first{why}")
    ]
    for name, title, top in SUMMARIES:
        values = getattr(s, name)
        scale = top or max(math.log(n), 1e-9)
        body = [
            (
                f"layer {layer}",
                [
                    HeatCell(fmt(float(values[layer, h]), precision), float(values[layer, h]) / scale)
                    for h in traced.heads
                ],
            )
            for layer in traced.layers
        ]
        parts.append(
            Group(
                Text(title + (f", ln {n} = {math.log(n):.2f}" if top is None else ""), style="bold"),
                ColumnBlocks([f"h{h}" for h in traced.heads], body),
            )
        )
    return stack(*parts)


def lens_view(traced: Traced, precision: int) -> RenderableType:
    """The logit lens: layers down, tokens across, each cell the likeliest next token
    on its probability's colour (0 to 1)."""
    from rich.console import Group
    from rich.text import Text

    from attncli.output.blocks import ColumnBlocks
    from attncli.output.palette import HeatCell

    reading = traced.lens
    assert reading is not None
    spell = traced.model.tokenizer.decode
    body = [
        (
            f"layer {layer}",
            [
                HeatCell(
                    _lens_token(spell([int(reading.ids[layer, i, 0])], skip_special_tokens=False)),
                    float(reading.probabilities[layer, i, 0]),
                )
                for i in traced.keys
            ],
        )
        for layer in traced.layers
    ]
    return Group(
        Text(
            "the logit lens: the likeliest next token after each token, read off each layer's output through "
            "the final norm and the output head (its colour: the probability, 0 to 1); the last layer's row "
            "is the model's own prediction",
            style="bold",
        ),
        ColumnBlocks([_lens_token(t) for t in traced.shown(traced.keys)], body),
    )


def _lens_token(token: str) -> str:
    """A token as a cell shows it: a space as ␣, other invisible characters by their escape."""
    shown = repr(token)[1:-1] if not token.isprintable() else token
    return shown.replace(" ", "␣") or "∅"


def next_view(traced: Traced, precision: int) -> RenderableType:
    """The likeliest next tokens after the last position (and --query's), with bars."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from attncli.output import terminal
    from attncli.output.render import bar

    parts: list[RenderableType] = []
    done = set()
    for p in traced.next:
        if p.position in done:  # --query is the last token
            continue
        done.add(p.position)
        if parts:
            parts.append(Text(""))
        parts.append(Text(f"next token after {traced.tokens[p.position]!r} (token {p.position}):", style="bold"))
        table = Table(show_edge=False, pad_edge=False, show_header=False, box=None)
        table.add_column("token", no_wrap=True)
        table.add_column("probability", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        for token, probability in zip(p.tokens, p.probabilities, strict=True):
            table.add_row(terminal.label(repr(token)), f"{probability:.{max(precision, 3)}f}", bar(probability))
        parts.append(table)
    return Group(*parts)


def generated_view(traced: Traced) -> RenderableType:
    """The text and what greedy decoding appended, marked."""
    from rich.text import Text

    prompt = "".join(traced.tokens[i] for i in traced.keys if i < traced.prompt_length)
    new = "".join(traced.tokens[i] for i in traced.keys if i >= traced.prompt_length)
    return Text.assemble(
        (f"generated ({plural(len(traced.generated), 'token')}, greedy): ", "bold"),
        prompt,
        (new, "bold underline"),
    )
