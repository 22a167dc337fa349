"""Options that travel together, declared once and gathered into one typed
object: a command declares one parameter (``attention: AttentionFlags``,
``look: ViewFlags``); on the command line it becomes the group's options, in
its place, and the command is called with them gathered into that object."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import typer


def option_group(
    parameter: str, flags: Callable[..., Any], options: dict[str, tuple[Any, Any]], names: tuple[str, ...]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that replaces the command's parameter ``parameter`` by the
    options ``names`` (each an ``Annotated`` alias and its default in ``options``)
    and calls the command with ``parameter=flags(**those values)``. When ``flags``
    has a ``given`` field, it learns which options were typed on the command line
    (they override a bundle's settings)."""
    wants_given = dataclasses.is_dataclass(flags) and "given" in {f.name for f in dataclasses.fields(flags)}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        # Typer passes the Click context to the one parameter typed typer.Context: the command's, or ours.
        own_context = next(
            (name for name, hint in hints.items() if isinstance(hint, type) and issubclass(hint, typer.Context)), None
        )
        context = own_context or f"_{parameter}_context"
        parameters = []
        for p in inspect.signature(command).parameters.values():
            if p.name == parameter:
                for name in names:
                    alias, default = options[name]
                    parameters.append(
                        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=alias, default=default)
                    )
                if wants_given and own_context is None:
                    parameters.append(
                        inspect.Parameter(context, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
                    )
            else:
                parameters.append(
                    p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation))
                )

        @functools.wraps(command)
        def with_flags(**values: Any) -> Any:
            gathered = {name: values.pop(name) for name in names}
            if wants_given:
                from attncli.cli.settings import given_on_command_line

                ctx = values[context] if own_context else values.pop(context)
                gathered["given"] = given_on_command_line(ctx, names)
            return command(**{parameter: flags(**gathered)}, **values)

        with_flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate
