"""Each model family's attention conventions, declared once: how to read one
layer's attention settings from its config.json (or a GGUF's metadata).

    fields = Fields(json.load(open("config.json")), "config.json")
    la = layer_attention(fields, 3)
    la.options     # AttentionOptions(scale=0.125, causal="bottom-right", window=(4095, 0), rope=Rope(...))
    la.describe()  # "scale 1/√64 (head_dim), causal, window 4095,0 (sliding_window 4096; layer_types[3]
                   #  sliding), RoPE neox θ 10000 (rope_theta), RoPE scaling llama3 ×8 (rope_scaling)"

The same knowledge serves ``attn trace`` (the decoder families run every
head through these options) and ``--model config.json --layer N`` on the
commands that take Q, K and V, so a family is added here once. A
``Convention`` is made of small rules (sizes, scale, which layers slide, the
window, RoPE, the soft-cap), each reading the fields it needs and saying
which field each value came from. The traps they encode are each off by 1–3
when missed: Gemma scales by ``query_pre_attn_scalar``, not the head size;
Hugging Face's window of W is attn's ``(W − 1, 0)``; Mistral's window is on
when config.json does not mention it (4096, the class default); Qwen2's
only with ``use_sliding_window`` and only from layer ``max_window_layers``
on; Gemma 3's sliding layers turn RoPE with their own θ (and an old
``rope_scaling`` stretches only its full layers). RoPE scaling becomes the
core's ``RopeScaling`` in one place (``rope_scaling``), read as transformers
reads it.

A decoder's causal alignment is bottom-right: with a KV cache (fewer queries
than keys) the queries are the last tokens, and RoPE places them at
n_k − n_q + i, as Hugging Face does with a cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from attncli.core.options import AttentionOptions
from attncli.core.rope import ROPE_SCALINGS, SCALING_FIELDS, Rope, RopeScaling, RopeStyle
from attncli.errors import AttnError, ShapeError, UsageError
from attncli.models.fields import Fields

SLIDING, FULL = "sliding_attention", "full_attention"  # Hugging Face's layer_types
Layout = Literal["hf", "gguf"]  # whose Q/K weights the RoPE pairs: Hugging Face's or llama.cpp's (permuted rows)


@dataclass(frozen=True)
class Derived:
    """One setting derived from a config, and the field it came from."""

    setting: str  # "scale", "causal", "window", "soft-cap", "RoPE", "RoPE scaling"
    value: str  # "1/√64", "4095,0", "neox θ 10000"
    field: str | None = None  # "head_dim", "sliding_window 4096; layer_types[3] sliding"; None: the family's rule

    def __str__(self) -> str:
        text = f"{self.setting} {self.value}".rstrip()
        return f"{text} ({self.field})" if self.field else text


@dataclass(frozen=True)
class Shape:
    """A model's sizes, as its attention needs them."""

    n_layer: int
    n_head: int  # query heads
    n_kv_head: int  # key/value heads (= n_head without grouped-query attention)
    head_dim: int
    d_model: int
    n_positions: int  # the longest input
    head_dim_field: str  # where head_dim came from: "head_dim", or "hidden_size/num_attention_heads"


@dataclass(frozen=True)
class LayerAttention:
    """One layer's attention, as attn's options, with where each setting came from."""

    model_type: str
    layer: int
    shape: Shape
    options: AttentionOptions
    derived: tuple[Derived, ...]
    layer_type: str  # "sliding_attention" or "full_attention"

    def describe(self) -> str:
        """'scale 1/√64 (head_dim), causal, window 4095,0 (layer_types[3] sliding, sliding_window 4096), …'"""
        return ", ".join(map(str, self.derived))


# --- sizes -----------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """Where a family's config keeps its sizes (config.json's names)."""

    layers: str = "num_hidden_layers"
    heads: str = "num_attention_heads"
    kv_heads: str | None = "num_key_value_heads"  # None: no grouped-query attention in this family
    width: str = "hidden_size"
    head_dim: str | None = "head_dim"  # None: always width / heads
    positions: str = "max_position_embeddings"

    def read(self, fields: Fields) -> Shape:
        n_layer, n_head, width = fields.whole(self.layers), fields.whole(self.heads), fields.whole(self.width)
        n_kv = fields.whole(self.kv_heads, n_head) if self.kv_heads else n_head
        if n_head % n_kv:
            raise ShapeError(
                f"{fields.name(self.heads)} {n_head} is not a multiple of "
                f"{fields.name(self.kv_heads or self.heads)} {n_kv}",
                source=fields.source,
                hint="each key/value head serves the same number of query heads",
            )
        if self.head_dim and fields.given(self.head_dim):
            head_dim, where = fields.whole(self.head_dim), fields.name(self.head_dim)
        else:
            if width % n_head:
                raise ShapeError(
                    f"{fields.name(self.width)} {width} does not split into {n_head} heads",
                    source=fields.source,
                    hint=f"{fields.name(self.width)} must be a multiple of {fields.name(self.heads)}",
                )
            head_dim, where = width // n_head, f"{fields.name(self.width)}/{fields.name(self.heads)}"
        return Shape(n_layer, n_head, n_kv, head_dim, width, fields.whole(self.positions), where)


# --- the scale of q·k --------------------------------------------------------------

ScaleRule = Callable[[Fields, int, Shape], tuple[float, Derived]]


def inverse_sqrt_head_dim(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """1/√head_dim: the transformer paper's scale (Llama, Mistral, Qwen2)."""
    return 1 / math.sqrt(shape.head_dim), Derived("scale", f"1/√{shape.head_dim}", shape.head_dim_field)


def gpt2_scale(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """GPT-2: 1/√head_dim unless ``scale_attn_weights`` is false; divided by the layer's
    number (from 1) with ``scale_attn_by_inverse_layer_idx`` (Mistral's GPT-2 runs)."""
    scale, text, why = 1.0, "1", [fields.name("scale_attn_weights") + " false"]
    if fields.flag("scale_attn_weights", True):
        scale, text, why = 1 / math.sqrt(shape.head_dim), f"1/√{shape.head_dim}", [shape.head_dim_field]
    if fields.flag("scale_attn_by_inverse_layer_idx", False):
        scale, text = scale / (layer + 1), f"{text}/{layer + 1}"
        why.append(fields.name("scale_attn_by_inverse_layer_idx"))
    return scale, Derived("scale", text, ", ".join(why))


def query_pre_attn_scalar(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """Gemma 2 and 3: 1/√query_pre_attn_scalar, which need not be the head size."""
    scalar = fields.number("query_pre_attn_scalar", 256)
    return 1 / math.sqrt(scalar), Derived("scale", f"1/√{_number(scalar)}", fields.name("query_pre_attn_scalar"))


# --- which layers slide, and how far ---------------------------------------------------

LayerPattern = Callable[[Fields, int, Shape], tuple[bool, str]]  # -> (sliding?, why) when layer_types is absent


@dataclass(frozen=True)
class LayerTypes:
    """Which layers attend within a window: config.json's ``layer_types`` when
    given (and read by the family), else the family's own pattern."""

    pattern: LayerPattern | None = None  # None: every layer is full attention unless layer_types says
    listed: bool = True  # read layer_types (Mistral's attention ignores it)

    def of(self, fields: Fields, layer: int, shape: Shape) -> tuple[str, str | None]:
        """This layer's type and the field it came from."""
        listed = fields.strings("layer_types") if self.listed else None
        if listed is not None:
            if len(listed) != shape.n_layer:
                raise AttnError(
                    f"{fields.name('layer_types')} has {len(listed)} entries for {shape.n_layer} layers",
                    source=fields.source,
                )
            kind = listed[layer]
            if kind not in (SLIDING, FULL):
                raise AttnError(
                    f"{fields.name('layer_types')}[{layer}] {kind!r} is not yet supported",
                    source=fields.source,
                    hint=f"attn reads {FULL!r} and {SLIDING!r} layers",
                )
            return kind, f"{fields.name('layer_types')}[{layer}]"
        if self.pattern is None:
            return FULL, None
        sliding, why = self.pattern(fields, layer, shape)
        return (SLIDING if sliding else FULL), why


def every_layer(fields: Fields, layer: int, shape: Shape) -> tuple[bool, str]:
    return True, ""


def from_max_window_layers(fields: Fields, layer: int, shape: Shape) -> tuple[bool, str]:
    """Qwen2: layers from ``max_window_layers`` on slide (when ``use_sliding_window``)."""
    first = fields.whole("max_window_layers", 28, least=0)
    return layer >= first, f"layer {layer} {'≥' if layer >= first else '<'} {fields.name('max_window_layers')} {first}"


def every_other_layer(fields: Fields, layer: int, shape: Shape) -> tuple[bool, str]:
    """Gemma 2: layers 0, 2, 4, … slide."""
    return layer % 2 == 0, f"layer {layer} {'even' if layer % 2 == 0 else 'odd'}"


def sliding_window_pattern(fields: Fields, layer: int, shape: Shape) -> tuple[bool, str]:
    """Gemma 3: every ``sliding_window_pattern``-th layer (default 6) is full, the rest slide."""
    every = fields.whole("sliding_window_pattern", 6)
    return (layer + 1) % every != 0, f"layer {layer}, {fields.name('sliding_window_pattern')} {every}"


@dataclass(frozen=True)
class Window:
    """A sliding layer's window: Hugging Face's ``sliding_window`` W lets a
    query see itself and the W − 1 keys before it, attn's window (W − 1, 0)."""

    key: str = "sliding_window"
    default: int | None = None  # when config.json lacks the key (the class default: Mistral, Gemma 4096)
    switch: str | None = None  # Qwen2: no window unless this field is true

    def read(self, fields: Fields, layer_type: str, why: str | None) -> tuple[tuple[int, int] | None, Derived | None]:
        if layer_type != SLIDING or (self.switch and not fields.flag(self.switch, False)):
            return None, None
        if self.key in fields:
            size = fields.maybe_whole(self.key)  # null: no window
        else:
            size = self.default
        if size is None:
            return None, None
        given = f"{fields.name(self.key)} {size}" + ("" if self.key in fields else " by default")
        because = ", ".join(
            w
            for w in (
                f"{why} sliding" if why and why.startswith(fields.name("layer_types")) else why,
                fields.name(self.switch) if self.switch else "",
            )
            if w
        )
        where = f"{given}; {because}" if because else given
        return (size - 1, 0), Derived("window", f"{size - 1},0", where)


# --- rotary position embeddings ---------------------------------------------------------


@dataclass(frozen=True)
class RopeRule:
    """How a family turns Q and K, and where θ comes from.

        θ: the layer type's entry of a nested ``rope_parameters`` (Gemma 3), else
        ``rope_parameters``/``rope_scaling``'s ``rope_theta`` (transformers ≥ 4.56
        writes it there), else top-level ``rope_theta`` (older config.json), else
        the family's default. Scaling: ``rope_scaling`` (the function), as
    transformers reads it. Pairing: Hugging Face's weights pair features by
        halves (``neox``); llama.cpp permutes the Q and K rows of ``llama`` GGUFs so
        that adjacent features pair (``gptj``), and keeps halves for the others.
    """

    style: RopeStyle = "neox"
    gguf_style: RopeStyle = "neox"
    theta: float = 10000.0
    local_theta: tuple[str, float] | None = None  # sliding layers' θ field and default (Gemma 3)
    scaled_layers: str | None = None  # the one layer type an old rope_scaling applies to (Gemma 3: full)

    def read(self, fields: Fields, layer_type: str, shape: Shape, layout: Layout) -> tuple[Rope, list[Derived]]:
        skip_scaling = self.scaled_layers is not None and layer_type != self.scaled_layers
        params, where = _rope_parameters(fields, layer_type, skip_scaling)
        scaling, scaling_from = rope_scaling(params, where, fields)
        if "rope_theta" in params:
            theta, field_name = params["rope_theta"], f"{where}.rope_theta"
            if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
                raise AttnError(f"{field_name} must be a positive number, got {theta!r}", source=fields.source)
        elif layer_type == SLIDING and self.local_theta:
            key, default = self.local_theta
            theta, field_name = fields.number(key, default), fields.name(key) if fields.given(key) else "default"
        else:
            theta = fields.number("rope_theta", self.theta)
            field_name = fields.name("rope_theta") if fields.given("rope_theta") else "default"
        dim, dim_text = self._dim(fields, params, where, shape)
        style = self.gguf_style if layout == "gguf" else self.style
        text = f"{style} θ {_number(float(theta))}" + dim_text
        rope = Rope(style, float(theta), dim, scaling=scaling)
        return rope, [Derived("RoPE", text, field_name), *([scaling_from] if scaling_from else [])]

    @staticmethod
    def _dim(fields: Fields, params: Mapping[str, Any], where: str, shape: Shape) -> tuple[int | None, str]:
        """The rotated features: ``partial_rotary_factor`` · head_dim, or ``rotary_dim``; None: all."""
        if "partial_rotary_factor" in params or fields.given("partial_rotary_factor"):
            inside = "partial_rotary_factor" in params
            factor = params["partial_rotary_factor"] if inside else fields.number("partial_rotary_factor")
            name = f"{where}.partial_rotary_factor" if inside else fields.name("partial_rotary_factor")
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
                raise AttnError(f"{name} must be a number in (0, 1], got {factor!r}", source=fields.source)
            dim = int(shape.head_dim * factor)
        elif fields.given("rotary_dim"):
            dim, name = fields.whole("rotary_dim"), fields.name("rotary_dim")
        else:
            return None, ""
        if dim == shape.head_dim:
            return None, ""
        if dim % 2 or dim > shape.head_dim:
            raise AttnError(
                f"{name} gives {dim} rotated features of {shape.head_dim}",
                source=fields.source,
                hint="RoPE turns an even number of features, at most the head size",
            )
        return dim, f" on {dim} of {shape.head_dim} features ({name})"


def _rope_parameters(fields: Fields, layer_type: str, skip_scaling: bool = False) -> tuple[Mapping[str, Any], str]:
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


def rope_scaling(params: Mapping[str, Any], where: str, fields: Fields) -> tuple[RopeScaling | None, Derived | None]:
    """Hugging Face's RoPE scaling (``rope_scaling``, or ``rope_parameters`` with a ``rope_type``)
    as attn's ``RopeScaling``, and the words that say so: the one place a scaling type is read.

    As transformers reads it: ``dynamic`` grows past ``max_position_embeddings``;
    ``llama3``, ``yarn`` and ``longrope`` take ``original_max_position_embeddings``
    from the top of config.json when it is there (Phi-3), else from the scaling's
    own fields, else ``max_position_embeddings``; ``yarn`` and ``longrope`` without
    a factor take max_position_embeddings / original_max_position_embeddings.
    """
    kind = params.get("rope_type", params.get("type", "default"))
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
        values[original] = (
            fields.whole(original)
            if fields.given(original)
            else values.get(original, fields.whole("max_position_embeddings"))
        )
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
    factor = f" ×{_number(float(scaling.factor))}" if scaling.factor is not None else ""
    return scaling, Derived("RoPE scaling", f"{kind}{factor}", where)


# --- a family's conventions ------------------------------------------------------------


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
    gguf: tuple[str, ...] = ()  # GGUF general.architecture values that are this family
    gguf_keys: Mapping[str, str] = field(default_factory=dict)  # GGUF key after "{arch}." -> config.json name

    def shape(self, fields: Fields) -> Shape:
        return self.sizes.read(fields)

    def layer(self, fields: Fields, layer: int, layout: Layout | None = None) -> LayerAttention:
        """Layer ``layer``'s attention options. ``layout``: whose Q/K rows the model's
        weights have (default: the file's, a GGUF's llama.cpp's)."""
        shape = self.shape(fields)
        if not 0 <= layer < shape.n_layer:
            raise UsageError(
                f"layer {layer} is out of range: the model has {shape.n_layer} layers (0 to {shape.n_layer - 1})",
                source=fields.source,
            )
        scale, scale_from = self.scale(fields, layer, shape)
        derived = [scale_from, Derived("causal", "")]
        layer_type, type_field = self.layer_types.of(fields, layer, shape)
        window = None
        if self.window is not None:
            window, window_from = self.window.read(fields, layer_type, type_field)
            if window_from is not None:
                derived.append(window_from)
        softcap = fields.maybe_number(self.softcap) if self.softcap else None
        if softcap is not None and self.softcap:
            derived.append(Derived("soft-cap", _number(softcap), fields.name(self.softcap)))
        rope = None
        if self.rope is not None:
            rope, rope_from = self.rope.read(
                fields, layer_type, shape, layout or ("gguf" if fields.origin == "gguf" else "hf")
            )
            derived.extend(rope_from)
        options = AttentionOptions(scale=scale, causal="bottom-right", window=window, softcap=softcap, rope=rope)
        return LayerAttention(self.model_type, layer, shape, options, tuple(derived), layer_type)


# GGUF metadata (after "{arch}.") -> config.json names: llama.cpp's writers use one set for these families.
LLAMA_GGUF_KEYS = {
    "block_count": "num_hidden_layers",
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "rope.freq_base": "rope_theta",
    "rope.dimension_count": "rotary_dim",
    "vocab_size": "vocab_size",
}
GPT2_GGUF_KEYS = {
    "block_count": "n_layer",
    "context_length": "n_positions",
    "embedding_length": "n_embd",
    "feed_forward_length": "n_inner",
    "attention.head_count": "n_head",
    "attention.layer_norm_epsilon": "layer_norm_epsilon",
    "vocab_size": "vocab_size",
}

LLAMA_ROPE = RopeRule("neox", gguf_style="gptj")  # llama.cpp permutes llama's Q/K rows for its own RoPE

CONVENTIONS: dict[str, Convention] = {
    c.model_type: c
    for c in (
        Convention(
            "gpt2",
            "GPT-2",
            scale=gpt2_scale,
            sizes=Sizes("n_layer", "n_head", None, "n_embd", None, "n_positions"),
            gguf=("gpt2",),
            gguf_keys=GPT2_GGUF_KEYS,
        ),
        Convention("llama", "Llama", rope=LLAMA_ROPE, gguf=("llama",), gguf_keys=LLAMA_GGUF_KEYS),
        Convention(
            "mistral",
            "Mistral",
            rope=LLAMA_ROPE,
            layer_types=LayerTypes(every_layer, listed=False),
            window=Window(default=4096),
        ),
        Convention(
            "qwen2",
            "Qwen2",
            rope=RopeRule(),
            layer_types=LayerTypes(from_max_window_layers),
            window=Window(default=4096, switch="use_sliding_window"),
            gguf=("qwen2",),
            gguf_keys=LLAMA_GGUF_KEYS,
        ),
        Convention(
            "gemma2",
            "Gemma 2",
            scale=query_pre_attn_scalar,
            rope=RopeRule(),
            layer_types=LayerTypes(every_other_layer),
            window=Window(default=4096),
            softcap="attn_logit_softcapping",
        ),
        Convention(
            "gemma3_text",
            "Gemma 3",
            scale=query_pre_attn_scalar,
            rope=RopeRule(theta=1_000_000.0, local_theta=("rope_local_base_freq", 10_000.0), scaled_layers=FULL),
            layer_types=LayerTypes(sliding_window_pattern),
            window=Window(default=4096),
            softcap="attn_logit_softcapping",
        ),
    )
}
GGUF_ARCHITECTURES: dict[str, Convention] = {arch: c for c in CONVENTIONS.values() for arch in c.gguf}


def convention_for(fields: Fields) -> Convention:
    """The conventions of config.json's model_type; an error naming those known."""
    model_type = fields.model_type
    if isinstance(model_type, str) and model_type in CONVENTIONS:
        if model_type == "gemma3_text" and fields.flag("use_bidirectional_attention", False):
            raise AttnError(
                f"{fields.name('use_bidirectional_attention')} is not yet supported",
                source=fields.source,
                hint="attn reads Gemma 3 as a causal decoder",
            )
        return CONVENTIONS[model_type]
    raise AttnError(
        f"no attention conventions for model_type {model_type!r}",
        source=fields.source,
        hint=f"attn knows {', '.join(sorted(CONVENTIONS))}",
    )


def layer_attention(fields: Fields, layer: int, layout: Layout | None = None) -> LayerAttention:
    """Layer ``layer``'s attention from a config.json's (or a GGUF's) fields."""
    return convention_for(fields).layer(fields, layer, layout)


def gguf_fields(metadata: Mapping[str, Any], source: str | None = None) -> Fields:
    """A GGUF's metadata as config.json's fields of its family, each remembering its GGUF key."""
    arch = metadata.get("general.architecture")
    convention = GGUF_ARCHITECTURES.get(arch) if isinstance(arch, str) else None
    if convention is None:
        raise AttnError(
            f"unsupported GGUF architecture {arch!r}",
            source=source,
            hint=f"attn runs {', '.join(sorted(GGUF_ARCHITECTURES))}",
        )
    values: dict[str, Any] = {"model_type": convention.model_type}
    names = {"model_type": "general.architecture"}
    for suffix, key in convention.gguf_keys.items():
        if f"{arch}.{suffix}" in metadata:
            values[key], names[key] = metadata[f"{arch}.{suffix}"], f"{arch}.{suffix}"
    scaling = metadata.get(f"{arch}.rope.scaling.type")
    if scaling == "linear":  # llama.cpp's freq_scale = 1 / factor: Hugging Face's linear scaling
        values["rope_scaling"] = {"rope_type": "linear", "factor": metadata.get(f"{arch}.rope.scaling.factor")}
        names["rope_scaling"] = f"{arch}.rope.scaling"
    elif scaling not in (None, "none"):  # llama.cpp's YaRN (ext_factor, attn_factor) is not Hugging Face's
        raise AttnError(
            f"{arch}.rope.scaling.type {scaling!r} is not yet supported",
            source=source,
            hint="attn reads a GGUF's linear RoPE scaling only",
        )
    return Fields(values, source, names, origin="gguf")


def _number(x: float) -> str:
    """10000.0 -> '10000', 0.5 -> '0.5'."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"
