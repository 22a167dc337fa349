"""``attn convert``: a llama.cpp GGUF file written out as a Hugging Face folder
(``models.converting``), so that traces skip its metadata parse and dequantising."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS, WRITES_FOLDER
from attncli.errors import UsageError

EXAMPLES = """\b
Examples:
  attn convert SmolLM2-135M-Instruct.Q4_1.gguf smollm2-hf     # then: attn trace "..." -m smollm2-hf
  attn convert model.gguf out -f json | jq .files
"""


@output_options(
    pictures=(),
    formats=("table", "json"),
    format_help="What was written. Default: table on a terminal, json in a pipe.",
)
def convert(
    model: Annotated[
        str,
        typer.Argument(metavar="MODEL.gguf", show_default=False, help="A llama.cpp GGUF file of a family attn runs."),
        READS,
    ],
    folder: Annotated[
        str,
        typer.Argument(
            metavar="DIR",
            show_default=False,
            help="The folder to write: a new one, or an empty one. attn never writes into a folder that holds "
            "anything.",
        ),
        WRITES_FOLDER,
    ],
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
) -> Result:
    """Write a GGUF model as a Hugging Face folder: config.json, model.safetensors
    (float32: every tensor dequantised once) and tokenizer.json.

    attn trace reads the folder in a fraction of the time the GGUF takes (no
    metadata parse, no dequantising) and gives the same numbers; transformers
    loads it too. The folder is written in full beside DIR and renamed into
    place at the end, so an interrupted conversion leaves nothing behind.
    """
    from pathlib import Path

    from attncli.cli.worker import on_interrupt
    from attncli.errors import file_error
    from attncli.models.loading import MODEL_MODULES, require_extra

    path = Path(model).expanduser()
    if path.is_dir():
        raise UsageError(
            f"{model} is a folder: convert reads a .gguf file", hint="a Hugging Face folder needs no converting"
        )
    if not path.exists():
        raise file_error(model, FileNotFoundError())
    require_extra("converting a GGUF", (*MODEL_MODULES, "gguf"))
    from attncli.models.converting import convert_gguf

    done = convert_gguf(path, Path(folder).expanduser(), cleanup=on_interrupt)
    data = {
        "model": str(done.source),
        "folder": str(done.folder),
        "family": done.family,
        "model_type": done.model_type,
        "tensors": done.tensors,
        "parameters": done.parameters,
        "files": done.files,
    }

    def view() -> str:
        sizes = ", ".join(f"{name} ({_size(size)})" for name, size in done.files.items())
        return (
            f"wrote {done.folder}: {sizes}\n"
            f"{done.family} ({done.model_type}), {done.tensors} tensors, {done.parameters:,} parameters in float32\n"
            f"attn trace TEXT -m {done.folder}"
        )

    return Result(data, view)


def _size(n: int) -> str:
    """1.2 KiB, 513.2 MiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


COMMAND = CommandSpec(convert, EXAMPLES)
