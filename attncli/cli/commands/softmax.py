"""``attn softmax``: the softmax of a few numbers, step by step (seed 000)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.command import CommandSpec, OnceCommand
from attncli.cli.emit import Emitted, Result
from attncli.cli.io import STDIN, STDIN_NAME, read_stdin
from attncli.cli.options import PrecisionOption
from attncli.cli.outputs import FORMAT_NAMES, FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS_STDIN
from attncli.errors import AttnError, UsageError
from attncli.text import clip, parse_number

if TYPE_CHECKING:
    import numpy as np

EXAMPLES = """\b
Examples:
  attn softmax 4.0 -1.0 2.1                  # seed 000: 0.8648 0.0058 0.1294
  attn softmax 3,2,1 --temperature 10        # flatter
  echo "30 20 10" | attn softmax -           # numbers from stdin
  attn softmax 1 2 3 | jq .weights
"""


TemperatureOption = Annotated[
    float,
    typer.Option(
        "--temperature",
        "-t",
        metavar="T",
        help="Divide the numbers by T before softmax: above 1 flattens the weights, below 1 sharpens them.",
    ),
]
SEPARATORS = re.compile(r"[\s,]+")
DECIMAL_COMMA = re.compile(r"[+\-\u2212]?\d+,\d+")  # "1,5": 1.5 in much of Europe, or the numbers 1 and 5


class NumbersCommand(OnceCommand):
    """A command whose arguments may be negative numbers: ``-1.0`` (or
    ``-1,-2``) is a number, not an unknown option. Options and their values
    stay where Click expects them; every other word goes after ``--``, in order."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        takes_value: set[str] = set()
        flags: set[str] = set()
        for param in self.get_params(ctx):
            if getattr(param, "param_type_name", "") == "option":
                names = [*param.opts, *param.secondary_opts]
                is_flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
                (flags if is_flag else takes_value).update(names)
        options: list[str] = []
        words: list[str] = []
        rest = iter(args)
        for arg in rest:
            if arg == "--":
                words.extend(rest)
            elif arg in takes_value:
                value = next(rest, None)
                if value is None:  # let Click say the value is missing
                    return super().parse_args(ctx, args)
                options += [arg, value]
            elif arg in flags or (arg.startswith("-") and arg != STDIN and not _numbers(arg)):
                options.append(arg)  # a flag, --name=value, or an unknown option for Click to report
            else:
                words.append(arg)
        return super().parse_args(ctx, [*options, "--", *words] if words else options)


def _numbers(word: str) -> bool:
    """Is the word one or more numbers ('-1.5', '-1,-2')?"""
    return all(parse_number(w) is not None for w in SEPARATORS.split(word) if w)


@output_options(
    pictures=("svg", "html"),
    format_help=f"{FORMAT_NAMES}. Default: table on a terminal, json in a pipe. csv/tsv/npy write the weights.",
)
def softmax(
    numbers: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NUMBER...",
            show_default=False,
            help="The numbers, separated by spaces or commas; negative numbers are fine. '-' reads them from stdin.",
        ),
        READS_STDIN,
    ] = None,
    temperature: TemperatureOption = 1.0,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 4,
) -> Result:
    """Softmax of a list of numbers: e^x / Σ e^x, the step that turns scores into weights.

    Computed the stable way (the largest number is subtracted first, which
    changes nothing but keeps e^x from overflowing). On a terminal: a table of
    each step. In a pipe: JSON {"input": [...], "temperature": T, "weights": [...]}.
    """
    x = read_numbers(numbers or [])
    return softmax_result(x, temperature, precision)


def read_numbers(words: list[str]) -> np.ndarray:
    """The numbers from the command line, or from stdin for a lone '-'."""
    import numpy as np

    if not words:
        raise UsageError("no numbers given", hint="attn softmax 4.0 -1.0 2.1, or '-' to read them from stdin")
    if STDIN in words:
        if words != [STDIN]:
            raise UsageError("give numbers or '-' (stdin), not both")
        text = read_stdin().decode("utf-8-sig", errors="replace")
        _one_reading(text.split(), STDIN_NAME, text)
        values = [
            _number(w, STDIN_NAME, n)
            for n, line in enumerate(text.split("\n"), 1)
            for w in SEPARATORS.split(line.strip())
            if w
        ]
        if not values:
            raise AttnError("no numbers", source=STDIN_NAME, hint="expected numbers separated by spaces or commas")
    else:
        _one_reading([w for arg in words for w in arg.split()], None, None)
        values = [_number(w) for arg in words for w in SEPARATORS.split(arg.strip()) if w]
        if not values:
            raise UsageError("no numbers given", hint="attn softmax 4.0 -1.0 2.1")
    return np.array(values, dtype=np.float64)


def _one_reading(words: list[str], source: str | None, text: str | None) -> None:
    """Refuse numbers that read two ways: among several words, '1,5' is 1.5
    written with a decimal comma, or the numbers 1 and 5. (One word '3,2,1'
    is a list, as is '30, 20, 10'.)"""
    if len(words) < 2:
        return
    for word in words:
        if DECIMAL_COMMA.fullmatch(word):
            problem = f"{word!r} could be one number written with a decimal comma, or two numbers"
            hint = f"write {word.replace(',', '.')} for one number; separate numbers by spaces or by commas, not both"
            if source is None:
                raise UsageError(problem, hint=hint)
            line = text[: text.find(word)].count("\n") + 1 if text else None
            raise AttnError(problem, source=source, line=line, hint=hint)


def _number(word: str, source: str | None = None, line: int | None = None) -> float:
    """One number; NaN and +inf are refused (-inf is fine: it gets weight 0).
    An argument is a usage error (exit 2), stdin is bad data (exit 1, with its line)."""
    import math

    value = parse_number(word)
    if value is None:
        problem: str | None = f"{clip(word)!r} is not a number"
    else:
        problem = None if not (math.isnan(value) or value == math.inf) else f"{clip(word)} is not allowed"
    if problem is None:
        return value  # type: ignore[return-value]
    hint = "-inf is fine, it gets weight 0; NaN and +inf are not" if value is not None else None
    if source is None:
        raise UsageError(problem, hint=hint)
    raise AttnError(problem, source=source, line=line, hint=hint)


def softmax_result(x: np.ndarray, temperature: float, precision: int) -> Result:
    """The weights, and a table of every step (x, x/T, e^(x/T − max), weight) built only when shown."""
    import numpy as np

    from attncli.core.checks import check_positive
    from attncli.core.reference import softmax

    check_positive("temperature", temperature)
    largest = float(x.max())
    with np.errstate(over="ignore"):  # a tiny temperature: x/T may overflow; (x − max)/T only to −inf
        scaled = x / temperature  # [n], shown
        # x/T − max(x/T) = (x − max x)/T: the same numbers, without inf − inf when x/T overflows
        shifted = (x - largest) / temperature if np.isfinite(largest) else scaled
    weights = softmax(shifted)

    def view() -> Any:
        from rich.text import Text

        from attncli.output.blocks import ColumnBlocks, distinct, fmt, short
        from attncli.output.palette import HeatCell
        from attncli.output.render import stack
        from attncli.output.summary import first_lines

        exps = np.exp(shifted) if np.isfinite(largest) else np.zeros_like(scaled)
        peak = float(scaled.max())
        total = float(exps.sum())
        top = float(weights.max()) or 1.0
        var = "x" if temperature == 1 else f"x/{short(temperature, precision)}"  # what softmax is taken of
        exp = f"e^({var} − {short(peak, precision)})" if np.isfinite(peak) else f"e^{var}"  # this input's e^(x − max)
        heads = ["x"] + ([var] if temperature != 1 else []) + [exp, "weight"]
        body = []
        shown, rest = first_lines(len(x))  # a table of 200,000 numbers is not read, and takes a minute to draw
        for i in shown:
            w = float(weights[i])
            cells: list[str | HeatCell] = [fmt(x[i], precision)]
            cells += [fmt(scaled[i], precision)] if temperature != 1 else []
            cells += [fmt(exps[i], precision), HeatCell(distinct(w, precision), w / top)]
            body.append((str(i + 1), cells))
        note = Text.assemble(
            ("softmax ", "bold"),
            f"of {len(x)} numbers",
            f", temperature {temperature:g}" if temperature != 1 else "",
            "\n",
            f"weight = e^({var} − max) / Σ e^({var} − max)",
            f", max = {short(peak, precision)} (the largest {var})" if np.isfinite(peak) else "",
            ": subtracting the largest number first changes nothing but keeps e^x from overflowing.",
        )
        total_line = Text(
            f"Σ {exp} = {distinct(total, precision)}; the weights sum to {fmt(float(weights.sum()), precision)}."
        )
        return stack(note, ColumnBlocks(heads, body), rest, total_line)

    data = {
        "input": [None if v == -np.inf else v for v in x.tolist()],  # JSON has no -inf
        "temperature": temperature,
        "weights": weights,
    }
    return Result(data, view, {"output": Emitted(weights[None, :])})


COMMAND = CommandSpec(softmax, EXAMPLES, NumbersCommand)
