"""What a command writes, and where: ``--format``, ``--emit`` and the pictures
(``--svg``, ``--html``, ``--png``, ``--pdf``), declared once and gathered into
one ``OutputFlags`` by ``@output_options(...)``.

A command returns its ``Result``; the command class (``cli/command.py``)
writes it with these flags, the one place results are written. Each command
says which matrices ``--emit`` offers (its first is the default) and which
pictures it can draw; the help lists exactly those.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any

import typer

from attncli.cli.emit import MATRIX_FORMATS, Format, choose_format
from attncli.cli.paths import WRITES
from attncli.errors import UsageError

FORMAT_NAMES = ", ".join(f.value for f in Format)  # from the writers' registry: "table, json, csv, tsv, npy, ..."
MATRIX_FORMAT_NAMES = "/".join(f.value for f in MATRIX_FORMATS)  # "csv/tsv/npy"
FORMAT_HELP = (
    f"{FORMAT_NAMES}. Default: table on a terminal, json in a pipe. "
    f"{MATRIX_FORMAT_NAMES} write the one matrix chosen by --emit."
)

SvgOption = Annotated[
    str | None,
    typer.Option(
        "--svg",
        metavar="FILE",
        show_default=False,
        help="Also save the terminal view as an SVG picture, whatever --format writes to stdout.",
    ),
    WRITES,
]
HtmlOption = Annotated[
    str | None,
    typer.Option(
        "--html",
        metavar="FILE",
        show_default=False,
        help="Also save the terminal view as a standalone HTML page, whatever --format writes to stdout.",
    ),
    WRITES,
]
PngOption = Annotated[
    str | None,
    typer.Option(
        "--png",
        metavar="FILE",
        show_default=False,
        help="Also draw the weights as a PNG figure (one panel per head, labelled axes, a colour bar), "
        "for papers and slides. Needs matplotlib: pip install 'attncli[plot]'.",
    ),
    WRITES,
]
PdfOption = Annotated[
    str | None,
    typer.Option(
        "--pdf",
        metavar="FILE",
        show_default=False,
        help="Also draw the weights as a PDF figure, as --png does (vector text and lines).",
    ),
    WRITES,
]

PICTURES: dict[str, Any] = {"svg": SvgOption, "html": HtmlOption, "png": PngOption, "pdf": PdfOption}


@dataclass(frozen=True)
class OutputFlags:
    """The output options as typed: the format (None: table on a terminal, JSON in a
    pipe), the matrix ``--emit`` names (None: the result's first), and the pictures."""

    fmt: Format | None = None
    emit: str | None = None
    svg: str | None = None
    html: str | None = None
    png: str | None = None
    pdf: str | None = None

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> OutputFlags:
        """The flags among a command's parameter values (Click's, which some Typer
        versions keep as typed, "json", rather than as the Format)."""
        values = {f.name: params.get(f.name) for f in fields(cls)}
        if values["fmt"] is not None:
            values["fmt"] = Format(values["fmt"])
        return cls(**values)

    @property
    def pictures(self) -> bool:
        return any(path is not None for path in (self.svg, self.html, self.png, self.pdf))

    def only_matrix(self, name: str) -> bool:
        """Is the matrix ``name`` all that will be written (csv/tsv/npy, no pictures)?
        Then a command need not keep what only views and JSON show."""
        return choose_format(self.fmt) in MATRIX_FORMATS and self.emit in (None, name) and not self.pictures


FROM_OUTPUT_OPTIONS = OutputFlags()  # the placeholder default of ``out``: @output_options fills it in


def output_options(
    emit: Sequence[str] = (),
    emit_help: str = "",
    pictures: Sequence[str] = tuple(PICTURES),
    format_help: str = FORMAT_HELP,
    formats: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command --format (every format, or only ``formats``), --emit (when it
    has ``emit`` choices: the matrices its result holds; without --emit the result's
    first is written, so ``emit_help`` says which that is) and the ``pictures`` it
    draws, gathered into its parameter ``out: OutputFlags``."""
    from attncli.cli.groups import option_group

    metavar = "|".join(formats) if formats else None  # None: Typer lists every format
    options: dict[str, tuple[Any, Any]] = {
        "fmt": (
            Annotated[
                Format | None,
                typer.Option("--format", "-f", metavar=metavar, help=format_help, show_default=False),
            ],
            None,
        )
    }
    if emit:
        options["emit"] = (
            Annotated[
                str | None, typer.Option("--emit", metavar="|".join(emit), show_default=False, help=emit_help or None)
            ],
            None,
        )
    options.update((name, (PICTURES[name], None)) for name in pictures)

    def gather(**values: Any) -> OutputFlags:
        flags = OutputFlags.of(values)
        if formats and flags.fmt is not None and flags.fmt.value not in formats:
            raise UsageError(f"--format {flags.fmt.value}: this command writes {' or '.join(formats)}")
        if flags.emit is not None and flags.emit not in emit:
            raise UsageError(f"--emit {flags.emit}: this command writes {' or '.join(emit)}")
        return flags

    return option_group("out", gather, options, tuple(options))


# What run and explain write with csv/tsv/npy.
OUTPUT_OR_WEIGHTS: dict[str, Any] = {
    "emit": ("output", "weights"),
    "emit_help": "The matrix csv/tsv/npy write: output (n_q×d_v, the default) or weights (n_q×n_k).",
}
