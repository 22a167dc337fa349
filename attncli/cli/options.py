"""Every option and argument more than one command takes, declared once as an
``Annotated`` alias (help text, flag names, defaults), with the choices they offer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.emit import MATRIX_FORMATS, Format
from attncli.core.options import CAUSAL_ALIGNS, ROPE_STYLES, SIMILARITIES
from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions
    from attncli.readers import Matrix


# The choices Typer offers, made from the core's own names (one Similarity, one alignment).
Similarity = Enum("Similarity", {name: name for name in SIMILARITIES}, type=str)  # type: ignore[misc]
Align = Enum("Align", {name.replace("-", "_"): name for name in CAUSAL_ALIGNS}, type=str)  # type: ignore[misc]
RopeStyle = Enum("RopeStyle", {name: name for name in ROPE_STYLES}, type=str)  # type: ignore[misc]


class Layout(str, Enum):
    """How a tensor file orders its last three axes."""

    bhsd = "bhsd"  # [batch, heads, seq, dim]: PyTorch's scaled_dot_product_attention, attn's own order
    bshd = "bshd"  # [batch, seq, heads, dim]: FlashAttention, xFormers


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
    help="One bundle (YAML, JSON, NPZ or safetensors with entries q, k, v and optionally mask, sinks, "
         "alibi_slopes) or three files Q K V: CSV, TSV, NPY, YAML or JSON. NPY, NPZ and safetensors may hold "
         "tensors (batch, heads, seq, dim) of any rank. '-' reads one of them from stdin. "
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
)]
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
    help="The first query's RoPE position. Default n_k-n_q: the queries are the last tokens.",
)]
SinksOption = Annotated[str | None, typer.Option(
    "--sinks", metavar="FILE", show_default=False,
    help="Attention sinks (gpt-oss): one logit per query head that joins each row's softmax and is then "
         "dropped, so rows sum to less than 1.",
)]
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
    the core's ``AttentionOptions`` once the files they name are read."""

    mask: str | None = None  # a file: which keys each query may attend to
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

    def files(self) -> list[str | None]:
        """The files these flags name (for the stdin-once check)."""
        return [self.mask, self.alibi_slopes, self.sinks]

    def build(self, mask: Any = None, *, sinks: Matrix | None = None,
              alibi_slopes: Matrix | None = None) -> AttentionOptions:
        """AttentionOptions from these flags and the arrays as read (Matrix, or
        None); --sinks and --alibi-slopes files not already read are read here."""
        from attncli.core.options import AttentionOptions, Rope, split_mask

        allowed, bias = split_mask(None if mask is None else mask.values)
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
            mask=allowed, bias=bias, softcap=self.softcap, window=None if self.window is None else parse_window(
                self.window, "--window", UsageError), alibi=self.alibi,
            alibi_slopes=None if slopes is None else _per_head(slopes), rope=rope,
            sinks=None if sinks is None else _per_head(sinks))

    def with_settings(self, settings: dict[str, Any], source: str) -> AttentionFlags:
        """These flags, with a bundle's settings (window, softcap, alibi, rope,
        rope_theta, rope_dim, rope_offset) where the command line left the default."""
        from dataclasses import fields, replace

        defaults = {f.name: f.default for f in fields(AttentionFlags)}
        changes = {}
        for name, value in settings.items():
            if name in BUNDLE_SETTINGS and getattr(self, name) == defaults[name]:
                changes[name] = BUNDLE_SETTINGS[name](value, name, source)
        return replace(self, **changes)


def _read(name: str) -> Matrix:
    from attncli.cli.io import read_matrix_arg

    return read_matrix_arg(name, tensors=True)


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


def _setting(convert: Callable[[Any], Any], expected: str) -> Callable[[Any, str, str], Any]:
    """A bundle setting's reader: its value (YAML/JSON scalar, or safetensors metadata text) converted."""

    def read(value: Any, name: str, source: str) -> Any:
        try:
            return convert(value)
        except (TypeError, ValueError):
            raise AttnError(f"the setting {name}: expected {expected}, got {value!r}", source=source) from None

    return read


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ValueError(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or float(value) != int(float(value)):
        raise ValueError(value)
    return int(float(value))


def _window_setting(value: Any, name: str, source: str) -> str:
    if hasattr(value, "values"):  # a YAML/JSON list [left, right] is read as a 1×2 matrix
        value = ",".join(str(_int(x)) for x in value.values.reshape(-1).tolist())
    parse_window(value, f"the setting {name}", AttnError, source)
    return str(value)


# A bundle's settings: the variants, by the name of their flag (YAML/JSON keys, safetensors metadata).
BUNDLE_SETTINGS: dict[str, Callable[[Any, str, str], Any]] = {
    "window": _window_setting,
    "softcap": _setting(float, "a number"),
    "alibi": _setting(_bool, "true or false"),
    "rope": _setting(lambda v: RopeStyle(str(v)), " or ".join(ROPE_STYLES)),
    "rope_theta": _setting(float, "a number"),
    "rope_dim": _setting(_int, "a whole number"),
    "rope_offset": _setting(_int, "a whole number"),
}


FROM_OPTIONS = AttentionFlags()  # the placeholder default of ``attention``: @attention_options fills it in

# Each attention option once: its Annotated alias and its default, in the order help shows them.
ATTENTION_OPTIONS: dict[str, tuple[Any, Any]] = {
    "mask": (MaskOption, None),
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
    (and a field of AttentionFlags).
    """
    from attncli.cli.groups import option_group

    return option_group("attention", AttentionFlags, ATTENTION_OPTIONS, names or tuple(ATTENTION_OPTIONS))
