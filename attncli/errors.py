"""Errors a user can fix. The library raises them; only the CLI prints them.

Each renders as one line, ``FILE:LINE: what is wrong (hint)``, so that the CLI
can print ``attn: error: <that line>``. The errors carry no exit codes: the
CLI maps each class to one (``attncli.cli.app.EXIT_CODES``).
"""

from __future__ import annotations


class AttnError(Exception):
    """Bad data: a file, a value or a shape the tool cannot use."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line
        self.hint = hint

    def located(self, source: str | None = None, line: int | None = None) -> AttnError:
        """Fill in where the error happened, keeping what is already known."""
        self.source = self.source or source
        self.line = self.line if self.line is not None else line
        return self

    def __str__(self) -> str:
        where = ""
        if self.source:
            where = self.source + (f":{self.line}" if self.line is not None else "") + ": "
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{self.message}{hint}"


class UsageError(AttnError):
    """Options or arguments that do not fit together."""


class ShapeError(AttnError):
    """Matrices whose shapes do not chain; the message names both shapes."""


class CheckFailed(AttnError):
    """``attn check``: a kernel's output is further from the reference than the
    rule allows. Not bad data: a numerical disagreement, which the command
    line tells apart by its own exit code."""


def file_error(name: str, e: OSError, *, writing: bool = False) -> AttnError:
    """One line for an OSError on a user's file, the same for every reader and writer."""
    if isinstance(e, IsADirectoryError):
        return AttnError("is a directory, expected a file", source=name)
    if isinstance(e, FileNotFoundError):
        problem = "no such directory" if writing else "no such file"
    elif isinstance(e, PermissionError):
        problem = "permission denied"
    else:
        problem = e.strerror or str(e)
    return AttnError(f"cannot write: {problem}" if writing else problem, source=name)
