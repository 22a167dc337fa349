"""The command class every ``attn`` command uses: attn's own help formatter
(``AttnCommand``), refusing an option given twice that takes one value (Click
would silently keep the last), and the output guard (``cli/paths.guard``):
before any command runs, stdin is named once and no output names an input."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attncli.cli.helptext import AttnCommand


class OnceCommand(AttnCommand):
    """A command whose single-value options may be given once: ``--scale 1
    --scale 2`` is a usage error, never last-wins. Options that collect
    (``--keys a --keys b``) are declared as lists and add up. Its files are
    guarded before it runs: every parameter marked READS or WRITES where it
    is declared (``cli/paths.py``) takes part, with no call in the command.
    The command returns its ``Result``, which is written here, once, with the
    command's output flags (``cli/outputs.py``)."""

    def invoke(self, ctx: Any) -> Any:
        from attncli.cli.emit import Result, emit
        from attncli.cli.outputs import OutputFlags
        from attncli.cli.paths import guard, path_roles

        if self.callback is not None:
            roles = path_roles(self.callback)
            flags = {  # how errors name each: --svg, or an argument's metavar (DIR)
                param.name: max(param.opts, key=len)
                if param.param_type_name == "option"
                else (param.metavar or param.name.upper())
                for param in self.params
                if param.name in roles
            }
            guard(roles, ctx.params, flags)
        result = super().invoke(ctx)
        if isinstance(result, Result):
            emit(result, OutputFlags.of(ctx.params), title=f"attn {ctx.info_name}")
            if result.failure is not None:
                raise result.failure
        return None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            try:
                _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            except Exception:  # Click reports malformed command lines itself, below
                order = []
            counts = Counter(
                param
                for param in order
                if getattr(param, "param_type_name", "") == "option"
                and not getattr(param, "multiple", False)
                and not getattr(param, "count", False)
            )
            for param, times in counts.items():
                if times > 1:
                    name = max(param.opts, key=len)
                    ctx.fail(f"{name} is given {times} times; give it once")
        return super().parse_args(ctx, args)


@dataclass(frozen=True)
class CommandSpec:
    """One command as its module declares it (``COMMAND = CommandSpec(run, EXAMPLES)``):
    the function (its docstring is the help), its examples (the first is the one the
    top-level help shows) and its class. ``cli/app.py`` imports the module only when
    the command runs or help lists it."""

    function: Callable[..., Any]
    examples: str
    cls: type[OnceCommand] = OnceCommand
