"""The result of ``attn trace`` as it is written: the JSON object, the terminal
view (``trace_views.py``, built only when shown), the weights ``--format
npy/csv/tsv`` write, and the maps the pictures draw.

JSON: ``model`` (name, family, kind, layers, heads, kv_heads, d_model, window,
rope_theta), ``attention`` (each group of layers' settings as every attention
command writes them, from ``core.options.SAYINGS``), ``tokens``, ``layers``,
``heads``, ``queries`` and ``weights`` (layer × head × query × key, a pair the
model forbids ``null``), and as asked ``aggregate``, ``others``, ``next``,
``next_at_query``, ``generated``, ``summary``, ``lens`` (--lens: per layer
shown and token, the likeliest next tokens, ids and probabilities), ``explain``
(--explain: the query's steps through the head, ``trace_explained.explain_data``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.emit import Emitted, Result

if TYPE_CHECKING:
    from rich.console import RenderableType

    from attncli.cli.trace_run import Traced
    from attncli.models import Prediction
    from attncli.output.heatmap import ViewStyle
    from attncli.output.maps import AttentionMaps


def model_data(traced: Traced) -> dict[str, Any]:
    """What the model is, in JSON: its family and sizes, its window and RoPE θ."""
    config, attention = traced.model.config, traced.attention
    windows = [la.options.window for la in attention if la.options.window is not None]
    thetas = [None if la.options.rope is None else la.options.rope.theta for la in attention]
    data: dict[str, Any] = {
        "name": traced.model.name,
        "family": traced.model.family.name,
        "kind": traced.model.family.kind,
        "layers": config.n_layer,
        "heads": config.n_head,
        "kv_heads": attention[0].shape.n_kv_head if attention else config.n_head,
        "d_model": config.d_model,
        # attn's window (left, right) of the layers that slide; the layers themselves
        "window": list(windows[0]) if windows and len(set(windows)) == 1 else [list(w) for w in windows] or None,
    }
    if windows and len(windows) < len(attention):
        data["window_layers"] = [la.layer for la in attention if la.options.window is not None]
    data["rope_theta"] = thetas[0] if len(set(thetas)) == 1 else thetas or None  # one number, or one per layer
    return data


def attention_groups(traced: Traced) -> list[dict[str, Any]]:
    """Each group of layers with the same attention, as ``describe.attention_data`` writes it."""
    from attncli.cli.describe import attention_data, call_of
    from attncli.cli.trace_views import layer_options

    groups: list[dict[str, Any]] = []
    n = len(traced.tokens)
    for layer, options, d_k, n_head in layer_options(traced):
        data = attention_data(options, call_of((n_head, n, d_k), (n, d_k)))
        if groups and {k: v for k, v in groups[-1].items() if k != "layers"} == data:
            groups[-1]["layers"].append(layer)
        else:
            groups.append({"layers": [layer], **data})
    return groups


def prediction_data(p: Prediction) -> dict[str, Any]:
    return {"position": p.position, "tokens": p.tokens, "ids": p.ids, "probabilities": p.probabilities}


def trace_data(traced: Traced) -> dict[str, Any]:
    """The JSON object."""
    import numpy as np

    keys = traced.keys
    data: dict[str, Any] = {
        "model": model_data(traced),
        "attention": attention_groups(traced),
        "tokens": traced.shown(keys),
        "layers": traced.layers,
        "heads": traced.heads,
    }
    if traced.lens is not None:
        data["lens"] = lens_data(traced)
    elif traced.summaries is not None:
        s = traced.summaries
        index = np.ix_(traced.layers, traced.heads)
        data["summary"] = {
            "queries": len(traced.tokens) - 1,  # each number is a mean over the queries after the first
            **{name: getattr(s, name)[index] for name in ("entropy", "largest", "first", "previous")},
        }
    else:
        if traced.aggregate is not None:
            data["aggregate"] = traced.aggregate
        data["queries"] = [keys.index(r) for r in traced.rows]  # rows of weights, as positions in tokens
        w = traced.weights
        if traced.allowed is not None:  # a pair the model forbids is null, not 0
            w = np.where(traced.allowed[:, None], w, np.float32(np.nan))
        data["weights"] = w  # [layers][heads][queries][tokens]
        if traced.others is not None:
            data["others"] = traced.others  # [layers][heads][tokens]; null where no other token may see the key
    if traced.decoder:
        shown = {p: i for i, p in enumerate(keys)}
        last = [p for p in traced.next if p.position == len(traced.tokens) - 1]
        for name, found in (("next", last[:1]), ("next_at_query", traced.next[1:])):
            for p in found:
                data[name] = {**prediction_data(p), "position": shown.get(p.position, p.position)}
        if traced.generated:
            data["generated"] = traced.shown(traced.generated)
    if traced.explained is not None:
        from attncli.cli.trace_explained import explain_data

        data["explain"] = explain_data(traced)
    return data


def lens_data(traced: Traced) -> dict[str, Any]:
    """--lens in JSON: [layers shown][tokens shown][the likeliest first] of tokens, ids, probabilities."""
    import numpy as np

    reading = traced.lens
    assert reading is not None
    index = np.ix_(traced.layers, traced.keys)
    ids = reading.ids[index]  # [layers, tokens, top]
    spell = traced.model.tokenizer.decode
    return {
        "after": "each layer's output through the final norm and the output head",
        "tokens": [[[spell([int(i)], skip_special_tokens=False) for i in cell] for cell in row] for row in ids],
        "ids": ids,
        "probabilities": reading.probabilities[index],
    }


def trace_result(traced: Traced, *, explicit: bool, precision: int, style: ViewStyle) -> Result:
    """JSON, the table view and the emittable weights of one trace."""

    def view() -> RenderableType:  # Rich is imported only when a table or picture is shown
        from rich.text import Text

        from attncli.cli import trace_views as v
        from attncli.output.render import stack

        body: list[RenderableType]
        if traced.explained is not None:
            from attncli.cli.trace_explained import explained_view

            return stack(
                explained_view(traced, precision, style), *([v.next_view(traced, precision)] if traced.next else [])
            )
        if traced.lens is not None:
            body = [v.lens_view(traced, precision)]
        elif traced.summaries is not None:
            body = [v.summary_view(traced, precision)]
        elif traced.query is not None and not explicit:
            body = [v.query_grid(traced, precision, style)]
        elif explicit:
            body = v.heatmaps(traced, precision, style)
        else:
            body = [
                v.overview(traced, precision, style),
                Text("one head: --layer L --head H · one token in every head: --query WORD", style="dim"),
            ]
        after = [v.next_view(traced, precision)] if traced.next else []
        if traced.generated:
            after.append(v.generated_view(traced))
        return stack(v.header(traced), *body, *after)

    matrices = {}
    weighed = traced.summaries is None and traced.lens is None  # --summary and --lens keep no weights
    if weighed:
        w = traced.weights
        one = w[0, 0] if w.shape[:2] == (1, 1) else w
        rows, cols = traced.shown(traced.rows), traced.shown(traced.keys)
        matrices["weights"] = Emitted(one, rows if one.ndim == 2 else None, cols if one.ndim == 2 else None)

    def maps() -> AttentionMaps | None:
        from attncli.cli.trace_views import head_names
        from attncli.output.maps import AttentionMaps

        if not weighed:  # a table of numbers: pictures of the terminal view only
            return None
        name = traced.model.name
        return AttentionMaps(
            traced.weights,
            traced.shown(traced.rows),
            traced.shown(traced.keys),
            [f"layer {layer}" for layer in traced.layers],
            head_names(traced),
            None if traced.allowed is None else traced.allowed[:, None],
            f"{traced.model.family.name} attention ({name if len(name) <= 40 else '…' + name[-39:]})",
            style.scale(traced.weights),
        )

    return Result(trace_data(traced), view, matrices, maps)
