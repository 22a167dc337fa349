"""Every option and argument more than one command takes, declared once as an
``Annotated`` alias (help text, flag names, defaults), with the choices they offer."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from attncli.cli.emit import Format


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
MaskOption = Annotated[str | None, typer.Option(
    "--mask", metavar="FILE",
    help="Which keys each query may attend to: an n_q×n_k (or 1×n_k) matrix. Booleans or 0/1 "
         "cells: 1 = may attend. Other numbers are added to the scaled scores (-inf forbids).",
)]
CausalOption = Annotated[bool, typer.Option(
    "--causal", help="Query i attends only to keys 0..i (top-left aligned, as PyTorch is_causal and JAX).",
)]
AlignOption = Annotated[Align | None, typer.Option(
    "--causal-align",
    help="Causal alignment when n_q ≠ n_k (implies --causal). bottom-right: the last query sees "
         "every key, as when new tokens follow cached ones.",
    show_default=False,
)]
ScaleOption = Annotated[float | None, typer.Option(
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


FormatOption = Annotated[
    Format | None,
    typer.Option(
        "--format", "-f",
        help="table, json, csv, tsv or npy. Default: table on a terminal, json in a pipe. "
             "csv/tsv/npy write the one matrix chosen by --emit.",
        show_default=False,
    ),
]
SvgOption = Annotated[str | None, typer.Option(
    "--svg", metavar="FILE", show_default=False,
    help="Also save the terminal view as an SVG picture, whatever --format writes to stdout.",
)]
HtmlOption = Annotated[str | None, typer.Option(
    "--html", metavar="FILE", show_default=False,
    help="Also save the terminal view as a standalone HTML page, whatever --format writes to stdout.",
)]
PrecisionOption = Annotated[
    int, typer.Option("--precision", "-p", min=0, max=17, help="Decimals shown in tables (data formats are exact).")
]


# Options of commands that turn words into vectors (lookup, self).
VectorsOption = Annotated[str | None, typer.Option(
    "--vectors", metavar="FILE", show_default=False,
    help="Your own word vectors: GloVe text, word2vec/fastText text or binary, .npz, or .npy "
         "with --words. Read only until every word needed is found. Default: the bundled "
         "GloVe 6B 50d table (140,000 words).",
)]
WordsOption = Annotated[str | None, typer.Option(
    "--words", metavar="FILE", show_default=False,
    help="For a .npy --vectors matrix: its words, one per line, in row order.",
)]
