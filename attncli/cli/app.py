"""The ``attn`` command line: the Typer app, its commands, and the one place
where errors become a line on stderr and an exit code.

Exit codes: 0 success, 1 bad data, 2 bad usage, 3 ``attn check`` found a
numerical disagreement, 70 a bug in attn, 130 Ctrl-C, 141 closed pipe.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from attncli import __version__
from attncli.errors import AttnError, CheckFailed, file_error
from attncli.errors import UsageError as AttnUsageError
from attncli.text import clip, printable

# The one table from error classes to exit codes: the most specific class wins.
EXIT_CODES: dict[type[AttnError], int] = {
    AttnError: 1,  # bad data: a file, a value or a shape attn cannot use
    AttnUsageError: 2,  # options that do not fit together, as Click's usage errors
    CheckFailed: 3,  # attn check: the output disagrees with the reference beyond the tolerance
}
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports `attn ... | head`
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in attn, not the user's mistake

# Typer (0.26 and later) vendors its own Click; find its exception classes through the
# public ones, so this works with either.
UsageError: type[Any] = typer.BadParameter.__mro__[1]
ClickException: type[Any] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


LONGEST_WORD = 200  # characters of one word an error line quotes (a 5,000-digit --heads is cut)


def report(message: str) -> None:
    """The one-line error format: ``attn: error: FILE:LINE: what (hint)``, with
    control characters in names and words escaped (``\\x1b``) and absurdly
    long words cut. Nothing is said when stderr itself is closed or full: the
    exit code still tells."""
    import re

    line = re.sub(rf"\S{{{LONGEST_WORD},}}", lambda word: clip(word[0], 60), printable(message))
    try:
        sys.stderr.write(f"attn: error: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def exit_code(error: AttnError) -> int:
    """The exit code of an error: that of its nearest class in EXIT_CODES."""
    return next(EXIT_CODES[c] for c in type(error).__mro__ if c in EXIT_CODES)


def environment_error(e: BaseException) -> AttnError | None:
    """The one line for a failure of the machine or the environment rather
    than of attn (exit 1), or None for a bug. Known places turn these into
    precise errors; this is the net under every other."""
    if isinstance(e, OSError):  # a file, a stream, the disk: outside attn
        where = e.filename if isinstance(e.filename, str) else None
        return AttnError(e.strerror or str(e) or type(e).__name__, source=where)
    if isinstance(e, ValueError) and "integer string conversion" in str(e):  # Python's limit on int("1" * 5000)
        return AttnError("a number has more than 4,300 digits", hint="write it with an exponent, as 1e5000")
    return None


def _click_output_failed(e: OSError) -> int:
    """Click could not write its own output (help, the version) to stdout:
    one line, as for attn's own output, and the exit code."""
    from attncli.cli.emit import STDOUT_NAME, silence_stdout

    silence_stdout()
    if isinstance(e, BrokenPipeError):
        return EXIT_BROKEN_PIPE
    report(str(file_error(STDOUT_NAME, e, writing=True)))
    return 1


def _in_click_echo(e: OSError) -> bool:
    """Whether ``e`` was raised while Click's ``echo`` wrote (a command's --help)."""
    import traceback

    return any(frame.name == "echo" and "click" in frame.filename for frame in traceback.extract_tb(e.__traceback__))


class AttnGroup(TyperGroup):
    """Typer's group, with every failure reduced to one line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        from attncli.cli import notes
        from attncli.cli.emit import silence_stdout
        from attncli.cli.worker import on_interrupt, run_interruptibly
        from attncli.output.pictures import remove_temporaries

        notes.clear()
        try:
            if sys.stdout is None:  # started with stdout closed: `attn run ... >&-`
                raise AttnError(
                    "stdout is closed, so the result has nowhere to go", hint="redirect it to a file, or to /dev/null"
                )
            with on_interrupt(remove_temporaries):
                result = run_interruptibly(lambda: super(AttnGroup, self).invoke(ctx))
            notes.flush()  # on success only: a failure prints its one error line
            return result
        except AttnError as e:
            report(str(e))
            raise typer.Exit(exit_code(e)) from None
        except BrokenPipeError:
            # The reader went away (`attn ... | head`): stop quietly, and keep
            # Python from complaining when it flushes stdout at exit.
            silence_stdout()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except OSError as e:
            if not _in_click_echo(e):
                raise
            raise typer.Exit(_click_output_failed(e)) from None  # a command's help: `attn run --help > /dev/full`
        except (ClickException, typer.Exit, typer.Abort):
            raise  # usage errors and exits: main() reports them
        except MemoryError:
            report("out of memory (the inputs are too large for this machine)")
            raise typer.Exit(1) from None
        except Exception as e:
            error = environment_error(e)
            if error is not None:
                report(str(error))
                raise typer.Exit(exit_code(error)) from None
            # A bug: still one line for the user; ATTN_DEBUG=1 shows the traceback.
            if os.environ.get("ATTN_DEBUG"):
                raise
            report(
                f"internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
                "(a bug in attn: ATTN_DEBUG=1 shows where; please report it)"
            )
            raise typer.Exit(EXIT_INTERNAL) from None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands()  # type: ignore[assignment]

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)  # in the registry's order, not sorted

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from attncli.cli.helptext import format_group_help

        format_group_help(self, ctx, formatter, CLOSING)

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args=args,
                prog_name=prog_name or "attn",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
            code = result if isinstance(result, int) else 0
        except ClickException as e:
            message = e.format_message().replace("Value error, ", "").rstrip(".")
            if type(e).__name__ == "NoArgsIsHelpError":  # `attn` alone: its help, nothing went wrong
                typer.echo(e.format_message())
                code = 0
            elif not message:  # the help was shown already
                code = 0
            else:
                command = e.ctx.command_path if getattr(e, "ctx", None) else "attn"
                hint = f" (see '{command} --help')" if isinstance(e, UsageError) else ""
                report(message + hint)
                code = e.exit_code
        except typer.Abort:
            code = 130
        except SystemExit as e:  # Typer's answer to a closed pipe under its own output (`attn --help | true`)
            if e.code != 1 or type(sys.stdout).__name__ != "PacifyFlushWrapper":
                raise
            code = EXIT_BROKEN_PIPE
        except OSError as e:  # Click's own output failed: `attn --help > /dev/full`, `attn --version | true`
            code = _click_output_failed(e)
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=AttnGroup,
    name="attn",
    help="Compute attention, softmax(QKᵀ/√d_k)V, on your own matrices and see every step.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"attn {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Compute attention, softmax(QKᵀ/√d_k)V, on your own matrices and see every step.

    Matrices come from CSV, TSV, NPY, NPZ, YAML or JSON files, or '-' for stdin.
    On a terminal you get tables and heatmaps; in a pipe, JSON.
    """


CLOSING = """\
\b
Start here: five commands, ten minutes (the README's learning path):
  attn softmax 4.0 -1.0 2.1                          # scores into weights (seed 000)
  attn lookup fruit --keys apple,banana,chair        # a lookup by meaning (seed 000)
  attn explain samples/colors.yaml                   # every step, with numbers (seed 003)
  attn self samples/three_spaces.yaml --explain      # Q = XW_Q + b_q, one token (seed 004)
  attn trace "The pink elephant …" --model M         # a trained model's heads (seed 001)

'attn COMMAND --help' shows a command's options and more examples. Tab
completion for your shell: attn --install-completion (or --show-completion to
see the script). On a terminal you get views; in a pipe, JSON."""


# The commands, in the order help lists them: name -> module in attncli.cli.commands. A module is
# imported only when its command runs or help lists it, so a command pays for no other's imports.
COMMANDS: dict[str, str] = {
    "run": "run",
    "explain": "explain",
    "softmax": "softmax",
    "lookup": "lookup",
    "self": "selfattn",
    "trace": "trace",
    "check": "check",
    "grad": "grad",
    "convert": "convert",
}


class LazyCommands(Mapping[str, Any]):
    """The group's commands as Click reads them (``group.commands``), each built when first asked for."""

    def __getitem__(self, name: str) -> Any:
        if name not in COMMANDS:
            raise KeyError(name)
        return command(name)

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


@functools.cache
def command(name: str) -> Any:
    """The Click command ``name``, built by Typer from its module's ``COMMAND``."""
    import importlib

    from attncli.cli.command import CommandSpec

    spec: CommandSpec = importlib.import_module(f"attncli.cli.commands.{COMMANDS[name]}").COMMAND
    single = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False, add_completion=False)
    single.command(name, epilog=spec.examples, cls=spec.cls, context_settings={"help_option_names": ["-h", "--help"]})(
        spec.function
    )
    return typer.main.get_command(single)


def main() -> None:
    """Console-script entry point. Warnings (numpy's RuntimeWarnings above all)
    never reach the user: stderr holds attn's own lines only. Library code
    keeps its arithmetic quiet where it is expected (np.errstate), and the
    tests turn any RuntimeWarning into a failure, so this filter only hides
    what a test has not met."""
    import warnings

    warnings.simplefilter("ignore")
    app()
