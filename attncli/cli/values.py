"""Option values that are more than a number or a word, each parsed by one
function for the command line and bundle settings alike: a window ("3,0" or
[3, 0]) and a RoPE scaling ("yarn:factor=32,original_max_position_embeddings=4096",
config.json's own object as JSON, or that object in a bundle).

A parser raises ``AttnError`` without naming the flag or the setting;
``ValueParser`` names the flag on the command line, ``settings.py`` the
setting in a bundle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:
    from attncli.core.rope import RopeScaling


@dataclass(frozen=True)
class ValueParser:
    """The one parser of a value that is more than a number or a word (a window's
    "3,0"), for the command line (Typer's ``parser=``) and bundle settings alike
    (``settings.py`` calls ``parse`` and names the setting in its errors)."""

    parse: Callable[[Any], Any]  # raises AttnError without naming the flag or setting
    flag: str

    def __call__(self, value: Any) -> Any:
        try:
            return self.parse(value)
        except AttnError as e:
            raise UsageError(f"{self.flag}: {e.message}", hint=e.hint) from None


def window_sides(value: Any) -> tuple[int, int]:
    """A window as typed ("3,0") or as a bundle writes it ([3, 0], "3,0") -> (left, right)."""
    if isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        parts = [p.strip() for p in str(value).strip("[]() ").split(",")]
    try:
        if len(parts) != 2 or any(isinstance(p, bool) or (isinstance(p, float) and not p.is_integer()) for p in parts):
            raise ValueError
        left, right = (int(p) for p in parts)
    except (ValueError, TypeError, OverflowError):
        shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        raise AttnError(
            f"expected LEFT,RIGHT (two whole numbers, -1 for unbounded), got {shown!r}",
            hint="a causal sliding window of W keys is W-1,0",
        ) from None
    return left, right


SCALING_EXAMPLE = "e.g. yarn:factor=32,original_max_position_embeddings=4096"


def rope_scaling_value(value: Any) -> RopeScaling | None:
    """A RoPE scaling as typed or as a bundle sets it -> the core's ``RopeScaling``
    (None: ``none``, no scaling). Typed, it is ``KIND:FIELD=VALUE,…`` with the
    fields of config.json's ``rope_scaling`` (a list in brackets: ``[1,1.5]``),
    or that object as JSON; in a bundle, the object itself."""
    import json

    from attncli.core.rope import RopeScaling

    if value is None or isinstance(value, RopeScaling):
        return value
    if isinstance(value, Mapping):
        return _scaling_from_object(value)
    text = str(value).strip()
    if text.lower() == "none":
        return None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            raise AttnError(
                "not a JSON object", hint="give config.json's rope_scaling object, or " + SCALING_EXAMPLE
            ) from None
        if not isinstance(parsed, Mapping):
            raise AttnError("not a JSON object", hint=SCALING_EXAMPLE)
        return _scaling_from_object(parsed)
    kind, _, rest = text.partition(":")
    values: dict[str, Any] = {}
    for item in _items(rest):
        key, equals, raw = item.partition("=")
        if not equals or not key.strip():
            raise AttnError(f"expected FIELD=VALUE, got {item!r}", hint=SCALING_EXAMPLE)
        values[key.strip()] = _value(key.strip(), raw.strip())
    return _scaling(kind.strip(), values)


def _scaling_from_object(value: Mapping[str, Any]) -> RopeScaling:
    """config.json's ``rope_scaling`` (or ``rope_parameters``) object: ``rope_type`` (or ``type``) and its fields."""
    values = {str(k): v for k, v in value.items()}
    kind = values.pop("rope_type", None) or values.pop("type", None)
    values.pop("type", None)
    for name, flag in (("rope_theta", "--rope-theta"), ("partial_rotary_factor", "--rope-dim")):
        if name in values:
            raise AttnError(f"{name} is not a field of RoPE scaling", hint=f"give it as {flag}")
    if not isinstance(kind, str):
        raise AttnError("the object has no rope_type", hint='e.g. {"rope_type": "linear", "factor": 2}')
    for name in ("short_factor", "long_factor"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    return _scaling(kind, values)


def _scaling(kind: str, values: dict[str, Any]) -> RopeScaling:
    from attncli.core.checks import either
    from attncli.core.rope import ROPE_SCALINGS, SCALING_FIELDS, RopeScaling

    if kind not in ROPE_SCALINGS:
        raise AttnError(f"unknown RoPE scaling {kind!r}", hint=f"use {either(ROPE_SCALINGS)} ({SCALING_EXAMPLE})")
    known = {f.name for f in fields(RopeScaling)} - {"kind"}
    for name in values:
        if name not in known:
            needed, optional = SCALING_FIELDS[kind]
            raise AttnError(
                f"{kind} RoPE scaling has no field {name!r}", hint=f"it takes {', '.join(needed + optional)}"
            )
    return RopeScaling(kind, **values)  # type: ignore[arg-type]


def _items(text: str) -> list[str]:
    """'a=1,b=[1,2]' -> ['a=1', 'b=[1,2]']: commas outside brackets split."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _value(key: str, raw: str) -> Any:
    """A field's value as typed: true/false, a list in brackets, or a number."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    try:
        if raw.startswith("["):
            if not raw.endswith("]"):
                raise ValueError
            return tuple(float(x) for x in raw[1:-1].split(",") if x.strip())
        return int(raw) if re.fullmatch(r"[+-]?\d+", raw) else float(raw)
    except ValueError:
        raise AttnError(
            f"{key}={raw!r} is not a number", hint="fields take numbers, true/false, or a list such as [1,1.5]"
        ) from None
