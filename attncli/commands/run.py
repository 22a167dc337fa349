"""``attn run``: attention on Q, K and V from files."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from attncli.commands.common import (
    Emitted, FormatOption, HtmlOption, MATRIX_FORMATS, PrecisionOption, Result, SvgOption,
    check_stdin_once, choose_format, emit, progress_bar, read_bytes, read_matrix_arg, source_name,
)
from attncli.errors import AttnError, UsageError

EXAMPLES = """\b
Examples:
  attn run samples/q.csv samples/k.csv samples/v.csv
  attn run samples/colors.yaml               # one bundle: q, k, v
  cat q.csv | attn run - k.csv v.csv | jq .output
  attn run q.npy k.npy v.npy -f npy --emit weights > w.npy
  attn run q.csv k.csv v.csv --causal --scale 0.5 --mask mask.csv
  attn run samples/colors.yaml --svg colors.svg --html colors.html
"""


class Similarity(str, Enum):
    dot = "dot"
    cosine = "cosine"


class Align(str, Enum):
    top_left = "top-left"
    bottom_right = "bottom-right"


class Emit(str, Enum):
    output = "output"
    weights = "weights"


# Arguments and options shared with commands that take the same inputs (explain).
FilesArgument = Annotated[list[str], typer.Argument(
    metavar="FILE...", show_default=False,
    help="One bundle (YAML, JSON or NPZ with entries q, k, v and optionally mask) or three "
         "files Q K V: CSV, TSV, NPY, YAML or JSON. '-' reads one of them from stdin. "
         "A bundle entry 'rgb: true' says rows of 3 numbers are RGB colours.",
)]
EmitOption = Annotated[Emit, typer.Option(
    "--emit", help="The matrix csv/tsv/npy write: output (n_q×d_v) or weights (n_q×n_k).")]
MaskOption = Annotated[Optional[str], typer.Option(
    "--mask", metavar="FILE",
    help="Which keys each query may attend to: an n_q×n_k (or 1×n_k) matrix. Booleans or 0/1 "
         "cells: 1 = may attend. Other numbers are added to the scaled scores (-inf forbids).",
)]
CausalOption = Annotated[bool, typer.Option(
    "--causal", help="Query i attends only to keys 0..i (top-left aligned, as PyTorch is_causal and JAX).",
)]
AlignOption = Annotated[Optional[Align], typer.Option(
    "--causal-align",
    help="Causal alignment when n_q ≠ n_k (implies --causal). bottom-right: the last query sees "
         "every key, as when new tokens follow cached ones.",
    show_default=False,
)]
ScaleOption = Annotated[Optional[float], typer.Option(
    "--scale", help="Multiply the scores QKᵀ by this. Default 1/√d_k (1 with --similarity cosine).",
    show_default=False,
)]
TemperatureOption = Annotated[float, typer.Option(
    "--temperature", "-t", help="Divide the scaled scores by this: above 1 flattens the weights, below 1 sharpens them.",
)]
SimilarityOption = Annotated[Similarity, typer.Option(
    "--similarity",
    help="dot: QKᵀ. cosine: dot products of unit-length rows, so only directions count (seed 000's footnote).",
)]


def run(
    files: FilesArgument,
    mask: MaskOption = None,
    causal: CausalOption = False,
    causal_align: AlignOption = None,
    scale: ScaleOption = None,
    temperature: TemperatureOption = 1.0,
    similarity: SimilarityOption = Similarity.dot,
    fmt: FormatOption = None,
    emit_which: EmitOption = Emit.output,
    precision: PrecisionOption = 3,
    svg: SvgOption = None, html: HtmlOption = None,
) -> None:
    """Compute softmax(QKᵀ/√d_k)V on matrices from files.

    On a terminal: a heatmap of the weights (queries down, keys across) and the
    outputs. In a pipe: one JSON object with queries, keys, weights, output and
    scale. Rows are vectors: Q is n_q×d_k, K is n_k×d_k, V is n_k×d_v.
    """
    problem = load_problem(files, mask)
    options = settings(scale, temperature, similarity, causal, causal_align)
    if emit_which is Emit.output and choose_format(fmt) in MATRIX_FORMATS and svg is None and html is None:
        # Only the output is written: the blocked kernel never holds the weights.
        emit(Result({}, None, {"output": output_matrix(problem, compute_output(problem, **options))}), fmt)
        return
    steps = compute(problem, **options)
    result = run_result(problem, steps, precision, options)
    emit(result, fmt, emit_which.value, svg=svg, html=html, title="attn run")


class Problem:
    """Q, K, V (and a mask) as read, with the labels to show them by."""

    def __init__(self, q, k, v, mask=None, mask_source=None, meta=None):
        self.q, self.k, self.v, self.mask, self.mask_source = q, k, v, mask, mask_source
        self.meta = meta or {}  # a bundle's plain settings: description, rgb

    @property
    def queries(self) -> list[str]:
        return self.q.row_labels or [f"q{i}" for i in range(self.q.shape[0])]

    @property
    def keys(self) -> list[str]:
        return self.k.row_labels or self.v.row_labels or [f"k{i}" for i in range(self.k.shape[0])]

    @property
    def columns(self) -> list[str]:
        return self.v.col_labels or [f"d{i}" for i in range(self.v.shape[1])]

    @property
    def query_colours(self):
        """Each query's colour (hex labels, or RGB rows when the bundle says ``rgb: true``), or None."""
        from attncli.colours import row_colours

        return row_colours(self.q.row_labels, self.q.values, self.meta.get("rgb") is True)

    @property
    def key_colours(self):
        """Each key's colour, or None when the keys are not colours."""
        from attncli.colours import row_colours

        return row_colours(self.k.row_labels or self.v.row_labels, self.k.values, self.meta.get("rgb") is True)


def load_problem(files: list[str], mask_file: Optional[str]) -> Problem:
    """Read one bundle or three files, and the mask."""
    from attncli.readers import read_bundle

    if len(files) not in (1, 3):
        raise UsageError(f"expected one bundle file or three files Q K V, got {len(files)}")
    check_stdin_once([*files, mask_file])
    mask, meta = None, {}
    if len(files) == 1:
        bundle = read_bundle(read_bytes(files[0]), source_name(files[0]))
        entries = {name.lower(): m for name, m in bundle.matrices.items()}
        missing = [n for n in ("q", "k", "v") if n not in entries]
        extra = sorted(set(entries) - {"q", "k", "v", "mask"})
        if missing or extra:
            what = f"has no {', '.join(missing)}" if missing else f"has an unexpected entry {extra[0]!r}"
            raise AttnError(f"the bundle {what}", source=source_name(files[0]),
                            hint="a bundle holds q, k and v, and optionally mask")
        q, k, v = entries["q"], entries["k"], entries["v"]
        mask, meta = entries.get("mask"), bundle.meta
    else:
        q, k, v = (read_matrix_arg(f) for f in files)
    if mask_file is not None:
        mask = read_matrix_arg(mask_file, mask=True)
    return Problem(q, k, v, mask, mask_file or (files[0] if mask is not None else None), meta)


def settings(scale: Optional[float], temperature: float, similarity: Similarity, causal: bool,
             causal_align: Optional[Align]) -> dict:
    """The attention options as ``compute`` and ``describe`` take them."""
    return dict(scale=scale, temperature=temperature, similarity=similarity.value,
                causal=causal_setting(causal, causal_align))


def causal_setting(causal: bool, align: Optional[Align]):
    if align is not None:
        return align.value
    return "top-left" if causal else False


def compute(problem: Problem, **options):
    from attncli.maths import attention_steps

    return attention_steps(
        problem.q.values, problem.k.values, problem.v.values,
        mask=None if problem.mask is None else problem.mask.values, **options,
    )


def compute_output(problem: Problem, **options):
    """The output alone, from the blocked kernel, with a progress bar on a terminal."""
    from attncli.maths import attention_blocked

    with progress_bar("attention") as progress:
        return attention_blocked(
            problem.q.values, problem.k.values, problem.v.values,
            mask=None if problem.mask is None else problem.mask.values, progress=progress, **options,
        )


def output_matrix(problem: Problem, output) -> Emitted:
    """The output as --emit writes it: rows named as the queries, columns as V's."""
    return Emitted(output, problem.q.row_labels, problem.v.col_labels)


def describe(steps, d_k: int, options: dict) -> str:
    """'scale 1/√3 = 0.5774' and the other settings in force, for the header."""
    if options.get("scale") is not None:
        parts = [f"scale {steps.scale:g}"]
    elif options.get("similarity") == "cosine":
        parts = ["cosine similarity", "scale 1"]
    else:
        parts = [f"scale 1/√{d_k} = {steps.scale:.4g}"]
    if options.get("temperature", 1) != 1:
        parts.append(f"temperature {options['temperature']:g}")
    if options.get("causal"):
        parts.append(f"causal ({options['causal']})")
    if steps.allowed is not None:
        parts.append(f"{int((~steps.allowed).sum())} of {steps.allowed.size} pairs masked")
    return " · ".join(parts)


def run_result(problem: Problem, steps, precision: int, options: dict) -> Result:
    """JSON, table view and emittable matrices of one attention run."""
    q, k, v = problem.q, problem.k, problem.v
    n_q, d_k = q.shape
    n_k, d_v = v.shape
    data = {
        "queries": problem.queries,
        "keys": problem.keys,
        "columns": problem.columns,
        "weights": steps.weights,
        "output": steps.output,
        "scale": steps.scale,
        "temperature": options["temperature"],
        "similarity": options["similarity"],
        "causal": options["causal"],
        "shapes": {"q": [n_q, d_k], "k": [n_k, d_k], "v": [n_k, d_v]},
        **colour_data(problem, steps),
    }

    def view():  # Rich is imported only when a table or picture is shown
        from rich.text import Text

        from attncli.render import heatmap, number_table, stack

        header = Text.assemble(
            ("attention ", "bold"),
            f"Q {n_q}×{d_k} · K {n_k}×{d_k} · V {n_k}×{d_v} → output {n_q}×{d_v}\n",
            describe(steps, d_k, options),
        )
        rows, _, key_headers = shown_labels(problem)
        return stack(
            header,
            heatmap(steps.weights, rows, key_headers, precision=precision,
                    title="weights = softmax(scores), each row sums to 1", allowed=steps.allowed),
            number_table(steps.output, rows, problem.columns, precision=precision,
                         title="output = weights · V"),
            readings(problem, steps, precision),
        )

    matrices = {
        "output": output_matrix(problem, steps.output),
        "weights": Emitted(steps.weights, q.row_labels, k.row_labels or v.row_labels),
    }
    return Result(data, view, matrices)


def shown_labels(problem: Problem):
    """(query row labels, key row labels, key column headers) for tables, with
    colour swatches when the rows are colours."""
    from attncli.render import swatched, swatched_headers

    keys = problem.key_colours
    return (swatched(problem.queries, problem.query_colours), swatched(problem.keys, keys),
            swatched_headers(problem.keys, keys))


def colour_data(problem: Problem, steps) -> dict:
    """``{"mix": ["#hex", ...]}``, each query's blend of the key colours, when keys are colours."""
    from attncli.colours import mix, to_hex

    keys = problem.key_colours
    return {} if keys is None else {"mix": [to_hex(c) for c in mix(steps.weights, keys)]}


def readings(problem: Problem, steps, precision: int, rows=None):
    """What each query's output means, one line per query, when it means more
    than its numbers: shares of V's named columns ("48.8 % warm, 51.2 % cool")
    and, when the keys are colours, the colour their weights mix. None otherwise."""
    from rich.console import Group

    from attncli.colours import are_shares, mix, percentages, to_hex

    shares = problem.v.col_labels is not None and are_shares(problem.v.values)
    keys = problem.key_colours
    if not shares and keys is None:
        return None
    queries = problem.query_colours
    blends = mix(steps.weights, keys) if keys is not None else None
    lines = []
    for i in range(len(problem.queries)) if rows is None else rows:
        parts: list = []
        if shares:
            parts += [" is ", (percentages(steps.output[i], problem.columns, precision), "bold")]
        if blends is not None:
            parts += [";" if shares else "", " its weights mix the key colours into ", to_hex(blends[i])]
        lines.append(with_swatches(parts, problem.queries[i], queries and queries[i],
                                   blends and blends[i]))
    return Group(*lines)


def with_swatches(parts: list, label: str, colour, blend):
    """A line about one query: ``label`` + ``parts``, with swatches before the
    query's label and before the mix (the last part) where colours show."""
    from rich.text import Text

    from attncli.render import IfColour, swatch

    plain = Text.assemble(label, *parts)
    if colour is None and blend is None:
        return plain
    head = [swatch(colour), " "] if colour is not None else []
    tail = [*parts[:-1], swatch(blend), " ", parts[-1]] if blend is not None else parts
    return IfColour(Text.assemble(*head, label, *tail), plain)
