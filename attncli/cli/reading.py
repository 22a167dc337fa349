"""Reading the inputs named on the command line the way the reader options
say (``--header``, ``--delimiter``, ...); where a file could be read two ways
and the reader chose, a note says so and names the flag that chooses the other."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from attncli.cli.io import open_input
from attncli.cli.notes import note
from attncli.cli.options import setting_flag

if TYPE_CHECKING:
    from attncli.readers import Bundle, Matrix, TextSettings


def read_named(
    name: str,
    text: TextSettings,
    *,
    mask: bool = False,
    bias: bool = False,
    bundle: bool | Iterable[str] = False,
    settings: Iterable[str] = (),
    tensors: bool = False,
    finite: bool = True,
) -> Bundle:
    """What the input named ``name`` holds (``-`` is stdin), read as ``read_input`` reads."""
    from attncli.readers import read_input

    result = read_input(
        open_input(name),
        mask=mask,
        bias=bias,
        bundle=bundle,
        settings=settings,
        text=text,
        tensors=tensors,
        finite=finite,
    )
    for choice in result.choices:
        where = f"{choice.source}:{choice.line}" if choice.line else choice.source
        note(f"{choice.message} ({setting_flag(choice.setting, choice.other)} {choice.other_reading})", where)
    return result


def read_matrix_named(
    name: str, text: TextSettings, *, mask: bool = False, bias: bool = False, tensors: bool = False, finite: bool = True
) -> Matrix:
    """The one matrix in the input named ``name``; ``tensors``: of any rank ≥ 2, in its stored float dtype."""
    return read_named(name, text, mask=mask, bias=bias, tensors=tensors, finite=finite).matrix()
