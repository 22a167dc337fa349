"""The model families attn runs: config.json's ``model_type`` -> its family module.

Adding a family is one module that defines a ``FAMILY`` (see ``base.Family``,
``bert.py`` for an encoder, ``gpt2.py`` for a decoder) and one line here; a
decoder's attention conventions are one entry in ``conventions.CONVENTIONS``
(which also maps GGUF architectures to model types).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attncli.errors import AttnError
from attncli.models import bert, gemma, gpt2, llama
from attncli.models.base import Family

FAMILIES: dict[str, Family[Any, Any]] = {
    "bert": bert.FAMILY,
    "gpt2": gpt2.FAMILY,
    **llama.FAMILIES,  # llama, mistral, qwen2
    **gemma.FAMILIES,  # gemma, gemma2, gemma3_text
}


def family_for(config: Mapping[str, Any], source: str | None = None) -> Family[Any, Any]:
    """The family config.json's model_type names; an error listing the registered ones if none."""
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in FAMILIES:
        return FAMILIES[model_type]
    architectures = config.get("architectures")
    architecture = ", ".join(map(str, architectures)) if isinstance(architectures, list) else None
    architecture = architecture or model_type
    known = "; ".join(f"{family.name} {family.kind}s: model_type {name!r}" for name, family in FAMILIES.items())
    raise AttnError(
        f"unsupported architecture {architecture or 'unknown'!r} (model_type {model_type!r})",
        source=source,
        hint=f"attn runs {known}",
    )


def decoder_names() -> str:
    """The decoder families attn runs, as people write them: "GPT-2, Llama, …, Gemma 3"."""
    names = [family.name for family in FAMILIES.values() if family.decoder is not None]
    return ", ".join(dict.fromkeys(names))
