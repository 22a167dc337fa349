"""Every option and argument more than one command takes, declared once as an
``Annotated`` alias (help text, flag names, defaults), with the choices they offer."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.emit import MATRIX_FORMATS, Format
from attncli.core.options import CAUSAL_ALIGNS, SIMILARITIES
from attncli.errors import AttnError, UsageError
from attncli.vectors.table import UNKNOWN_POLICIES

if TYPE_CHECKING:
    from attncli.cli.settings import BundleSettings
    from attncli.core.options import AttentionOptions
    from attncli.readers import Matrix, TextSettings


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
    help="One bundle (YAML, JSON or NPZ with entries q, k, v and optionally mask or bias, and settings "
         "such as causal: true or scale: 1, which options given here override) or three "
         "files Q K V: CSV, TSV, NPY, YAML, JSON or JSON Lines. '-' reads one of them from stdin. "
         "A bundle entry 'rgb: true' says rows of 3 numbers are RGB colours.",
)]
EmitOption = Annotated[Emit, typer.Option(
    "--emit", metavar="[output|weights]", help="The matrix csv/tsv/npy write: output (n_q×d_v) or weights (n_q×n_k).")]
MaskOption = Annotated[str | None, typer.Option(
    "--mask", metavar="FILE",
    help="Which keys each query may attend to: an n_q×n_k (or 1×n_k) matrix of booleans, or of "
         "0/1 or true/false cells: 1 = may attend. Numbers to add to the scores go in --bias.",
)]
BiasOption = Annotated[str | None, typer.Option(
    "--bias", metavar="FILE",
    help="Numbers added to the scaled scores before softmax: an n_q×n_k (or 1×n_k) matrix; -inf "
         "forbids a pair. PyTorch's float attn_mask is such a bias: pass it here, not as --mask.",
)]
CausalOption = Annotated[bool, typer.Option(
    "--causal/--no-causal",
    help="Query i attends only to keys 0..i (top-left aligned, as PyTorch is_causal and JAX). "
         "--no-causal overrides a bundle's causal: true.",
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
    "--temperature", "-t",
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
Unknown = Enum("Unknown", {name: name for name in UNKNOWN_POLICIES}, type=str)  # type: ignore[misc]
UNKNOWN_IS_AN_ERROR = Unknown("error")  # the default of --unknown
UnknownOption = Annotated[Unknown, typer.Option(
    "--unknown",
    help="A word the vectors do not have: error (name it, and the nearest known word), skip (leave it out; "
         "a phrase is the mean of its known words) or zero (a vector of zeros). A note names the words.",
)]


# --- the attention options, declared once --------------------------------------------------------


FILE_OPTIONS = ("mask", "bias")  # attention options that name a file: in a bundle, entries rather than settings


@dataclass
class AttentionFlags:
    """The attention options as typed on the command line; ``build`` makes them
    the core's ``AttentionOptions`` once the mask and bias are read."""

    mask: str | None = None  # a file: which keys each query may attend to
    bias: str | None = None  # a file: numbers added to the scaled scores
    causal: bool = False
    causal_align: Align | None = None
    scale: float | None = None
    temperature: float = 1.0
    similarity: Similarity = Similarity("dot")
    given: frozenset[str] = frozenset()  # the options typed on the command line: they override a bundle

    def build(self, mask: Any = None, bias: Any = None) -> AttentionOptions:
        """AttentionOptions from these flags, a boolean mask (True = may attend) and an additive bias.
        A bias's -inf forbids its pair as the mask does, and is shown so (a dash, not a weight 0)."""
        import numpy as np

        from attncli.core.options import AttentionOptions

        if bias is not None and not np.isfinite(bias).all():
            finite = np.isfinite(bias)
            try:
                mask = finite if mask is None else mask & finite
                bias = np.where(finite, bias, 0.0)
            except ValueError:  # shapes that do not fit: the core names them
                pass
        if self.causal_align is not None:
            causal = self.causal_align.value
        else:
            causal = "top-left" if self.causal else None
        return AttentionOptions(scale=self.scale, temperature=self.temperature, similarity=self.similarity.value,
                                causal=causal, mask=mask, bias=bias)

    def with_settings(self, settings: BundleSettings) -> AttentionFlags:
        """These flags with a bundle's settings for the options not given on the command line."""
        names = setting_names()
        annotations = {name: ATTENTION_OPTIONS[name][0] for name in names}

        def check(name: str, value: Any) -> None:  # the core's own checks (a positive scale, ...)
            replace(AttentionFlags(), **{name: value}).build()

        values = settings.fill({name: getattr(self, name) for name in names}, annotations, self.given, check)
        return replace(self, **values)


def setting_names() -> list[str]:
    """The attention options a bundle may set: every one but the files."""
    return [name for name in ATTENTION_OPTIONS if name not in FILE_OPTIONS]


# How to give a mask's numbers as a bias instead, by where the mask came from.
AS_BIAS = {"file": "give the file as --bias FILE", "entry": "name the entry bias"}


def allowed_cells(matrix: Matrix, source: str, given_as: str) -> Any:
    """A mask as read (``given_as`` "file" or bundle "entry") -> bool [rows,
    cols], True where a query may attend. A mask says where, never how much:
    a cell other than 0/1 (true/false) is refused, saying how to give it as a
    bias; a mask of numbers that are all 0 gets a note saying the same, as it
    is likely PyTorch's additive float mask (which 0 leaves unchanged)."""
    import numpy as np

    from attncli.cli.notes import note

    values = np.asarray(matrix.values)
    if values.dtype == bool:
        return values
    if not np.isin(values, (0, 1)).all():
        other = values[~np.isin(values, (0, 1))].flat[0]
        raise AttnError(f"the mask holds {other:g}, but a mask holds only 1 (may attend) and 0 (may not)",
                        source=source, hint=f"to add numbers to the scores, {AS_BIAS[given_as]}")
    if not values.any():
        note(f"the mask's cells are all 0, so no query may attend to any key; if it is PyTorch's float "
             f"attn_mask, which is added to the scores, {AS_BIAS[given_as]}", source)
    return values.astype(bool)


FROM_OPTIONS = AttentionFlags()  # the placeholder default of ``attention``: @attention_options fills it in

# Each attention option once: its Annotated alias and its default, in the order help shows them.
ATTENTION_OPTIONS: dict[str, tuple[Any, Any]] = {
    "mask": (MaskOption, None),
    "bias": (BiasOption, None),
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
    (and a field of AttentionFlags); it is then a bundle setting too.
    """
    return _gathered("attention", ATTENTION_OPTIONS, AttentionFlags, names or tuple(ATTENTION_OPTIONS))


# --- how text files are read, declared once -------------------------------------------------------

Decimal = Enum("Decimal", {"point": ".", "comma": ","}, type=str)  # type: ignore[misc]

HeaderOption = Annotated[bool | None, typer.Option(
    "--header/--no-header", show_default=False,
    help="CSV/TSV/text: the first row holds column names, or data. Default: names when none of its cells "
         "is a number or its first cell is empty; a first row 0,1,…,n-1 (pandas' names for unnamed "
         "columns) is names only when the rows below are not whole numbers, and a note says which.",
)]
LabelsOption = Annotated[bool | None, typer.Option(
    "--labels/--no-labels", show_default=False,
    help="CSV/TSV/text: the first column holds row labels, or numbers. Default: labels when none of its "
         "cells below the header is a number, or under an empty header cell (pandas' index).",
)]
DelimiterOption = Annotated[str | None, typer.Option(
    "--delimiter", metavar="CHAR", show_default=False,
    help="CSV/TSV/text: what separates cells: ',', ';', tab, space (runs of spaces) or another character. "
         "Default: Excel's sep= first line, else the first of tab, ';' and ',' found on every line.",
)]
DecimalOption = Annotated[Decimal | None, typer.Option(
    "--decimal", show_default=False,
    help="CSV/TSV/text: the decimal mark. Default: ',' only when commas do not separate the cells and "
         "numbers are written 1,5 (Excel in much of Europe), never 1.5.",
)]

DELIMITER_WORDS = {"tab": "\t", "\\t": "\t", "space": " ", "comma": ",", "semicolon": ";"}


@dataclass
class ReadFlags:
    """How to read CSV/TSV/text files, as typed on the command line; None: decided from each file."""

    header: bool | None = None
    labels: bool | None = None
    delimiter: str | None = None
    decimal: Decimal | None = None

    def settings(self) -> TextSettings:
        """The readers' TextSettings; a delimiter may be named (tab, space) or be one character."""
        from attncli.readers import TextSettings

        delimiter = self.delimiter
        if delimiter is not None:
            delimiter = DELIMITER_WORDS.get(delimiter.lower(), delimiter)
            if len(delimiter) != 1 or delimiter in '"\r\n' or delimiter.isalnum():
                raise UsageError(f"--delimiter {self.delimiter!r} is not a delimiter",
                                 hint="give one character such as ';' or '|', or tab or space")
        decimal = None if self.decimal is None else self.decimal.value
        if decimal is not None and delimiter == decimal:
            raise UsageError(f"--delimiter and --decimal are both {decimal!r}", hint="cells need another delimiter")
        return TextSettings(self.header, self.labels, delimiter, decimal)


FROM_READ_OPTIONS = ReadFlags()  # the placeholder default of ``reading``: @read_options fills it in

READ_OPTIONS: dict[str, tuple[Any, Any]] = {
    "header": (HeaderOption, None),
    "labels": (LabelsOption, None),
    "delimiter": (DelimiterOption, None),
    "decimal": (DecimalOption, None),
}


def read_options() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command that reads matrices the options saying how to read text
    files: its parameter ``reading: ReadFlags`` becomes ``--header/--no-header``,
    ``--labels/--no-labels``, ``--delimiter`` and ``--decimal``."""
    return _gathered("reading", READ_OPTIONS, ReadFlags, tuple(READ_OPTIONS))


def setting_flag(setting: str, value: Any) -> str:
    """How a reader's setting (a TextSettings field and value) is typed here:
    ("header", False) -> --no-header; ("delimiter", ";") -> --delimiter ';'."""
    if isinstance(value, bool):
        return f"--{setting}" if value else f"--no-{setting}"
    words = {"\t": "tab", " ": "space"}
    return f"--{setting} {words.get(value) or repr(value)}"


# --- gathering options into one typed parameter -----------------------------------------------------


def _gathered(parameter: str, table: dict[str, tuple[Any, Any]], flags: type,
              chosen: tuple[str, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator replacing the command's parameter ``parameter`` by the options
    ``chosen`` from ``table`` and calling it with them gathered into ``flags``
    (which, when it has a ``given`` field, learns which were typed on the command line)."""
    wants_given = "given" in {f.name for f in fields(flags)}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        # Typer passes the Click context to the one parameter typed typer.Context: the command's, or ours.
        own_context = next((name for name, hint in hints.items()
                            if isinstance(hint, type) and issubclass(hint, typer.Context)), None)
        context = own_context or "_context"
        parameters = []
        for param in inspect.signature(command).parameters.values():
            if param.name == parameter:
                for name in chosen:
                    alias, default = table[name]
                    parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=alias,
                                                        default=default))
                if wants_given and own_context is None:
                    parameters.append(inspect.Parameter(context, inspect.Parameter.KEYWORD_ONLY,
                                                        annotation=typer.Context))
            else:
                parameters.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                                                annotation=hints.get(param.name, param.annotation)))

        @functools.wraps(command)
        def with_flags(**values: Any) -> Any:
            gathered = {name: values.pop(name) for name in chosen}
            if wants_given:
                from attncli.cli.settings import given_on_command_line

                ctx = values[context] if own_context else values.pop(context)
                gathered["given"] = given_on_command_line(ctx, chosen)
            return command(**{parameter: flags(**gathered)}, **values)

        with_flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate
