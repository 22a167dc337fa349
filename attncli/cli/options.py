"""Every option and argument more than one command takes, declared once as an
``Annotated`` alias (help text, flag names, defaults), with the choices they offer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.paths import READS
from attncli.errors import UsageError
from attncli.vectors import UNKNOWN_POLICIES

if TYPE_CHECKING:
    from attncli.readers import TextSettings


class Layout(str, Enum):
    """How a tensor file orders its last three axes."""

    bhsd = "bhsd"  # [batch, heads, seq, dim]: PyTorch's scaled_dot_product_attention, attn's own order
    bshd = "bshd"  # [batch, seq, heads, dim]: FlashAttention, xFormers


# Arguments and options shared with commands that take the same inputs (explain).
FilesArgument = Annotated[
    list[str],
    typer.Argument(
        metavar="FILE...",
        show_default=False,
        help="One bundle (YAML, JSON, NPZ or safetensors with entries q, k, v and optionally mask, bias, sinks, "
        "alibi_slopes, and settings such as causal: true, scale: 1 or window: [3, 0], which options given here "
        "override) or three files Q K V: CSV, TSV, NPY, YAML, JSON or JSON Lines. NPY, NPZ and safetensors may "
        "hold tensors (batch, heads, seq, dim) of any rank. '-' reads one of them from stdin. "
        "A bundle entry 'rgb: true' says rows of 3 numbers are RGB colours.",
    ),
    READS,
]
LayoutOption = Annotated[
    Layout,
    typer.Option(
        "--layout",
        help="The order of a tensor file's axes, read and written: bhsd = (batch, heads, seq, dim), PyTorch "
        "SDPA's; bshd = (batch, seq, heads, dim), FlashAttention's and xFormers'.",
    ),
]
BatchOption = Annotated[
    int | None,
    typer.Option(
        "--batch",
        min=0,
        metavar="B",
        show_default=False,
        help="For tensors: show only batch B (from 0) on the terminal. Data formats hold every batch.",
    ),
]
HeadOption = Annotated[
    int | None,
    typer.Option(
        "--head",
        min=0,
        metavar="H",
        show_default=False,
        help="For tensors: show only query head H (from 0) on the terminal. Data formats hold every head.",
    ),
]


DoutOption = Annotated[
    str | None,
    typer.Option(
        "--dout",
        metavar="FILE",
        show_default=False,
        help="The gradient of the output, dO, for the backward pass: the shape of the output (n_q×d_v, or "
        "[..., heads, n_q, d_v]). A bundle may hold it as 'dout'.",
    ),
    READS,
]
PrecisionOption = Annotated[
    int, typer.Option("--precision", "-p", min=0, max=17, help="Decimals shown in tables (data formats are exact).")
]


# Options of commands that turn words into vectors (lookup, self).
VectorsOption = Annotated[
    str | None,
    typer.Option(
        "--vectors",
        metavar="FILE",
        show_default=False,
        help="Your own word vectors: GloVe text, word2vec/fastText text or binary, .npz, or .npy "
        "with --words. Read only until every word needed is found. Default: the bundled "
        "GloVe 6B 50d table (140,000 words).",
    ),
    READS,
]
WordsOption = Annotated[
    str | None,
    typer.Option(
        "--words",
        metavar="FILE",
        show_default=False,
        help="For a .npy --vectors matrix: its words, one per line, in row order.",
    ),
    READS,
]
Unknown = Enum("Unknown", {name: name for name in UNKNOWN_POLICIES}, type=str)  # type: ignore[misc]
UNKNOWN_IS_AN_ERROR = Unknown("error")  # the default of --unknown
UnknownOption = Annotated[
    Unknown,
    typer.Option(
        "--unknown",
        help="A word the vectors do not have: error (name it, and the nearest known word), skip (leave it out; "
        "a phrase is the mean of its known words) or zero (a vector of zeros). A note names the words.",
    ),
]


# --- how text files are read, declared once -------------------------------------------------------

Decimal = Enum("Decimal", {"point": ".", "comma": ","}, type=str)  # type: ignore[misc]

HeaderOption = Annotated[
    bool | None,
    typer.Option(
        "--header/--no-header",
        show_default=False,
        help="CSV/TSV/text: the first row holds column names, or data. Default: names when none of its cells "
        "is a number or its first cell is empty; a first row 0,1,…,n-1 (pandas' names for unnamed "
        "columns) is names only when the rows below are not whole numbers, and a note says which.",
    ),
]
LabelsOption = Annotated[
    bool | None,
    typer.Option(
        "--labels/--no-labels",
        show_default=False,
        help="CSV/TSV/text: the first column holds row labels, or numbers. Default: labels when none of its "
        "cells below the header is a number, or under an empty header cell (pandas' index).",
    ),
]
DelimiterOption = Annotated[
    str | None,
    typer.Option(
        "--delimiter",
        metavar="CHAR",
        show_default=False,
        help="CSV/TSV/text: what separates cells: ',', ';', tab, space (runs of spaces) or another character. "
        "Default: Excel's sep= first line, else the first of tab, ';' and ',' found on every line.",
    ),
]
DecimalOption = Annotated[
    Decimal | None,
    typer.Option(
        "--decimal",
        show_default=False,
        help="CSV/TSV/text: the decimal mark. Default: ',' only when commas do not separate the cells and "
        "numbers are written 1,5 (Excel in much of Europe), never 1.5.",
    ),
]

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
                raise UsageError(
                    f"--delimiter {self.delimiter!r} is not a delimiter",
                    hint="give one character such as ';' or '|', or tab or space",
                )
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


QueryOption = Annotated[
    str | None,
    typer.Option(
        "--query",
        "-q",
        metavar="N|LABEL",
        show_default=False,
        help="The query whose steps are written out term by term: its row number (from 0) or its label "
        "(a token of a sentence). Default: the first.",
    ),
]
