"""One family's attention conventions as a ``Convention``: the rules it is made of
(``rules.py``, ``roperules.py``) put together, and what they give for one layer,
a ``LayerAttention``: the layer's ``AttentionOptions`` and where each setting came
from. The families themselves are declared in ``conventions.py``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attncli.core.options import AttentionOptions
from attncli.errors import UsageError
from attncli.models.fields import Fields
from attncli.models.roperules import Layout, RopeRule
from attncli.models.rules import (
    Alibi,
    Derived,
    LayerTypes,
    Need,
    ScaleRule,
    Shape,
    Sizes,
    Window,
    inverse_sqrt_head_dim,
    number,
)


@dataclass(frozen=True)
class LayerAttention:
    """One layer's attention, as attn's options, with where each setting came from."""

    model_type: str
    layer: int
    shape: Shape
    options: AttentionOptions
    derived: tuple[Derived, ...]
    layer_type: str  # "sliding_attention" or "full_attention"
    name: str = ""  # the family as people write it: "Gemma 2"
    needs: tuple[Need, ...] = ()  # arrays the family adds that come from a file (gpt-oss's sinks, T5's bias)
    encoder: bool = False  # T5's and BERT's layers are an encoder's (layer N of the encoder)

    def describe(self) -> str:
        """'scale 1/√64 (head_dim), causal, window 4095,0 (layer_types[3] sliding, sliding_window 4096), …'"""
        return ", ".join(map(str, self.derived))


Check = Callable[[Fields], None]  # refuses what attn does not derive (BERT's relative positions)


@dataclass(frozen=True)
class Convention:
    """How one family's attention reads from its config: every rule in one place."""

    model_type: str  # config.json's model_type
    name: str  # as people write it: "Llama"
    scale: ScaleRule = inverse_sqrt_head_dim
    sizes: Sizes = Sizes()
    layer_types: LayerTypes = LayerTypes()
    window: Window | None = None
    rope: RopeRule | None = None
    softcap: str | None = None  # the field of the logits' soft-cap (Gemma 2: attn_logit_softcapping)
    alibi: Alibi | None = None
    causal: bool = True  # False: an encoder's layers (BERT, T5's encoder) see every key
    needs: tuple[Need, ...] = ()  # arrays from a file (gpt-oss's sinks, T5's position bias)
    aliases: Mapping[str, str] = field(default_factory=dict)  # a field -> its older name (BLOOM's n_head)
    defaults: Mapping[str, Any] = field(default_factory=dict)  # the config class's defaults, where they matter
    check: Check | None = None
    nested: tuple[str, Convention] | None = None  # (field, its family): the config is inside (Gemma 3's text_config)
    gguf: tuple[str, ...] = ()  # GGUF general.architecture values that are this family
    gguf_keys: Mapping[str, str] = field(default_factory=dict)  # GGUF key after "{arch}." -> config.json name

    def complete(self, fields: Fields) -> Fields:
        """The fields as the family's config class reads them (older names, defaults)."""
        return fields.completed(self.aliases, self.defaults)

    def shape(self, fields: Fields) -> Shape:
        if self.nested:
            return self.nested[1].shape(fields.sub(self.nested[0]))
        return self.sizes.read(self.complete(fields))

    def layer(self, fields: Fields, layer: int, layout: Layout | None = None) -> LayerAttention:
        """Layer ``layer``'s attention options. ``layout``: whose Q/K rows the model's
        weights have (default: the file's, a GGUF's llama.cpp's)."""
        if self.nested:
            return self.nested[1].layer(fields.sub(self.nested[0]), layer, layout)
        fields = self.complete(fields)
        if self.check is not None:
            self.check(fields)
        shape = self.sizes.read(fields)
        if not 0 <= layer < shape.n_layer:
            raise UsageError(
                f"layer {layer} is out of range: the model has {shape.n_layer} layers (0 to {shape.n_layer - 1})",
                source=fields.source,
            )
        scale, scale_from = self.scale(fields, layer, shape)
        derived = [scale_from, Derived("causal", "") if self.causal else Derived("not causal", "", "an encoder")]
        layer_type, type_field = self.layer_types.of(fields, layer, shape)
        window = None
        if self.window is not None:
            window, window_from = self.window.read(fields, layer_type, type_field)
            if window_from is not None:
                derived.append(window_from)
        softcap = fields.maybe_number(self.softcap) if self.softcap else None
        if softcap is not None and self.softcap:
            derived.append(Derived("soft-cap", number(softcap), fields.name(self.softcap)))
        rope = None
        if self.rope is not None:
            rope, rope_from = self.rope.read(
                fields, layer_type, type_field, shape, layout or ("gguf" if fields.origin == "gguf" else "hf")
            )
            derived.extend(rope_from)
        slopes = None
        if self.alibi is not None:
            slopes, alibi_from = self.alibi.read(fields, shape, scale)
            if alibi_from is not None:
                derived.append(alibi_from)
        derived.extend(Derived(need.option, "from a file", need.what) for need in self.needs)
        options = AttentionOptions(
            scale=scale,
            causal="bottom-right" if self.causal else None,
            window=window,
            softcap=softcap,
            rope=rope,
            alibi=slopes == (),
            alibi_slopes=_array(slopes) if slopes else None,
        )
        return LayerAttention(
            self.model_type,
            layer,
            shape,
            options,
            tuple(derived),
            layer_type,
            self.name,
            self.needs,
            encoder=not self.causal,
        )


def _array(values: tuple[float, ...]) -> Any:
    import numpy as np

    return np.array(values, dtype=np.float64)
