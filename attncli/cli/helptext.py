"""Help a person can follow: attn writes its own --help, the same with every
Typer version, in plain text (no markup to eat "[vector]"): metavars people
read (FILE, N, dot|cosine; flags show none), defaults and ranges in words,
the command's examples last; and at the top, each command with one example."""

from __future__ import annotations

import inspect
import re
from enum import Enum
from typing import Any

from typer.core import TyperCommand

RULE_WIDTH = 100  # help is wrapped to the terminal, at most this wide

# Metavars by type when an option does not name its own: what a person types there.
TYPE_METAVARS = {int: "N", float: "NUMBER", str: "TEXT"}


# Typer up to 0.2x keeps Click's ``param.type`` (choices, min, max); later ones a
# ``type_descriptor`` and ``param.min``/``param.max``: these read either.


def _choices(param: Any) -> list[str] | None:
    descriptor = getattr(param, "type_descriptor", None)
    choices = (
        descriptor.choices
        if descriptor is not None and descriptor.is_choice
        else getattr(getattr(param, "type", None), "choices", None)
    )
    return [str(getattr(c, "value", c)) for c in choices] if choices else None


def _bound(param: Any, name: str) -> Any:
    value = getattr(param, name, None)
    return value if value is not None else getattr(getattr(param, "type", None), name, None)


def _python_type(param: Any) -> Any:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        return descriptor.annotation
    return {"integer": int, "integer range": int, "float": float, "float range": float}.get(
        getattr(getattr(param, "type", None), "name", ""), str
    )


def metavar(param: Any) -> str:
    """What to type after an option (empty for a flag) or for an argument."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    if param.metavar:
        return str(param.metavar)
    choices = _choices(param)
    if choices:
        return "|".join(choices)
    return TYPE_METAVARS.get(_python_type(param), "VALUE")


def shown_default(param: Any) -> str | None:
    """The default in words, or None when there is nothing worth saying."""
    if not getattr(param, "show_default", True) or getattr(param, "is_flag", False) and not param.default:
        return None
    default = param.default
    if default is None or default is False or default == () or default == []:
        return None
    if isinstance(default, Enum):
        default = default.value
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return str(default)


def extras(param: Any) -> str:
    """'[default: 3; 0 to 17; env ATTN_MODEL]', or '' when there is none of these."""
    parts = []
    default = shown_default(param)
    if default is not None:
        parts.append(f"default: {default}")
    low, high = _bound(param, "min"), _bound(param, "max")
    if low is not None and high is not None:
        parts.append(f"{low} to {high}")
    elif low is not None:
        parts.append(f"at least {low}")
    envvar = getattr(param, "envvar", None)
    if envvar and isinstance(envvar, str):
        parts.append(f"or set {envvar}")
    if getattr(param, "required", False) and param.param_type_name == "argument":
        parts.append("required")
    return f"  [{'; '.join(parts)}]" if parts else ""


def usage(command: Any, ctx: Any) -> str:
    """'[OPTIONS] FILE...': the arguments by their metavars, optional ones in brackets."""
    pieces = ["[OPTIONS]"]
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = metavar(param)
            if param.nargs != 1 and not name.endswith("...") and " " not in name:  # "OUT [Q K V | BUNDLE]" says it
                name += "..."
            pieces.append(name if param.required else f"[{name}]")
    return " ".join(pieces)


def write_text(formatter: Any, text: str | None) -> None:
    """A docstring or epilog, indented; paragraphs after a lone '\\b' keep their lines."""
    if not text:
        return
    formatter.write_paragraph()
    with formatter.indentation():
        formatter.write_text(inspect.cleandoc(text).split("\f")[0])


def write_parameters(command: Any, ctx: Any, formatter: Any) -> None:
    """The arguments, then the options, each with what to type and its help."""
    arguments, options = [], []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            arguments.append((metavar(param), (getattr(param, "help", None) or "") + extras(param)))
        else:
            names = ", ".join(sorted(param.opts, key=len) + list(param.secondary_opts))
            value = metavar(param)
            options.append((f"{names} {value}".rstrip(), (param.help or "") + extras(param)))
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows, col_max=34)


class AttnCommand(TyperCommand):
    """A Typer command whose --help attn writes itself (see the module)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:  # Click's Context and HelpFormatter, vendored
        formatter.width = min(formatter.width or RULE_WIDTH, RULE_WIDTH)
        formatter.write_usage(ctx.command_path, usage(self, ctx))
        write_text(formatter, self.help)
        write_parameters(self, ctx, formatter)
        write_text(formatter, self.epilog)


def first_example(epilog: str | None) -> str | None:
    """The first example line of a command's EXAMPLES ('attn run samples/colors.yaml')."""
    for line in (epilog or "").splitlines():
        if line.strip().startswith("attn "):
            return re.sub(r"\s{2,}#", "  #", line.strip())
    return None


def format_group_help(group: Any, ctx: Any, formatter: Any, closing: str) -> None:
    """The top-level help: what attn does, each command with one example, the options."""
    formatter.width = min(formatter.width or RULE_WIDTH, RULE_WIDTH)
    formatter.write_usage(ctx.command_path, "[OPTIONS] COMMAND [ARGS]...")
    write_text(formatter, group.help)
    commands = [(name, group.get_command(ctx, name)) for name in group.list_commands(ctx)]
    commands = [(name, c) for name, c in commands if c is not None and not c.hidden]
    indent = max(len(name) for name, _ in commands) + 2
    with formatter.section("Commands"):
        margin = " " * formatter.current_indent
        for name, command in commands:
            short = command.get_short_help_str(limit=formatter.width - formatter.current_indent - indent)
            formatter.write(f"{margin}{name.ljust(indent)}{short}\n")
            example = first_example(command.epilog)
            if example:  # written whole: an example cut in two could not be pasted
                formatter.write(f"{margin}{' ' * indent}{example}\n")
    write_parameters(group, ctx, formatter)
    write_text(formatter, closing)
