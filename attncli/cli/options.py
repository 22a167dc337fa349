"""Every option and argument more than one command takes, declared once as an
``Annotated`` alias (help text, flag names, defaults), with the choices they offer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.emit import MATRIX_FORMATS, Format
from attncli.core.options import CAUSAL_ALIGNS, SIMILARITIES

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions


# The choices Typer offers, made from the core's own names (one Similarity, one alignment).
Similarity = Enum("Similarity", {name: name for name in SIMILARITIES}, type=str)  # type: ignore[misc]
Align = Enum("Align", {name.replace("-", "_"): name for name in CAUSAL_ALIGNS}, type=str)  # type: ignore[misc]


class Emit(str, Enum):
    """The matrix csv/tsv/npy write: each command's result says which it has."""

    output = "output"
    weights = "weights"
    q = "q"
    k = "k"
    v = "v"


# Arguments and options shared with commands that take the same inputs (explain).
FilesArgument = Annotated[list[str], typer.Argument(
    metavar="FILE...", show_default=False,
    help="One bundle (YAML, JSON or NPZ with entries q, k, v and optionally mask) or three "
         "files Q K V: CSV, TSV, NPY, YAML or JSON. '-' reads one of them from stdin. "
         "A bundle entry 'rgb: true' says rows of 3 numbers are RGB colours.",
)]
EmitOption = Annotated[Emit, typer.Option(
    "--emit", metavar="output|weights", help="The matrix csv/tsv/npy write: output (n_q×d_v) or weights (n_q×n_k).")]
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
    "--scale", metavar="S", help="Multiply the scores QKᵀ by this. Default 1/√d_k (1 with --similarity cosine).",
    show_default=False,
)]
TemperatureOption = Annotated[float, typer.Option(
    "--temperature", "-t", metavar="T",
    help="Divide the scaled scores by this: above 1 flattens the weights, below 1 sharpens them.",
)]
SimilarityOption = Annotated[Similarity, typer.Option(
    "--similarity",
    help="dot: QKᵀ. cosine: dot products of unit-length rows, so only directions count (seed 000's footnote).",
)]


FORMAT_NAMES = ", ".join(f.value for f in Format)  # from the writers' registry: "table, json, csv, tsv, npy"
MATRIX_FORMAT_NAMES = "/".join(f.value for f in MATRIX_FORMATS)  # "csv/tsv/npy"
FormatOption = Annotated[
    Format | None,
    typer.Option(
        "--format", "-f",
        help=f"{FORMAT_NAMES}. Default: table on a terminal, json in a pipe. "
             f"{MATRIX_FORMAT_NAMES} write the one matrix chosen by --emit.",
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


# --- the attention options, declared once --------------------------------------------------------


@dataclass
class AttentionFlags:
    """The attention options as typed on the command line; ``build`` makes them
    the core's ``AttentionOptions`` once the mask file is read."""

    mask: str | None = None  # a file: which keys each query may attend to
    causal: bool = False
    causal_align: Align | None = None
    scale: float | None = None
    temperature: float = 1.0
    similarity: Similarity = Similarity("dot")

    def build(self, mask: Any = None) -> AttentionOptions:
        """AttentionOptions from these flags and the mask as read (a Matrix, or None)."""
        from attncli.core.options import AttentionOptions, split_mask

        allowed, bias = split_mask(None if mask is None else mask.values)
        if self.causal_align is not None:
            causal = self.causal_align.value
        else:
            causal = "top-left" if self.causal else None
        return AttentionOptions(scale=self.scale, temperature=self.temperature, similarity=self.similarity.value,
                                causal=causal, mask=allowed, bias=bias)


FROM_OPTIONS = AttentionFlags()  # the placeholder default of ``attention``: @attention_options fills it in

# Each attention option once: its Annotated alias and its default, in the order help shows them.
ATTENTION_OPTIONS: dict[str, tuple[Any, Any]] = {
    "mask": (MaskOption, None),
    "causal": (CausalOption, False),
    "causal_align": (AlignOption, None),
    "scale": (ScaleOption, None),
    "temperature": (TemperatureOption, 1.0),
    "similarity": (SimilarityOption, Similarity("dot")),
}


def attention_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the attention options (all, or those ``names``).

    The command declares one parameter ``attention: AttentionFlags``; on the
    command line it becomes these options, in its place, and the command is
    called with the flags gathered into one ``AttentionFlags``::

        @attention_options()
        def run(files: FilesArgument, attention: AttentionFlags = FROM_OPTIONS, fmt: FormatOption = None): ...

    Adding an attention option to every command is one entry in ATTENTION_OPTIONS
    (and a field of AttentionFlags).
    """
    from attncli.cli.groups import option_group

    return option_group("attention", AttentionFlags, ATTENTION_OPTIONS, names or tuple(ATTENTION_OPTIONS))
