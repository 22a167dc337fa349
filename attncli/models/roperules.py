"""How a family turns Q and K (``RopeRule``), read from its config as transformers
reads it: the pairing, θ for the layer's type, which features turn (how many, and
the first or the last), and RoPE scaling, which becomes the core's ``RopeScaling``
in one place (``rope_scaling``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from attncli.core.rope import ROPE_SCALINGS, SCALING_FIELDS, Rope, RopeFeatures, RopeScaling, RopeStyle
from attncli.errors import AttnError, UsageError
from attncli.models.fields import Fields
from attncli.models.rules import FULL, SLIDING, Derived, Shape, number

Layout = Literal["hf", "gguf"]  # whose Q/K weights the RoPE pairs: Hugging Face's or llama.cpp's (permuted rows)


@dataclass(frozen=True)
class RopeRule:
    """How a family turns Q and K, and where θ comes from.

    θ: the layer type's entry of a nested ``rope_parameters`` (Gemma 3), else
    ``rope_parameters``/``rope_scaling``'s ``rope_theta`` (transformers ≥ 4.56
    writes it there), else the top-level ``theta_key`` (older config.json:
    ``rope_theta``; GPT-NeoX's ``rotary_emb_base``), else the family's default.
    Scaling: ``rope_scaling`` (the function), as transformers reads it. Pairing:
    Hugging Face's weights pair features by halves (``neox``) except in GPT-J,
    Cohere and DeepSeek (``gptj``, interleaved); llama.cpp permutes the Q and K
    rows of ``llama`` GGUFs so that adjacent features pair (``gptj``), and keeps
    halves for the others. The rotated features: ``partial_rotary_factor`` (or
    the family's ``fraction`` field) · head_dim, or the ``dim_key`` field; the
    first of the head's features, or the last (``features``, DeepSeek).
    """

    style: RopeStyle = "neox"
    gguf_style: RopeStyle = "neox"
    theta: float = 10000.0
    theta_key: str | None = "rope_theta"  # None: θ is fixed (GPT-J's 10000)
    local_theta: tuple[str, float] | None = None  # sliding layers' θ field and default (Gemma 3)
    scaled_layers: str | None = None  # the one layer type an old rope_scaling applies to (Gemma 3: full)
    layers: str | None = None  # the one layer type RoPE turns (Cohere 2: sliding; its full layers have none)
    fraction: str = "partial_rotary_factor"  # the top-level field of the rotated fraction (GPT-NeoX: rotary_pct)
    dim_key: str = "rotary_dim"  # the field of the rotated features' count (DeepSeek: qk_rope_head_dim)
    features: RopeFeatures = "first"
    interleave: str | None = None  # DeepSeek: this field true (its default) pairs features interleaved
    renamed: Mapping[str, str] | None = None  # older scaling types' names (Phi-3: su and yarn are longrope)
    unless: str | None = None  # a flag that turns RoPE off (Falcon: alibi)

    def read(
        self, fields: Fields, layer_type: str, why: str | None, shape: Shape, layout: Layout
    ) -> tuple[Rope | None, list[Derived]]:
        if self.unless is not None and fields.flag(self.unless, False):
            return None, [Derived("RoPE", "none", fields.name(self.unless))]
        if self.layers is not None and layer_type != self.layers:
            kind = "full" if layer_type == FULL else "sliding"
            return None, [Derived("RoPE", f"none ({kind} layer)", why)]
        skip_scaling = self.scaled_layers is not None and layer_type != self.scaled_layers
        params, where = rope_parameters(fields, layer_type, skip_scaling)
        scaling, scaling_from = rope_scaling(params, where, fields, self.renamed)
        if "rope_theta" in params:
            theta, field_name = params["rope_theta"], f"{where}.rope_theta"
            if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
                raise AttnError(f"{field_name} must be a positive number, got {theta!r}", source=fields.source)
        elif layer_type == SLIDING and self.local_theta:
            key, default = self.local_theta
            theta, field_name = fields.number(key, default), fields.name(key) if fields.given(key) else "default"
        elif self.theta_key is not None and fields.given(self.theta_key):
            theta, field_name = fields.number(self.theta_key), fields.name(self.theta_key)
        else:
            theta, field_name = self.theta, "default"
        dim, dim_text, dim_field = self._dim(fields, params, where, shape)
        style, style_text = self.style, ""
        if self.interleave is not None:
            interleaved = fields.flag(self.interleave, True)
            style = "gptj" if interleaved else "neox"
            style_text = fields.name(self.interleave) + ("" if interleaved else " false")
        if layout == "gguf":
            style = self.gguf_style
        text = f"{style} θ {number(float(theta))}" + dim_text
        rope = Rope(style, float(theta), dim, scaling=scaling, features=self.features if dim else "first")
        sources = ", ".join(x for x in (field_name, dim_field, style_text) if x)
        return rope, [Derived("RoPE", text, sources), *([scaling_from] if scaling_from else [])]

    def _dim(self, fields: Fields, params: Mapping[str, Any], where: str, shape: Shape) -> tuple[int | None, str, str]:
        """The rotated features (None: all), the words that say so and the field they came from:
        the fraction · head_dim, or the ``dim_key`` field."""
        fraction = self.fraction
        if "partial_rotary_factor" in params or fields.given(fraction):
            inside = "partial_rotary_factor" in params
            factor = params["partial_rotary_factor"] if inside else fields.raw[fraction]
            name = f"{where}.partial_rotary_factor" if inside else fields.name(fraction)
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
                raise AttnError(f"{name} must be a number in (0, 1], got {factor!r}", source=fields.source)
            dim = int(shape.head_dim * factor)
        elif fields.given(self.dim_key):
            dim, name = fields.whole(self.dim_key), fields.name(self.dim_key)
        else:
            return None, "", ""
        if dim == shape.head_dim:
            return None, "", ""
        if dim % 2 or dim > shape.head_dim:
            raise AttnError(
                f"{name} gives {dim} rotated features of {shape.head_dim}",
                source=fields.source,
                hint="RoPE turns an even number of features, at most the head size",
            )
        which = "" if self.features == "first" else "the last "
        return dim, f" on {which}{dim} of {shape.head_dim} features", name


def deepseek_scale(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """DeepSeek-V3: 1/√(qk_nope_head_dim + qk_rope_head_dim), times mscale² when its RoPE
    is scaled with ``mscale_all_dim`` (YaRN's 0.1 · mscale_all_dim · ln factor + 1)."""
    scale, text, why = 1 / math.sqrt(shape.head_dim), f"1/√{shape.head_dim}", [shape.head_dim_field]
    params, where = rope_parameters(fields, FULL)
    if params.get("rope_type", params.get("type", "default")) not in ("default", None):
        all_dim, factor = params.get("mscale_all_dim") or 0, params.get("factor")
        for name, value in (("mscale_all_dim", all_dim), ("factor", factor)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise AttnError(f"{where}.{name} must be a number, got {value!r}", source=fields.source)
        if all_dim and factor is not None and factor > 1:
            mscale = 0.1 * all_dim * math.log(factor) + 1.0
            scale, text = scale * mscale * mscale, f"{text} · {mscale:.6g}²"
            why.append(f"{where}.mscale_all_dim")
    return scale, Derived("scale", text, ", ".join(why))


def rope_parameters(fields: Fields, layer_type: str, skip_scaling: bool = False) -> tuple[Mapping[str, Any], str]:
    """The RoPE parameters that apply to this layer type, and their field's name:
    ``rope_scaling`` (older config.json) or ``rope_parameters``, nested by layer type or not."""
    for key in ("rope_parameters",) if skip_scaling else ("rope_scaling", "rope_parameters"):  # rope_scaling first
        params = fields.get(key)
        if params is None:
            continue
        if not isinstance(params, Mapping):
            raise fields.fail(key, "an object", params)
        if layer_type in params or (SLIDING in params or FULL in params):  # nested by layer type (Gemma 3)
            inner = params.get(layer_type) or {}
            if not isinstance(inner, Mapping):
                raise AttnError(
                    f"{fields.name(key)}.{layer_type} must be an object, got {inner!r}", source=fields.source
                )
            return inner, f"{fields.name(key)}.{layer_type}"
        return params, fields.name(key)
    return {}, "rope_parameters"


def rope_scaling(
    params: Mapping[str, Any], where: str, fields: Fields, renamed: Mapping[str, str] | None = None
) -> tuple[RopeScaling | None, Derived | None]:
    """Hugging Face's RoPE scaling (``rope_scaling``, or ``rope_parameters`` with a ``rope_type``)
    as attn's ``RopeScaling``, and the words that say so: the one place a scaling type is read.

    As transformers reads it: ``dynamic`` grows past ``max_position_embeddings``;
    ``llama3``, ``yarn`` and ``longrope`` take ``original_max_position_embeddings``
    from the top of config.json when it is there (Phi-3), else from the scaling's
    own fields, else ``max_position_embeddings``; ``yarn`` and ``longrope`` without
    a factor take max_position_embeddings / original_max_position_embeddings.
    """
    kind = params.get("rope_type", params.get("type", "default"))
    kind = (renamed or {}).get(kind, kind) if isinstance(kind, str) else kind
    if kind in ("default", None):
        return None, None
    if kind not in ROPE_SCALINGS:
        raise AttnError(
            f"{where} type {kind!r} is not yet supported",
            source=fields.source,
            hint=f"attn applies {', '.join(ROPE_SCALINGS)} RoPE scaling",
        )
    needed, optional = SCALING_FIELDS[kind]
    values = {name: params[name] for name in needed + optional if params.get(name) is not None}
    original = "original_max_position_embeddings"
    if kind == "dynamic":
        values[original] = fields.whole("max_position_embeddings")
    elif original in needed:
        if fields.given(original):
            values[original] = fields.whole(original)
        elif original not in values:
            values[original] = fields.whole("max_position_embeddings")
    if kind in ("yarn", "longrope") and values.get("factor") is None and values.get(original):
        values["factor"] = fields.whole("max_position_embeddings") / values[original]
    for name in ("short_factor", "long_factor"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    try:
        scaling = RopeScaling(kind, **values)
    except (UsageError, TypeError) as e:  # a field of the wrong type: RopeScaling's own line, named
        message = e.message if isinstance(e, UsageError) else "a field of the wrong type"
        raise AttnError(
            f"{where}: {message}", source=fields.source, hint=e.hint if isinstance(e, UsageError) else None
        ) from None
    factor = f" ×{number(float(scaling.factor))}" if scaling.factor is not None else ""
    return scaling, Derived("RoPE scaling", f"{kind}{factor}", where)
