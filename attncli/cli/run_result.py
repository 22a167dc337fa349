"""The result of attention on Q, K and V, as ``attn run`` writes it and
``attn explain`` builds on: its JSON, its terminal view (header, a heatmap and
an output table per (batch, head), what the outputs mean) and the maps its
pictures draw."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.describe import attention_data, call_of, settings_line
from attncli.cli.emit import Emitted, Result
from attncli.cli.model_options import model_data, model_line
from attncli.errors import UsageError
from attncli.text import plural

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.core.reference import Steps
    from attncli.output.heatmap import ViewStyle
    from attncli.output.maps import AttentionMaps

MAX_SLICES = 8  # (batch, head) heatmaps shown on a terminal unless --batch or --head choose


def slices(shape: tuple[int, ...], batch: int | None, head: int | None) -> list[tuple[int, int]]:
    """The (batch, head) pairs a view shows, for weights [..., H, n_q, n_k]; the
    leading axes before the heads count as one batch axis."""
    import math

    heads = shape[-3] if len(shape) > 2 else 1
    batches = math.prod(shape[:-3]) if len(shape) > 3 else 1
    for flag, value, count, what in (
        ("--batch", batch, batches, ("batch", "batches")),
        ("--head", head, heads, ("query head", "query heads")),
    ):
        if value is not None and value >= count:
            there = f"there {'is' if count == 1 else 'are'} {plural(count, *what)}"
            numbered = "the only one is 0" if count == 1 else f"they are numbered from 0 to {count - 1}"
            raise UsageError(f"{flag} {value} but {there}", hint=numbered)
    return [
        (b, h)
        for b in ([batch] if batch is not None else range(batches))
        for h in ([head] if head is not None else range(heads))
    ]


def slice_of(values: np.ndarray, b: int, h: int) -> np.ndarray:
    """[..., H, n, m] -> [n, m], batch b (the leading axes flattened) and head h."""
    if values.ndim == 2:
        return values
    return values.reshape(-1, *values.shape[-3:])[b, h]


def run_result(
    inputs: Inputs,
    steps: Steps,
    precision: int,
    batch: int | None = None,
    head: int | None = None,
    style: ViewStyle | None = None,
) -> Result:
    """JSON, table view and emittable matrices of one attention run."""
    from attncli.core.arrays import shape_text

    options = inputs.options
    call = call_of(steps.weights.shape[:-1] + (inputs.q.shape[-1],), inputs.k.shape)
    q, k, v = inputs.q, inputs.k, inputs.v
    shapes = {name: list(inputs.to_file_layout(m.values).shape) for name, m in (("q", q), ("k", k), ("v", v))}
    out_shape = tuple(inputs.to_file_layout(steps.output).shape)
    shown = slices(steps.weights.shape, batch, head)
    data = {
        "queries": inputs.queries,
        "keys": inputs.keys,
        "columns": inputs.columns,
        "weights": steps.weights,
        "output": inputs.to_file_layout(steps.output),
        **attention_data(options, call),
        **model_data(inputs.flags),
        "shapes": shapes,
        **({"layout": inputs.layout.value, "dtype": steps.output.dtype.name} if inputs.tensors else {}),
        **({} if inputs.tensors else colour_data(inputs, steps)),
    }

    def view() -> Any:  # Rich is imported only when a table or picture is shown
        from rich.text import Text

        from attncli.cli.guards import rows_sum
        from attncli.output.render import heatmap, number_table, stack

        layout = f" ({inputs.layout.value})" if inputs.tensors else ""
        header = Text.assemble(
            ("attention ", "bold"),
            f"Q {shape_text(tuple(shapes['q']))} · K {shape_text(tuple(shapes['k']))} · "
            f"V {shape_text(tuple(shapes['v']))} → output {shape_text(out_shape)}{layout}\n",
            f"{inputs.description}\n" if inputs.description else "",
            settings_line(options, call, steps.allowed),
            grouping(q.shape, k.shape),
            computed_in(inputs, steps),
            model_line(inputs.flags),
        )
        rows, _, key_headers = shown_labels(inputs)
        sums = rows_sum(options, *steps.weights.shape[-2:])
        parts: list[Any] = [header]
        for b, h in shown[:MAX_SLICES]:
            where = "" if not inputs.tensors else f"batch {b} · head {h}: "
            allowed = None if steps.allowed is None else slice_of(steps.allowed, b, h)
            parts += [
                heatmap(
                    slice_of(steps.weights, b, h),
                    rows,
                    key_headers,
                    precision=precision,
                    title=f"{where}weights = softmax(scores), {sums}",
                    allowed=allowed,
                    style=style,
                ),
                number_table(
                    slice_of(steps.output, b, h),
                    rows,
                    inputs.columns,
                    precision=precision,
                    title=f"{where}output = weights · V",
                ),
            ]
        if len(shown) > MAX_SLICES:
            parts.append(
                Text(
                    f"… and {len(shown) - MAX_SLICES} more (batch, head) pairs: choose with --batch "
                    "and --head; data formats (-f json, npy) hold them all",
                    style="dim",
                )
            )
        if not inputs.tensors:
            parts.append(readings(inputs, steps, precision))
        return stack(*parts)

    matrices = {
        "output": output_matrix(inputs, steps.output),
        "weights": Emitted(steps.weights, q.row_labels, k.row_labels or v.row_labels),
    }

    def maps() -> AttentionMaps:
        """The weights shown, for pictures: one head, or tensors' (batch, head) pairs as batches × heads."""
        import numpy as np

        from attncli.output.heatmap import ViewStyle
        from attncli.output.maps import AttentionMaps

        top = (style or ViewStyle()).scale(steps.weights)
        if not inputs.tensors:
            maps = AttentionMaps.single(
                steps.weights, inputs.queries, inputs.keys, steps.allowed, "attention weights", top
            )
            maps.explore = explore(inputs, steps)
            return maps
        batches, heads = sorted({b for b, _ in shown}), sorted({h for _, h in shown})

        def grid(values: np.ndarray) -> np.ndarray:  # [..., H, n_q, n_k] -> [batches, heads, n_q, n_k]
            return np.stack([np.stack([slice_of(values, b, h) for h in heads]) for b in batches])

        return AttentionMaps(
            grid(steps.weights),
            inputs.queries,
            inputs.keys,
            [f"batch {b}" for b in batches],
            [f"head {h}" for h in heads],
            None if steps.allowed is None else grid(steps.allowed),
            "attention weights",
            top,
            layer_axis="batch",
        )

    return Result(data, view, matrices, maps)


def explore(inputs: Inputs, steps: Steps) -> Any:
    """What the page needs to recompute the weights for another temperature and scale
    (``headview.Explore``): a matrix of at most EXPLORE_TOKENS queries and keys, with no
    setting the page does not redo (soft-cap, ALiBi, sinks); else None."""
    import numpy as np

    from attncli.output.headview import EXPLORE_TOKENS, Explore

    options = inputs.options
    n_q, n_k = steps.weights.shape[-2:]
    if inputs.tensors or max(n_q, n_k) > EXPLORE_TOKENS:
        return None
    if options.softcap is not None or options.uses_alibi or options.sinks is not None:
        return None
    forbidden = ~np.isfinite(steps.logits)
    said = "given" if options.scale is not None else "cosine" if options.similarity == "cosine" else None
    return Explore(
        steps.scores,
        inputs.v.values,
        inputs.columns,
        steps.scale,
        options.temperature,
        said or f"1/√{inputs.q.shape[-1]}",
        None if not forbidden.any() else ~forbidden,
        options.bias,
    )


def computed_in(inputs: Inputs, steps: Steps) -> str:
    """' · bfloat16 computed in float32', when the inputs' dtype is not the one computed in."""
    stored = sorted({m.values.dtype.name for m in (inputs.q, inputs.k, inputs.v)} - {steps.output.dtype.name})
    return f" · {'/'.join(stored)} computed in {steps.output.dtype.name}" if inputs.tensors and stored else ""


def grouping(q_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> str:
    """' · grouped-query: 4 query heads per K/V head', when K/V have fewer heads than Q."""
    if len(q_shape) < 3 or len(k_shape) < 3 or q_shape[-3] == k_shape[-3] or 1 in (q_shape[-3], k_shape[-3]):
        return ""
    group = q_shape[-3] // k_shape[-3]
    return f" · grouped-query: {group} query heads per K/V head"


def shown_labels(inputs: Inputs) -> tuple[list[Any], list[Any], list[Any]]:
    """(query row labels, key row labels, key column headers) for tables, with
    colour swatches when the rows are colours."""
    from attncli.output.render import swatched, swatched_headers

    keys = inputs.key_colours
    return (
        swatched(inputs.queries, inputs.query_colours),
        swatched(inputs.keys, keys),
        swatched_headers(inputs.keys, keys),
    )


def colour_data(inputs: Inputs, steps: Steps) -> dict[str, list[str]]:
    """``{"mix": ["#hex", ...]}``, each query's blend of the key colours, when keys are colours."""
    from attncli.output.colours import mix, to_hex

    keys = inputs.key_colours
    return {} if keys is None else {"mix": [to_hex(c) for c in mix(steps.weights, keys)]}


def readings(inputs: Inputs, steps: Steps, precision: int, rows: list[int] | None = None) -> Any:
    """What each query's output means, one line per query, when it means more
    than its numbers: shares of V's named columns ("48.8 % warm, 51.2 % cool")
    and, when the keys are colours, the colour their weights mix. None otherwise."""
    from rich.console import Group

    from attncli.output.colours import are_shares, mix, percentages, to_hex

    shares = inputs.v.col_labels is not None and are_shares(inputs.v.values)
    keys = inputs.key_colours
    if not shares and keys is None:
        return None
    queries = inputs.query_colours
    blends = mix(steps.weights, keys) if keys is not None else None
    from attncli.output.summary import first_lines

    shown, rest = first_lines(len(inputs.queries))
    lines = []
    for i in shown if rows is None else rows:
        parts: list = []
        if shares:
            parts += [" is ", (percentages(steps.output[i], inputs.columns, precision), "bold")]
        if blends is not None:
            parts += [";" if shares else "", " its weights mix the key colours into ", to_hex(blends[i])]
        lines.append(with_swatches(parts, inputs.queries[i], queries and queries[i], blends and blends[i]))
    return Group(*lines, *([rest] if rest and rows is None else []))


def with_swatches(parts: list[Any], label: str, colour: Any, blend: Any) -> Any:
    """A line about one query: ``label`` + ``parts``, with swatches before the
    query's label and before the mix (the last part) where colours show."""
    from rich.text import Text

    from attncli.output.blocks import IfColour
    from attncli.output.render import swatch

    plain = Text.assemble(label, *parts)
    if colour is None and blend is None:
        return plain
    head: list[Any] = [swatch(colour), " "] if colour is not None else []
    tail = [*parts[:-1], swatch(blend), " ", parts[-1]] if blend is not None else parts
    return IfColour(Text.assemble(*head, label, *tail), plain)


def output_matrix(inputs: Inputs, output: np.ndarray) -> Emitted:
    """The output as --emit writes it, in the files' layout: rows named as the queries, columns as V's."""
    return Emitted(inputs.to_file_layout(output), inputs.q.row_labels, inputs.v.col_labels)
