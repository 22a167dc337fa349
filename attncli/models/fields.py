"""A model's settings as config.json names them, and where each came from.

A Hugging Face folder's ``config.json`` and a GGUF file's metadata say the
same things under different names (``rope_theta`` is ``llama.rope.freq_base``
in a GGUF). ``Fields`` holds them under config.json's names, the one
vocabulary the conventions and families read, and remembers each value's
name in the file it came from, so that an error or a header names the field
the user can find (``llama.rope.freq_base``, not ``rope_theta``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from attncli.errors import AttnError

Origin = Literal["config.json", "gguf"]
_MISSING: Any = object()


class Fields(Mapping[str, Any]):
    """config.json's fields (or a GGUF's metadata under config.json's names), read with checks."""

    def __init__(
        self,
        values: Mapping[str, Any],
        source: str | None = None,
        names: Mapping[str, str] | None = None,
        origin: Origin = "config.json",
    ) -> None:
        self.raw, self.source, self.names, self.origin = dict(values), source, dict(names or {}), origin

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def model_type(self) -> Any:
        return self.raw.get("model_type")

    def name(self, key: str) -> str:
        """The field as the file names it: ``rope_theta``, or ``llama.rope.freq_base`` from a GGUF."""
        return self.names.get(key, key)

    def given(self, key: str) -> bool:
        """The file sets this field (to anything but null)."""
        return self.raw.get(key) is not None

    def fail(self, key: str, wanted: str, value: Any) -> AttnError:
        return AttnError(f"{self.name(key)} must be {wanted}, got {value!r}", source=self.source)

    def whole(self, key: str, default: Any = _MISSING, *, least: int = 1) -> int:
        """A whole number ≥ ``least`` (the default when the field is absent or null)."""
        value = self.raw.get(key)
        if value is None and default is not _MISSING:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            wanted = "a positive whole number" if least == 1 else f"a whole number ≥ {least}"
            raise self.fail(key, wanted, value)
        return value

    def maybe_whole(self, key: str) -> int | None:
        """A positive whole number, or None when the field is absent or null."""
        return None if self.raw.get(key) is None else self.whole(key)

    def number(self, key: str, default: Any = _MISSING) -> float:
        """A positive finite number (the default when the field is absent or null)."""
        value = self.raw.get(key)
        if value is None and default is not _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise self.fail(key, "a positive number", value)
        return float(value)

    def maybe_number(self, key: str) -> float | None:
        return None if self.raw.get(key) is None else self.number(key)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def text(self, key: str, default: str) -> str:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(key, "a string", value)
        return value

    def sub(self, key: str) -> Fields:
        """A nested object (Gemma 3's ``text_config``, MPT's ``attn_config``) as Fields, each
        field named by its path (``text_config.sliding_window``); {} when absent or null."""
        value = self.raw.get(key)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise self.fail(key, "an object", value)
        prefix = self.name(key)
        return Fields(value, self.source, {k: f"{prefix}.{k}" for k in value}, self.origin)

    def completed(self, aliases: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None) -> Fields:
        """These fields as the family's config class reads them: a field absent but given
        under an older name (``aliases``: BLOOM's ``n_head`` for ``num_attention_heads``) is
        read from there and named so; a field still absent takes the class's default
        (``defaults``: Gemma 2's ``attn_logit_softcapping`` 50), named "… by default"."""
        raw, names = dict(self.raw), dict(self.names)
        for key, old in (aliases or {}).items():
            if key not in raw and old in raw:
                raw[key], names[key] = raw[old], self.name(old)
        for key, value in (defaults or {}).items():
            if key not in raw:
                raw[key], names[key] = value, f"{key} by default"
        return Fields(raw, self.source, names, self.origin)

    def strings(self, key: str) -> list[str] | None:
        """A list of strings (``layer_types``), or None when absent."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "a list of strings", value)
        return value


def as_fields(config: Mapping[str, Any], source: str | None = None) -> Fields:
    """``config`` as Fields (a plain mapping is config.json's fields)."""
    return config if isinstance(config, Fields) else Fields(config, source)
