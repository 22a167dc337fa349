"""Output paths: checked once, before any work, so that attn never writes
over one of its own inputs.

An output path (``--svg``, ``--html``, any future ``-o``) is refused when it
names an input of the same run: the same path, a symlink to it, or another
name of the same file (a hard link, ``/dev/stdin`` fed from the file). It is
also refused when it is ``-`` or a directory, when its folder does not
exist, when two outputs name one file, and when stdout itself is an input
(``attn run q.csv k.csv v.csv >> q.csv``). How a picture is then written
(whole, or directly to a device or FIFO) is ``output.pictures.write_file``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Any

from attncli.cli.io import STDIN, source_name
from attncli.errors import UsageError, file_error

FileId = tuple[int, int]  # (device, inode): one file, whatever path names it


def check_outputs(outputs: Mapping[str, str | None], inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """Refuse outputs (option -> path) that would write over an input, before any work.

    ``inputs`` are the paths the command reads (``-`` is stdin); a path that
    does not exist is only compared by name.
    """
    named = {option: os.fspath(path) for option, path in outputs.items() if path is not None}
    read = _identities(inputs)
    stdin = _stream_file(sys.stdin)  # never written, read or not: `--svg /dev/stdin` would fill our own pipe
    if stdin is not None:
        read.setdefault(stdin, source_name(STDIN))
    written: dict[FileId | str, str] = {}
    for option, path in named.items():
        if path == STDIN:
            raise UsageError("a picture needs a file name, not '-'", hint="stdout gets the --format output")
        if not path.strip():
            raise UsageError(f"{option} needs a file name, not {path!r}")
        if os.path.isdir(path):
            raise file_error(path, IsADirectoryError())
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise file_error(path, FileNotFoundError(), writing=True)
        keys = _keys(path)
        clash = next((read[key] for key in keys if key in read), None)
        if clash is not None:
            which = "an input" if clash == path else f"{clash}, an input"
            raise UsageError(f"{option} names {which} of this run", source=path,
                             hint="attn never writes over its inputs: give the picture another name")
        twice = next((written[key] for key in keys if key in written), None)
        if twice is not None:
            raise UsageError(f"{twice} and {option} name the same file", source=path,
                             hint="give each picture its own name")
        written.update((key, option) for key in keys)
    stdout = _stream_file(sys.stdout, regular_only=True)
    if stdout is not None and stdout in read:
        raise UsageError(f"stdout is {read[stdout]}, an input of this run",
                         hint="redirect the output to another file")


def model_files(model: str | None) -> list[str]:
    """The files of ``--model`` (a folder, a cached name, or $ATTN_MODEL) that
    attn reads; [] when there is no such model (loading it says so)."""
    if model is None and not os.environ.get("ATTN_MODEL"):
        return []
    from attncli.errors import AttnError
    from attncli.models.loading import find_model, read_files

    try:
        return [str(path) for path in read_files(find_model(model))]
    except AttnError:
        return []


def same_as(path: str, stream: IO[Any] | None) -> bool:
    """Does ``path`` name the file ``stream`` (stdout, stderr) writes to (``/dev/stdout``)?"""
    file = _stream_file(stream)
    return file is not None and file in _keys(path)


def _identities(inputs: Iterable[str | os.PathLike[str] | None]) -> dict[FileId | str, str]:
    """Every key of every input (see ``_keys``) -> the input as errors name it."""
    read: dict[FileId | str, str] = {}
    for name in inputs:
        if name is None:
            continue
        name = os.fspath(name)
        if name == STDIN:
            file = _stream_file(sys.stdin)
            if file is not None:
                read[file] = source_name(STDIN)
            continue
        for key in _keys(name):
            read.setdefault(key, name)
    return read


def _keys(path: str) -> list[FileId | str]:
    """What identifies the file at ``path``: its real path (symlinks resolved)
    and, when it exists, its (device, inode)."""
    keys: list[FileId | str] = [os.path.realpath(path)]
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return keys
    return [*keys, (info.st_dev, info.st_ino)]


def _stream_file(stream: IO[Any] | None, regular_only: bool = False) -> FileId | None:
    """(device, inode) of the file a standard stream is, or None (closed, not a real file in tests)."""
    import stat

    try:
        info = os.fstat(stream.fileno())  # type: ignore[union-attr]
    except (OSError, AttributeError, ValueError):
        return None
    if regular_only and not stat.S_ISREG(info.st_mode):
        return None
    return info.st_dev, info.st_ino
