"""Every option and argument more than one command takes, declared once as an
``Annotated`` alias (help text, flag names, defaults), with the choices they offer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.emit import MATRIX_FORMATS, Format
from attncli.cli.paths import READS, WRITES
from attncli.core.options import CAUSAL_ALIGNS, ROPE_STYLES, SIMILARITIES
from attncli.errors import AttnError, UsageError
from attncli.vectors.table import UNKNOWN_POLICIES

if TYPE_CHECKING:
    from attncli.cli.settings import BundleSettings
    from attncli.core.options import AttentionOptions
    from attncli.readers import Matrix, TextSettings


# The choices Typer offers, made from the core's own names (one Similarity, one alignment).
Similarity = Enum("Similarity", {name: name for name in SIMILARITIES}, type=str)  # type: ignore[misc]
Align = Enum("Align", {name.replace("-", "_"): name for name in CAUSAL_ALIGNS}, type=str)  # type: ignore[misc]
RopeStyle = Enum("RopeStyle", {name: name for name in ROPE_STYLES}, type=str)  # type: ignore[misc]


class Layout(str, Enum):
    """How a tensor file orders its last three axes."""

    bhsd = "bhsd"  # [batch, heads, seq, dim]: PyTorch's scaled_dot_product_attention, attn's own order
    bshd = "bshd"  # [batch, seq, heads, dim]: FlashAttention, xFormers


class Emit(str, Enum):
    """The matrix csv/tsv/npy write: each command's result says which it has
    (asking for another is a usage error naming those it has); each command's
    --emit shows its own in its metavar."""

    output = "output"
    weights = "weights"
    q = "q"  # self: the projections
    k = "k"
    v = "v"
    dq = "dq"  # grad: the gradients
    dk = "dk"
    dv = "dv"
    dsinks = "dsinks"
    dbias = "dbias"
    error = "error"  # check: |OUT − ref|, in the files' layout
    reference = "reference"  # check: the float64 reference output, in the files' layout


# Arguments and options shared with commands that take the same inputs (explain).
FilesArgument = Annotated[list[str], typer.Argument(
    metavar="FILE...", show_default=False,
    help="One bundle (YAML, JSON, NPZ or safetensors with entries q, k, v and optionally mask, bias, sinks, "
         "alibi_slopes, and settings such as causal: true, scale: 1 or window: [3, 0], which options given here "
         "override) or three files Q K V: CSV, TSV, NPY, YAML, JSON or JSON Lines. NPY, NPZ and safetensors may "
         "hold tensors (batch, heads, seq, dim) of any rank. '-' reads one of them from stdin. "
         "A bundle entry 'rgb: true' says rows of 3 numbers are RGB colours.",
), READS]
EmitOption = Annotated[Emit, typer.Option(
    "--emit", metavar="output|weights", help="The matrix csv/tsv/npy write: output (n_q×d_v) or weights (n_q×n_k).")]
MaskOption = Annotated[str | None, typer.Option(
    "--mask", metavar="FILE",
    help="Which keys each query may attend to: an n_q×n_k (or 1×n_k) matrix of booleans, or of "
         "0/1 or true/false cells: 1 = may attend. Numbers to add to the scores go in --bias.",
), READS]
BiasOption = Annotated[str | None, typer.Option(
    "--bias", metavar="FILE",
    help="Numbers added to the scaled scores before softmax: an n_q×n_k (or 1×n_k) matrix; -inf "
         "forbids a pair. PyTorch's float attn_mask is such a bias: pass it here, not as --mask.",
), READS]
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
WindowOption = Annotated[str | None, typer.Option(
    "--window", metavar="LEFT,RIGHT", show_default=False,
    help="A local window, FlashAttention's window_size: query i sees keys i+n_k-n_q-LEFT .. i+n_k-n_q+RIGHT "
         "(inclusive); -1 leaves a side unbounded. A sliding window of W keys with causal is W-1,0.",
)]
SoftcapOption = Annotated[float | None, typer.Option(
    "--softcap", metavar="C", show_default=False,
    help="Soft-cap the scaled scores: C·tanh(scores/C), before any bias or mask (Gemma 2: 50).",
)]
AlibiOption = Annotated[bool, typer.Option(
    "--alibi",
    help="ALiBi: add -m_h·|i+n_k-n_q-j| to head h's scores, slopes m_h = 2^(-8(h+1)/H) (Press et al.).",
)]
AlibiSlopesOption = Annotated[str | None, typer.Option(
    "--alibi-slopes", metavar="FILE", show_default=False,
    help="ALiBi with your own slopes: one number per query head (implies --alibi).",
), READS]
RopeOption = Annotated[RopeStyle | None, typer.Option(
    "--rope", show_default=False,
    help="Rotate Q and K by position first (RoPE). neox: halves, rotate_half (Hugging Face LLaMA, GPT-NeoX); "
         "gptj: interleaved pairs (GPT-J, Meta's complex form). Keys at 0..n_k-1, queries at n_k-n_q+i.",
)]
RopeThetaOption = Annotated[float, typer.Option(
    "--rope-theta", metavar="BASE", help="RoPE's base: pair i turns by position·BASE^(-2i/dim).")]
RopeDimOption = Annotated[int | None, typer.Option(
    "--rope-dim", metavar="N", show_default=False,
    help="Rotate only the first N features of each head (Pythia, GPT-NeoX's rotary_pct). Default: all.",
)]
RopeOffsetOption = Annotated[int | None, typer.Option(
    "--rope-offset", metavar="P", show_default=False,
    help="The first query's RoPE position (within ±2^32). Default n_k-n_q: the queries are the last tokens.",
)]
SinksOption = Annotated[str | None, typer.Option(
    "--sinks", metavar="FILE", show_default=False,
    help="Attention sinks (gpt-oss): one logit per query head that joins each row's softmax and is then "
         "dropped, so rows sum to less than 1.",
), READS]
LayoutOption = Annotated[Layout, typer.Option(
    "--layout",
    help="The order of a tensor file's axes, read and written: bhsd = (batch, heads, seq, dim), PyTorch "
         "SDPA's; bshd = (batch, seq, heads, dim), FlashAttention's and xFormers'.",
)]
BatchOption = Annotated[int | None, typer.Option(
    "--batch", min=0, metavar="B", show_default=False,
    help="For tensors: show only batch B (from 0) on the terminal. Data formats hold every batch.",
)]
HeadOption = Annotated[int | None, typer.Option(
    "--head", min=0, metavar="H", show_default=False,
    help="For tensors: show only query head H (from 0) on the terminal. Data formats hold every head.",
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
), WRITES]
HtmlOption = Annotated[str | None, typer.Option(
    "--html", metavar="FILE", show_default=False,
    help="Also save the terminal view as a standalone HTML page, whatever --format writes to stdout.",
), WRITES]
PrecisionOption = Annotated[
    int, typer.Option("--precision", "-p", min=0, max=17, help="Decimals shown in tables (data formats are exact).")
]


# Options of commands that turn words into vectors (lookup, self).
VectorsOption = Annotated[str | None, typer.Option(
    "--vectors", metavar="FILE", show_default=False,
    help="Your own word vectors: GloVe text, word2vec/fastText text or binary, .npz, or .npy "
         "with --words. Read only until every word needed is found. Default: the bundled "
         "GloVe 6B 50d table (140,000 words).",
), READS]
WordsOption = Annotated[str | None, typer.Option(
    "--words", metavar="FILE", show_default=False,
    help="For a .npy --vectors matrix: its words, one per line, in row order.",
), READS]
Unknown = Enum("Unknown", {name: name for name in UNKNOWN_POLICIES}, type=str)  # type: ignore[misc]
UNKNOWN_IS_AN_ERROR = Unknown("error")  # the default of --unknown
UnknownOption = Annotated[Unknown, typer.Option(
    "--unknown",
    help="A word the vectors do not have: error (name it, and the nearest known word), skip (leave it out; "
         "a phrase is the mean of its known words) or zero (a vector of zeros). A note names the words.",
)]


# --- the attention options, declared once --------------------------------------------------------


FILE_OPTIONS = ("mask", "bias", "sinks", "alibi_slopes")  # options that name a file: in a bundle, entries not settings


@dataclass
class AttentionFlags:
    """The attention options as typed on the command line; ``build`` makes them
    the core's ``AttentionOptions`` once the files they name are read."""

    mask: str | None = None  # a file: which keys each query may attend to
    bias: str | None = None  # a file: numbers added to the scaled scores
    causal: bool = False
    causal_align: Align | None = None
    scale: float | None = None
    temperature: float = 1.0
    similarity: Similarity = Similarity("dot")
    window: str | None = None  # "LEFT,RIGHT"
    softcap: float | None = None
    alibi: bool = False
    alibi_slopes: str | None = None  # a file: one slope per query head
    rope: RopeStyle | None = None
    rope_theta: float = 10000.0
    rope_dim: int | None = None
    rope_offset: int | None = None
    sinks: str | None = None  # a file: one sink logit per query head
    given: frozenset[str] = frozenset()  # the options typed on the command line: they override a bundle

    def files(self) -> list[str | None]:
        """The files these flags name (for the stdin-once check)."""
        return [getattr(self, name) for name in FILE_OPTIONS]

    def build(self, mask: Any = None, bias: Any = None, *, sinks: Matrix | None = None,
              alibi_slopes: Matrix | None = None) -> AttentionOptions:
        """AttentionOptions from these flags, a boolean mask (True = may attend), an additive bias
        and the arrays as read (Matrix, or None); --sinks and --alibi-slopes files not already read
        are read here. A bias's -inf forbids its pair as the mask does, and is shown so (a dash, not a weight 0)."""
        import numpy as np

        from attncli.core.options import AttentionOptions, Rope

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
        rope = None
        if self.rope is not None:
            rope = Rope(self.rope.value, self.rope_theta, self.rope_dim, self.rope_offset)
        else:
            given = [flag for flag, value in (("--rope-theta", self.rope_theta != 10000.0),
                                              ("--rope-dim", self.rope_dim is not None),
                                              ("--rope-offset", self.rope_offset is not None)) if value]
            if given:
                raise UsageError(f"{given[0]} goes with --rope", hint="add --rope neox or --rope gptj")
        sinks = sinks if sinks is not None or self.sinks is None else _read(self.sinks)
        slopes = alibi_slopes if alibi_slopes is not None or self.alibi_slopes is None else _read(self.alibi_slopes)
        return AttentionOptions(
            scale=self.scale, temperature=self.temperature, similarity=self.similarity.value, causal=causal,
            mask=mask, bias=bias, softcap=self.softcap, window=None if self.window is None else parse_window(
                self.window, "--window", UsageError), alibi=self.alibi,
            alibi_slopes=None if slopes is None else _per_head(slopes), rope=rope,
            sinks=None if sinks is None else _per_head(sinks))

    def with_settings(self, settings: BundleSettings) -> AttentionFlags:
        """These flags with a bundle's settings for the options not given on the command line,
        each converted by its option's type and limits (or its converter in SETTING_CONVERTERS)."""
        names = setting_names()
        annotations = {name: ATTENTION_OPTIONS[name][0] for name in names}

        def check(name: str, value: Any) -> None:  # the core's own checks (a positive scale, ...)
            alone: dict[str, Any] = {"rope": RopeStyle("neox")} if name.startswith("rope_") else {}
            replace(AttentionFlags(), **{**alone, name: value}).build()

        values = settings.fill({name: getattr(self, name) for name in names}, annotations, self.given, check,
                               SETTING_CONVERTERS)
        return replace(self, **values)


def setting_names() -> list[str]:
    """The attention options a bundle may set: every one but the files."""
    return [name for name in ATTENTION_OPTIONS if name not in FILE_OPTIONS]


# How to give a mask's numbers as a bias instead, by where the mask came from.
AS_BIAS = {"file": "give the file as --bias FILE", "entry": "name the entry bias"}


def allowed_cells(matrix: Matrix, source: str, given_as: str) -> Any:
    """A mask as read (``given_as`` "file" or bundle "entry") -> bool [..., rows,
    cols] (any rank, as the mask is), True where a query may attend. A mask says
    where, never how much: a cell other than 0/1 (true/false) is refused, saying
    how to give it as a bias; a mask of numbers that are all 0 gets a note saying
    the same, as it is likely PyTorch's additive float mask (which 0 leaves unchanged)."""
    import numpy as np

    from attncli.cli.notes import note

    values = np.asarray(matrix.values)
    if values.dtype == bool:
        return values
    cells = np.isin(values, (0, 1))
    if not cells.all():
        other = float(values[~cells].flat[0])
        raise AttnError(f"the mask holds {other:g}, but a mask holds only 1 (may attend) and 0 (may not)",
                        source=source, hint=f"to add numbers to the scores, {AS_BIAS[given_as]}")
    if not values.any():
        note(f"the mask's cells are all 0, so no query may attend to any key; if it is PyTorch's float "
             f"attn_mask, which is added to the scores, {AS_BIAS[given_as]}", source)
    return values.astype(bool)


def _read(name: str) -> Matrix:
    from attncli.cli.reading import read_matrix_named
    from attncli.readers.base import BY_FILE

    return read_matrix_named(name, BY_FILE, tensors=True)


def _per_head(m: Matrix) -> Any:
    """One number per head, [H] or [..., H], from a matrix as read (a row [1, H] is [H])."""
    values = m.values
    return values[0] if values.ndim == 2 and values.shape[0] == 1 else values


def parse_window(text: str, what: str, error: type[AttnError] = AttnError,
                 source: str | None = None) -> tuple[int, int]:
    """'LEFT,RIGHT' -> (left, right), whole numbers ≥ -1 (-1: unbounded)."""
    parts = [p.strip() for p in str(text).strip("[]() ").split(",")]
    try:
        left, right = (int(p) for p in parts)
    except ValueError:
        raise error(f"{what}: expected LEFT,RIGHT (two whole numbers, -1 for unbounded), got {text!r}",
                    source=source, hint="a causal sliding window of W keys is W-1,0") from None
    return left, right


def _window_setting(value: Any) -> str:
    """A bundle's window: "LEFT,RIGHT", or a list [left, right] (which YAML/JSON give as a 1×2 matrix)."""
    if hasattr(value, "values"):
        value = value.values.reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) and float(x).is_integer() for x in value):
            value = ",".join(str(int(x)) for x in value)
        else:
            value = ",".join(str(x) for x in value)
    parse_window(value, "window")
    return str(value)


# Bundle settings whose option's type alone cannot read them: name -> converter (raises AttnError).
SETTING_CONVERTERS: dict[str, Callable[[Any], Any]] = {"window": _window_setting}


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
    "window": (WindowOption, None),
    "softcap": (SoftcapOption, None),
    "alibi": (AlibiOption, False),
    "alibi_slopes": (AlibiSlopesOption, None),
    "rope": (RopeOption, None),
    "rope_theta": (RopeThetaOption, 10000.0),
    "rope_dim": (RopeDimOption, None),
    "rope_offset": (RopeOffsetOption, None),
    "sinks": (SinksOption, None),
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
    from attncli.cli.groups import option_group

    return option_group("attention", AttentionFlags, ATTENTION_OPTIONS, names or tuple(ATTENTION_OPTIONS))


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
    from attncli.cli.groups import option_group

    return option_group("reading", ReadFlags, READ_OPTIONS, tuple(READ_OPTIONS))


def setting_flag(setting: str, value: Any) -> str:
    """How a reader's setting (a TextSettings field and value) is typed here:
    ("header", False) -> --no-header; ("delimiter", ";") -> --delimiter ';'."""
    if isinstance(value, bool):
        return f"--{setting}" if value else f"--no-{setting}"
    words = {"\t": "tab", " ": "space"}
    return f"--{setting} {words.get(value) or repr(value)}"
