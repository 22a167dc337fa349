"""Options that travel together, declared once and gathered into one typed
object: a command declares one parameter (``attention: AttentionFlags``,
``look: ViewFlags``); on the command line it becomes the group's options, in
its place, and the command is called with them gathered into that object."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any


def option_group(parameter: str, flags: Callable[..., Any], options: dict[str, tuple[Any, Any]],
                 names: tuple[str, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that replaces the command's parameter ``parameter`` by the
    options ``names`` (each an ``Annotated`` alias and its default in ``options``)
    and calls the command with ``parameter=flags(**those values)``."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        parameters = []
        for p in inspect.signature(command).parameters.values():
            if p.name == parameter:
                for name in names:
                    alias, default = options[name]
                    parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=alias,
                                                        default=default))
            else:
                parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                                            annotation=hints.get(p.name, p.annotation)))

        @functools.wraps(command)
        def with_flags(**values: Any) -> Any:
            gathered = flags(**{name: values.pop(name) for name in names})
            return command(**{parameter: gathered}, **values)

        with_flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate
