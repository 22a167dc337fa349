"""Output paths: checked once, before any work, so that attn never writes
over one of its own inputs.

Every parameter that names files is marked where it is declared, in its
``Annotated`` alias: ``READS`` (and its variants) for inputs, ``WRITES`` for
pictures. The command class every command uses (``cli/command.py``) finds
the marks and calls ``guard`` before the command runs, so a new command, or a
new file option, is protected without a line of its own: only the mark.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from attncli.cli.io import STDIN, check_stdin_once, source_name
from attncli.errors import UsageError, file_error

FileId = tuple[int, int]  # (device, inode): one file, whatever path names it


def _named(value: Any) -> list[str]:
    """The paths a value names: none, one, or a list of them."""
    if value is None:
        return []
    return [os.fspath(v) for v in value] if isinstance(value, (list, tuple)) else [os.fspath(value)]


@dataclass(frozen=True)
class Reads:
    """The mark of a parameter whose value names files the command reads
    (``Annotated[str | None, typer.Option(...), READS]``); ``paths`` turns
    the value into those files (a model folder -> the files in it)."""

    paths: Callable[[Any], list[str]] = _named


@dataclass(frozen=True)
class Writes:
    """The mark of a parameter whose value names a file the command writes (a picture)."""


@dataclass(frozen=True)
class WritesFolder(Writes):
    """The mark of a parameter whose value names a folder the command creates and fills
    (``attn convert``'s DIR): refused when it names an input, is a file, or is a folder
    that already holds anything, so that nothing there is ever replaced."""


def is_file_name(text: str) -> bool:
    """Is a text argument (``attn self``'s X or Z) a file rather than a
    sentence? '-', an existing path, or one word that looks like a file name
    (a / or an extension such as .csv), so that a mistyped file name is "no
    such file", not an unknown word."""
    import re

    if text == STDIN or os.path.exists(text):
        return True
    if any(c.isspace() for c in text):
        return False
    return "/" in text or os.sep in text or re.search(r"[^.]\.[A-Za-z0-9]+$", text) is not None


READS = Reads()  # file names (and '-' for stdin)
READS_STDIN = Reads(lambda value: [STDIN] if STDIN in _named(value) else [])  # words, or '-' for stdin
READS_IF_FILE = Reads(lambda value: [v for v in _named(value) if is_file_name(v)])  # a sentence or a file
READS_MODEL = Reads(lambda value: model_files(value))  # a model folder or cached name ($ATTN_MODEL)
READS_CONFIG = Reads(lambda value: config_files(value))  # a config.json, a model folder or a .gguf (no $ATTN_MODEL)
WRITES = Writes()
WRITES_FOLDER = WritesFolder()


def path_roles(callback: Callable[..., Any]) -> dict[str, Reads | Writes]:
    """Each parameter of a command that names files -> its mark, from the
    command's annotations (the ``Annotated`` aliases its options are declared by)."""
    import typing

    hints = typing.get_type_hints(callback, include_extras=True)
    roles = {}
    for name, hint in hints.items():
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, (Reads, Writes))]
        if marks:
            roles[name] = marks[0]
    return roles


def guard(roles: Mapping[str, Reads | Writes], values: Mapping[str, Any], flags: Mapping[str, str]) -> None:
    """Before a command runs: stdin and pipes named once, and no output naming an input.
    ``values``: the parameters' values by name; ``flags``: their option names (--svg)."""
    inputs = [path for name, role in roles.items() if isinstance(role, Reads) for path in role.paths(values.get(name))]
    outputs = {
        flags[name]: values.get(name)
        for name, role in roles.items()
        if isinstance(role, Writes) and not isinstance(role, WritesFolder)
    }
    check_stdin_once(inputs)
    check_outputs(outputs, inputs)
    for name, role in roles.items():
        if isinstance(role, WritesFolder) and values.get(name) is not None:
            check_new_folder(flags[name], values[name], inputs)


def check_new_folder(what: str, path: str, inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """A folder to create (``what``: the parameter as the help names it): not an input
    of this run, not a file, not a folder holding anything, and inside a folder that exists."""
    path = os.fspath(path)
    if not path.strip() or path == STDIN:
        raise UsageError(f"{what} needs a folder name, not {path!r}")
    _refuse_an_input(what, path, _keys(path), _identities(inputs), "give a new folder")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{what} is a file, not a folder", source=path, hint="give the name of a new folder")
    if os.path.isdir(path) and os.listdir(path):
        raise UsageError(
            f"{what} is a folder that is not empty",
            source=path,
            hint="attn writes a new folder and never over files: give a new name, or an empty folder",
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise file_error(path, FileNotFoundError(), writing=True)


def check_outputs(outputs: Mapping[str, str | None], inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """Refuse outputs (option -> path) that would write over an input, before any
    work; stdout too, when it is an input's file (``>> q.csv``).

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
        _refuse_an_input(option, path, keys, read, "give the picture another name")
        twice = next((written[key] for key in keys if key in written), None)
        if twice is not None:
            raise UsageError(
                f"{twice} and {option} name the same file", source=path, hint="give each picture its own name"
            )
        written.update((key, option) for key in keys)
    stdout = _stream_file(sys.stdout, regular_only=True)
    if stdout is not None and stdout in read:
        raise UsageError(f"stdout is {read[stdout]}, an input of this run", hint="redirect the output to another file")


def _refuse_an_input(what: str, path: str, keys: list[FileId | str], read: Mapping[FileId | str, str], do: str) -> None:
    """An output (``what``: --svg, DIR) whose ``keys`` are an input's: refused, naming the input."""
    clash = next((read[key] for key in keys if key in read), None)
    if clash is not None:
        which = "an input" if clash == path else f"{clash}, an input"
        raise UsageError(
            f"{what} names {which} of this run", source=path, hint=f"attn never writes over its inputs: {do}"
        )


def model_files(model: str | None) -> list[str]:
    """The files of ``--model`` (a folder, a model file, a cached name, or
    $ATTN_MODEL) that attn reads (``models.loading.read_files`` lists a
    folder's); [] when there is no such model (loading it says so)."""
    name = model or os.environ.get("ATTN_MODEL")
    if not name:
        return []
    if os.path.isfile(os.path.expanduser(name)):
        return [os.path.expanduser(name)]
    from attncli.errors import AttnError
    from attncli.models.loading import find_model, read_files

    try:
        return [str(path) for path in read_files(find_model(name))]
    except AttnError:
        return []


def config_files(model: str | None) -> list[str]:
    """The file ``--model`` names on the attention commands: itself, or its folder's config.json."""
    if not model:
        return []
    path = os.path.expanduser(model)
    return [os.path.join(path, "config.json")] if os.path.isdir(path) else [path]


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
