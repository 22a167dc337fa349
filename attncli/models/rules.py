"""The small rules a family's attention conventions are made of (``conventions.py``
puts them together, one ``Convention`` per family): where its config keeps its
sizes, how it scales q·k, which layers slide and how far, its ALiBi slopes, and
the arrays it needs from a file. Each rule reads the fields it needs and says
which field each value came from (``Derived``). RoPE's rules are ``roperules.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from attncli.errors import AttnError, ShapeError
from attncli.models.fields import Fields

SLIDING, FULL = "sliding_attention", "full_attention"  # Hugging Face's layer_types


@dataclass(frozen=True)
class Derived:
    """One setting derived from a config, and the field it came from."""

    setting: str  # "scale", "causal", "window", "soft-cap", "RoPE", "RoPE scaling", "ALiBi"
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
    head_dim: int  # the features of a query and a key
    d_model: int
    n_positions: int | None  # the longest input (None: the family has no limit, T5)
    head_dim_field: str  # where head_dim came from: "head_dim", or "hidden_size/num_attention_heads"
    heads_field: str = "num_attention_heads"  # where the head counts came from, for errors
    kv_heads_field: str = "num_key_value_heads"


# --- sizes -----------------------------------------------------------------------

KvRule = Callable[[Fields, int], tuple[int, str]]  # (fields, query heads) -> (K/V heads, the field)


def falcon_kv_heads(fields: Fields, n_head: int) -> tuple[int, str]:
    """Falcon: ``num_kv_heads`` with ``new_decoder_architecture`` (Falcon-40B); else one
    K/V head with ``multi_query`` (its default), else one per query head."""
    if fields.flag("new_decoder_architecture", False):
        return fields.whole("num_kv_heads", n_head), fields.name("num_kv_heads")
    if fields.flag("multi_query", True):
        return 1, fields.name("multi_query")
    return n_head, fields.name("multi_query") + " false"


@dataclass(frozen=True)
class Sizes:
    """Where a family's config keeps its sizes (config.json's names)."""

    layers: str = "num_hidden_layers"
    heads: str = "num_attention_heads"
    kv_heads: str | KvRule | None = "num_key_value_heads"  # None: one K/V head per query head
    width: str = "hidden_size"
    head_dim: str | tuple[str, ...] | None = "head_dim"  # None: always width / heads; a tuple: their sum
    positions: str | None = "max_position_embeddings"  # None: no longest input (relative positions)

    def read(self, fields: Fields) -> Shape:
        n_layer, n_head, width = fields.whole(self.layers), fields.whole(self.heads), fields.whole(self.width)
        kv_field = fields.name(self.heads)
        if callable(self.kv_heads):
            n_kv, kv_field = self.kv_heads(fields, n_head)
        elif self.kv_heads and fields.given(self.kv_heads):
            n_kv, kv_field = fields.whole(self.kv_heads), fields.name(self.kv_heads)
        else:
            n_kv = n_head
        if n_head % n_kv:
            raise ShapeError(
                f"{fields.name(self.heads)} {n_head} is not a multiple of {kv_field} {n_kv}",
                source=fields.source,
                hint="each key/value head serves the same number of query heads",
            )
        if isinstance(self.head_dim, tuple):
            head_dim = sum(fields.whole(key) for key in self.head_dim)
            where = "+".join(fields.name(key) for key in self.head_dim)
        elif self.head_dim and fields.given(self.head_dim):
            head_dim, where = fields.whole(self.head_dim), fields.name(self.head_dim)
        else:
            if width % n_head:
                raise ShapeError(
                    f"{fields.name(self.width)} {width} does not split into {n_head} heads",
                    source=fields.source,
                    hint=f"{fields.name(self.width)} must be a multiple of {fields.name(self.heads)}",
                )
            head_dim, where = width // n_head, f"{fields.name(self.width)}/{fields.name(self.heads)}"
        positions = fields.maybe_whole(self.positions) if self.positions else None
        return Shape(n_layer, n_head, n_kv, head_dim, width, positions, where, fields.name(self.heads), kv_field)


# --- the scale of q·k --------------------------------------------------------------

ScaleRule = Callable[[Fields, int, Shape], tuple[float, Derived]]


def inverse_sqrt_head_dim(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """1/√head_dim: the transformer paper's scale (Llama, Mistral, Qwen2)."""
    return 1 / math.sqrt(shape.head_dim), Derived("scale", f"1/√{shape.head_dim}", shape.head_dim_field)


def unscaled(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """T5: q·k is not scaled (its initialisation folds 1/√d into the query weights)."""
    return 1.0, Derived("scale", "1", "T5 does not scale")


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
    return 1 / math.sqrt(scalar), Derived("scale", f"1/√{number(scalar)}", fields.name("query_pre_attn_scalar"))


def mpt_scale(fields: Fields, layer: int, shape: Shape) -> tuple[float, Derived]:
    """MPT: ``attn_config.softmax_scale`` when set, else 1/√head_dim."""
    attn = fields.sub("attn_config")
    if attn.given("softmax_scale"):
        scale = attn.number("softmax_scale")
        return scale, Derived("scale", f"{scale:g}", attn.name("softmax_scale"))
    return inverse_sqrt_head_dim(fields, layer, shape)


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
    """Qwen2 and Qwen3: layers from ``max_window_layers`` on slide (when ``use_sliding_window``)."""
    first = fields.whole("max_window_layers", 28, least=0)
    return layer >= first, f"layer {layer} {'≥' if layer >= first else '<'} {fields.name('max_window_layers')} {first}"


def every_other_layer(fields: Fields, layer: int, shape: Shape) -> tuple[bool, str]:
    """Gemma 2 and gpt-oss: layers 0, 2, 4, … slide."""
    return layer % 2 == 0, f"layer {layer} {'even' if layer % 2 == 0 else 'odd'}"


def sliding_window_pattern(default: int) -> LayerPattern:
    """Gemma 3 (6) and Cohere 2 (4): every ``sliding_window_pattern``-th layer is full, the rest slide."""

    def pattern(fields: Fields, layer: int, shape: Shape) -> tuple[bool, str]:
        every = fields.whole("sliding_window_pattern", default)
        return (layer + 1) % every != 0, f"layer {layer}, {fields.name('sliding_window_pattern')} {every}"

    return pattern


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


# --- ALiBi ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alibi:
    """A family's ALiBi: whether it is on (``switch``, a field and its default; None: always)
    and its slopes, m_h = 2^(−8(h+1)/H) (Press et al.; the power of two below H, then every
    other slope of twice that, for other H):

    - ``after`` the scale (BLOOM, MPT): scale · q·k − m·|i − j|, attn's own ``--alibi``;
      MPT's ``attn_config.alibi_bias_max`` B (8) makes them 2^(−B(h+1)/H);
    - ``before`` it (Falcon): (q·k − m·|i − j|) · scale, so attn's slopes are m · scale = m/√d.
    """

    order: Literal["after", "before"] = "after"
    switch: tuple[str, bool] | None = None  # ("alibi", False): Falcon's ALiBi only when its config says so
    bias_max: str | None = None  # MPT: attn_config.alibi_bias_max
    nested: str | None = None  # where switch and bias_max are (MPT: attn_config)

    def read(self, fields: Fields, shape: Shape, scale: float) -> tuple[tuple[float, ...] | None, Derived | None]:
        """(explicit slopes, or () for attn's standard ones; None: no ALiBi) and what was derived."""
        where = fields.sub(self.nested) if self.nested else fields
        if self.switch is not None:
            key, default = self.switch
            if not where.flag(key, default):
                return None, None
        on = where.name(self.switch[0]) if self.switch else None
        bias_max = where.number(self.bias_max, 8) if self.bias_max else 8.0
        if self.order == "after" and bias_max == 8:
            return (), Derived("ALiBi", "standard slopes, after the scale", on)
        slopes = tuple(m * (scale if self.order == "before" else 1.0) for m in alibi_slopes(shape.n_head, bias_max))
        if self.order == "before":
            return slopes, Derived("ALiBi", f"slopes m/√{shape.head_dim}, added before the scale", on)
        return slopes, Derived("ALiBi", f"slopes 2^(-{number(bias_max)}(h+1)/H)", where.name(self.bias_max or ""))


def alibi_slopes(n_heads: int, bias_max: float = 8.0) -> list[float]:
    """The ALiBi slopes of ``n_heads`` heads (``positions.alibi_slopes`` for bias_max 8)."""

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-bias_max * (h + 1) / n) for h in range(n)]

    if n_heads & (n_heads - 1) == 0:
        return power_of_two(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]


# --- what a family needs from a file ------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """An array a family's attention adds that no config holds: it comes from a file."""

    option: Literal["sinks", "bias"]  # the attention option that takes it
    what: str  # "gpt-oss adds a learned sink logit per head"
    where: str  # "model.layers.{layer}.self_attn.sinks": where the model keeps it


# --- what a family refuses ------------------------------------------------------------------------


def bert_positions(fields: Fields) -> None:
    """BERT's attention is derived only with absolute positions (its relative ones add a term to q·k)."""
    kind = fields.text("position_embedding_type", "absolute")
    if kind != "absolute":
        raise AttnError(
            f"{fields.name('position_embedding_type')} {kind!r} is not yet supported",
            source=fields.source,
            hint="attn derives BERT's attention with absolute positions, which attention does not see",
        )


def gemma3_causal(fields: Fields) -> None:
    if fields.flag("use_bidirectional_attention", False):
        raise AttnError(
            f"{fields.name('use_bidirectional_attention')} is not yet supported",
            source=fields.source,
            hint="attn reads Gemma 3 as a causal decoder",
        )


def number(x: float) -> str:
    """10000.0 -> '10000', 0.5 -> '0.5'."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"
