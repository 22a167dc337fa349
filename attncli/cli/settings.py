"""A bundle's plain settings (``causal: true``, ``scale: 1``, ``heads: 2``):
each one is an option of the command, honoured unless that option is given on
the command line, or refused naming the key. Never ignored.

A setting has the name of the option's parameter (``causal_align``;
``causal-align`` and any case work too) and is converted by the parameter's
own type, with the same limits as on the command line, so that a new option
is a bundle setting with no more code.
"""

from __future__ import annotations

import difflib
import enum
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from attncli.errors import AttnError
from attncli.text import clip


def given_on_command_line(ctx: Any, names: Iterable[str]) -> frozenset[str]:
    """Which of the parameters ``names`` were typed on the command line (not defaults)."""
    given = set()
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.add(name)
    return frozenset(given)


@dataclass(frozen=True)
class BundleSettings:
    """The settings of one bundle, by their parameter names, and where they are."""

    values: dict[str, Any]
    source: str
    lines: dict[str, int]

    @classmethod
    def of(cls, meta: dict[str, Any], source: str, lines: dict[str, int], accepted: Iterable[str]) -> BundleSettings:
        """The settings in ``meta``; a key that is not one of ``accepted`` is refused, with a suggestion."""
        accepted = list(accepted)
        values, where = {}, {}
        for key, value in meta.items():
            name = str(key).lower().replace("-", "_")
            if name not in accepted:
                close = difflib.get_close_matches(name, accepted, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise AttnError(
                    f"the bundle has an unknown setting {key!r}",
                    source=source,
                    line=lines.get(key),
                    hint=f"{hint}a bundle may set {', '.join(accepted)}",
                )
            values[name] = value
            if key in lines:
                where[name] = lines[key]
        return cls(values, source, where)

    def error(self, name: str, message: str) -> AttnError:
        return AttnError(f"{name}: {message}", source=self.source, line=self.lines.get(name))

    def fill(self, current: dict[str, Any], annotations: dict[str, Any], given: frozenset[str]) -> dict[str, Any]:
        """``current`` (parameter values) with this bundle's settings for the
        parameters in ``annotations`` not ``given`` on the command line, each
        converted by its annotation: its type and limits, or its parser (a
        window's "LEFT,RIGHT" or [3, 0])."""
        result = dict(current)
        for name, value in self.values.items():
            if name not in annotations or name in given:
                continue
            result[name] = self.convert(name, value, annotations[name])
        return result

    def convert(self, name: str, value: Any, annotation: Any) -> Any:
        """A setting as the parameter typed ``annotation`` takes it, within its limits."""
        kind, limits = _unwrapped(annotation)
        shown = f"{value:g}" if isinstance(value, float) else repr(value)
        if value is None:
            raise self.error(name, "a value is missing")
        parse = getattr(getattr(limits, "parser", None), "parse", None)  # the option's own parser (cli/attention.py)
        if parse is not None:
            try:
                return parse(value)
            except AttnError as e:
                raise AttnError(
                    f"{name}: {e.message}", source=self.source, line=self.lines.get(name), hint=e.hint
                ) from None
        if kind is bool:
            if not isinstance(value, bool):
                raise self.error(name, f"expected true or false, found {shown}")
            return value
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            choices = [member.value for member in kind]
            if str(value) not in choices:
                raise self.error(name, f"expected {' or '.join(choices)}, found {shown}")
            return kind(str(value))
        if kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(name, f"expected a number, found {shown}")
            if kind is int and isinstance(value, float) and not value.is_integer():
                raise self.error(name, f"expected a whole number, found {shown}")
            try:
                number = kind(value)
            except OverflowError:  # a whole number past float64's range (JSON keeps its digits)
                raise self.error(name, f"{clip(shown)} is too large (float64 holds up to 1.8e308)") from None
            low, high = getattr(limits, "min", None), getattr(limits, "max", None)
            if (low is not None and number < low) or (high is not None and number > high):
                bounds = f"at least {low}" if high is None else f"from {low} to {high}"
                raise self.error(name, f"must be {bounds}, found {shown}")
            return number
        if kind is str:
            return str(value)
        raise self.error(name, "cannot be set in a bundle")  # pragma: no cover - an option of a new type


def _unwrapped(annotation: Any) -> tuple[Any, Any]:
    """(the type, the typer.Option info with its min/max) of ``Annotated[T | None, typer.Option(...)]``."""
    limits = None
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *extras = typing.get_args(annotation)
        limits = next((x for x in extras if hasattr(x, "min")), None)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation, limits


def settle(flags: Any, settings: BundleSettings, annotations: dict[str, Any]) -> Any:
    """``flags`` (an ``AttentionFlags``) with a bundle's settings for the options in
    ``annotations`` not given on the command line, each converted by its option's type,
    limits or parser; then checked once by the core (an error names the setting that
    caused it, and its line)."""
    values = settings.fill({name: getattr(flags, name) for name in annotations}, annotations, flags.given)
    set_here = frozenset(n for n in settings.values if n in values and n not in flags.given)
    filled = replace(flags, **values, bundle=flags.bundle | set_here)
    try:
        filled.build()
    except AttnError as e:
        culprit = (
            None
            if e.source is not None
            else next(
                (
                    name
                    for name in settings.values
                    if name in values and name not in flags.given and not flags.builds_alone(name, values[name])
                ),
                None,
            )
        )
        if culprit is None:  # the command line's own mistake, or one of data
            raise
        raise AttnError(e.message, source=settings.source, line=settings.lines.get(culprit), hint=e.hint) from None
    return filled
