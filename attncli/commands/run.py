"""``attn run``: attention on Q, K and V from files."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from attncli.commands.common import (
    MATRIX_FORMATS, Emitted, FormatOption, PrecisionOption, Result,
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


# Options shared with commands that take the same inputs (explain).
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
    files: Annotated[list[str], typer.Argument(
        metavar="FILE...", show_default=False,
        help="One bundle (YAML, JSON or NPZ with entries q, k, v and optionally mask) or three "
             "files Q K V: CSV, TSV, NPY, YAML or JSON. '-' reads one of them from stdin.",
    )],
    mask: MaskOption = None,
    causal: CausalOption = False,
    causal_align: AlignOption = None,
    scale: ScaleOption = None,
    temperature: TemperatureOption = 1.0,
    similarity: SimilarityOption = Similarity.dot,
    fmt: FormatOption = None,
    emit_which: Annotated[Emit, typer.Option(
        "--emit", help="The matrix csv/tsv/npy write: output (n_q×d_v) or weights (n_q×n_k).")] = Emit.output,
    precision: PrecisionOption = 3,
) -> None:
    """Compute softmax(QKᵀ/√d_k)V on matrices from files.

    On a terminal: a heatmap of the weights (queries down, keys across) and the
    outputs. In a pipe: one JSON object with queries, keys, weights, output and
    scale. Rows are vectors: Q is n_q×d_k, K is n_k×d_k, V is n_k×d_v.
    """
    problem = load_problem(files, mask)
    options = dict(scale=scale, temperature=temperature, similarity=similarity.value,
                   causal=causal_setting(causal, causal_align))
    if emit_which is Emit.output and choose_format(fmt) in MATRIX_FORMATS:
        # Only the output is written: the blocked kernel never holds the weights.
        emit(Result({}, None, {"output": output_matrix(problem, compute_output(problem, **options))}), fmt)
        return
    steps = compute(problem, **options)
    emit(run_result(problem, steps, precision, options), fmt, emit_which.value)


class Problem:
    """Q, K, V (and a mask) as read, with the labels to show them by."""

    def __init__(self, q, k, v, mask=None, mask_source=None):
        self.q, self.k, self.v, self.mask, self.mask_source = q, k, v, mask, mask_source

    @property
    def queries(self) -> list[str]:
        return self.q.row_labels or [f"q{i}" for i in range(self.q.shape[0])]

    @property
    def keys(self) -> list[str]:
        return self.k.row_labels or self.v.row_labels or [f"k{i}" for i in range(self.k.shape[0])]

    @property
    def columns(self) -> list[str]:
        return self.v.col_labels or [f"d{i}" for i in range(self.v.shape[1])]


def load_problem(files: list[str], mask_file: Optional[str]) -> Problem:
    """Read one bundle or three files, and the mask."""
    from attncli.readers import read_bundle

    if len(files) not in (1, 3):
        raise UsageError(f"expected one bundle file or three files Q K V, got {len(files)}")
    check_stdin_once([*files, mask_file])
    mask = None
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
        mask = entries.get("mask")
    else:
        q, k, v = (read_matrix_arg(f) for f in files)
    if mask_file is not None:
        mask = read_matrix_arg(mask_file, mask=True)
    return Problem(q, k, v, mask, mask_file or (files[0] if mask is not None else None))


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
    }

    def view():  # Rich is imported only when a table is shown
        from rich.text import Text

        from attncli.render import heatmap, legend, number_table, stack

        header = Text.assemble(
            ("attention ", "bold"),
            f"Q {n_q}×{d_k} · K {n_k}×{d_k} · V {n_k}×{d_v} → output {n_q}×{d_v}\n",
            describe(steps, d_k, options),
        )
        top = float(steps.weights.max())
        return stack(
            header,
            heatmap(steps.weights, problem.queries, problem.keys, precision=precision,
                    title="weights = softmax(scores), each row sums to 1", allowed=steps.allowed),
            legend(top, precision),
            number_table(steps.output, problem.queries, problem.columns, precision=precision,
                         title="output = weights · V"),
        )
    matrices = {
        "output": output_matrix(problem, steps.output),
        "weights": Emitted(steps.weights, q.row_labels, k.row_labels or v.row_labels),
    }
    return Result(data, view, matrices)
