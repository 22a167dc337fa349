"""Each model family's attention conventions, declared once: how to read one
layer's attention settings from its config.json (or a GGUF's metadata).

    fields = Fields(json.load(open("config.json")), "config.json")
    la = layer_attention(fields, 3)
    la.options     # AttentionOptions(scale=0.125, causal="bottom-right", window=(4095, 0), rope=Rope(...))
    la.describe()  # "scale 1/√64 (head_dim), causal, window 4095,0 (sliding_window 4096; layer_types[3]
                   #  sliding), RoPE neox θ 10000 (rope_theta), RoPE scaling llama3 ×8 (rope_scaling)"

The same knowledge serves ``attn trace`` (the decoder families run every
head through these options) and ``--model config.json --layer N`` on the
commands that take Q, K and V, so a family is added here once, as a
``Convention`` (``convention.py``) made of small rules (``rules.py``,
``roperules.py``: sizes, scale, which layers slide, the window, RoPE, the
soft-cap, ALiBi, what comes from a file), each reading the fields it needs
and saying which field each value came from. The traps they encode are each off by 1–3
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

from collections.abc import Mapping
from typing import Any

from attncli.errors import AttnError
from attncli.models.convention import Convention, LayerAttention
from attncli.models.fields import Fields
from attncli.models.roperules import Layout, RopeRule, deepseek_scale, rope_scaling
from attncli.models.rules import (
    FULL,
    SLIDING,
    Alibi,
    Derived,
    LayerTypes,
    Need,
    Shape,
    Sizes,
    Window,
    bert_positions,
    every_layer,
    every_other_layer,
    falcon_kv_heads,
    from_max_window_layers,
    gemma3_causal,
    gpt2_scale,
    mpt_scale,
    query_pre_attn_scalar,
    sliding_window_pattern,
    unscaled,
)

__all__ = [
    "CONVENTIONS",
    "FULL",
    "SLIDING",
    "Convention",
    "Derived",
    "LayerAttention",
    "Layout",
    "Shape",
    "rope_scaling",
]


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
QWEN_WINDOW = Window(default=4096, switch="use_sliding_window")  # only with use_sliding_window, from max_window_layers
GEMMA = {"head_dim": 256, "query_pre_attn_scalar": 256}  # GemmaConfig's defaults (config.json often leaves them out)

GEMMA3_TEXT = Convention(
    "gemma3_text",
    "Gemma 3",
    scale=query_pre_attn_scalar,
    rope=RopeRule(theta=1_000_000.0, local_theta=("rope_local_base_freq", 10_000.0), scaled_layers=FULL),
    layer_types=LayerTypes(sliding_window_pattern(6)),
    window=Window(default=4096),
    softcap="attn_logit_softcapping",
    defaults={**GEMMA, "max_position_embeddings": 131_072},
    check=gemma3_causal,
)

# Each family's attention, declared once. What each reads, and the traps it encodes, in docs/models.md.
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
            "mixtral",
            "Mixtral",
            rope=RopeRule(theta=1_000_000.0),
            layer_types=LayerTypes(every_layer, listed=False),
            window=Window(),
        ),
        Convention(
            "qwen2",
            "Qwen2",
            rope=RopeRule(),
            layer_types=LayerTypes(from_max_window_layers),
            window=QWEN_WINDOW,
            gguf=("qwen2",),
            gguf_keys=LLAMA_GGUF_KEYS,
        ),
        Convention(
            "qwen3",
            "Qwen3",
            rope=RopeRule(),
            layer_types=LayerTypes(from_max_window_layers),
            window=QWEN_WINDOW,
            defaults={"head_dim": 128},
        ),
        Convention("gemma", "Gemma", rope=RopeRule(), defaults={"head_dim": 256}),
        Convention(
            "gemma2",
            "Gemma 2",
            scale=query_pre_attn_scalar,
            rope=RopeRule(),
            layer_types=LayerTypes(every_other_layer),
            window=Window(default=4096),
            softcap="attn_logit_softcapping",
            defaults={**GEMMA, "attn_logit_softcapping": 50.0},
        ),
        GEMMA3_TEXT,
        Convention("gemma3", "Gemma 3", nested=("text_config", GEMMA3_TEXT)),
        Convention(
            "phi3",
            "Phi-3",
            rope=RopeRule(renamed={"su": "longrope", "yarn": "longrope"}),
            layer_types=LayerTypes(every_layer, listed=False),
            window=Window(),
            defaults={"original_max_position_embeddings": 4096},
        ),
        Convention(
            "gpt_neox",
            "GPT-NeoX",
            sizes=Sizes(kv_heads=None, head_dim=None),
            rope=RopeRule(theta_key="rotary_emb_base", fraction="rotary_pct"),
            defaults={"rotary_pct": 0.25},
        ),
        Convention(
            "gptj",
            "GPT-J",
            sizes=Sizes("n_layer", "n_head", None, "n_embd", None, "n_positions"),
            rope=RopeRule("gptj", theta_key=None),
            defaults={"rotary_dim": 64},
        ),
        Convention("cohere", "Cohere", rope=RopeRule("gptj", theta=500_000.0)),
        Convention(
            "cohere2",
            "Cohere 2",
            sizes=Sizes(head_dim=None),
            rope=RopeRule("gptj", layers=SLIDING),
            layer_types=LayerTypes(sliding_window_pattern(4)),
            window=Window(default=4096),
        ),
        Convention("olmo2", "OLMo 2", rope=RopeRule()),
        Convention(
            "falcon",
            "Falcon",
            sizes=Sizes(kv_heads=falcon_kv_heads, head_dim=None),
            rope=RopeRule(unless="alibi"),
            alibi=Alibi("before", switch=("alibi", False)),
            aliases={"num_attention_heads": "n_head", "num_hidden_layers": "n_layer", "hidden_size": "n_embed"},
        ),
        Convention(
            "bloom",
            "BLOOM",
            sizes=Sizes("n_layer", "n_head", None, "hidden_size", None, None),
            alibi=Alibi("after"),
            aliases={"hidden_size": "n_embed"},
        ),
        Convention(
            "mpt",
            "MPT",
            scale=mpt_scale,
            sizes=Sizes("n_layers", "n_heads", None, "d_model", None, "max_seq_len"),
            alibi=Alibi("after", switch=("alibi", True), bias_max="alibi_bias_max", nested="attn_config"),
        ),
        Convention(
            "gpt_oss",
            "gpt-oss",
            rope=RopeRule(theta=150_000.0),
            layer_types=LayerTypes(every_other_layer),
            window=Window(default=128),
            needs=(
                Need("sinks", "gpt-oss adds a learned sink logit per head", "model.layers.{layer}.self_attn.sinks"),
            ),
            defaults={
                "head_dim": 64,
                "max_position_embeddings": 131_072,
                "rope_parameters": {
                    "rope_type": "yarn",
                    "factor": 32.0,
                    "beta_fast": 32.0,
                    "beta_slow": 1.0,
                    "truncate": False,
                    "original_max_position_embeddings": 4096,
                },
            },
        ),
        Convention(
            "deepseek_v3",
            "DeepSeek-V3",
            scale=deepseek_scale,
            sizes=Sizes(kv_heads=None, head_dim=("qk_nope_head_dim", "qk_rope_head_dim")),
            rope=RopeRule(dim_key="qk_rope_head_dim", features="last", interleave="rope_interleave"),
            defaults={"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rope_interleave": True},
        ),
        Convention(
            "t5",
            "T5",
            scale=unscaled,
            sizes=Sizes("num_layers", "num_heads", None, "d_model", "d_kv", None),
            causal=False,
            needs=(
                Need(
                    "bias",
                    "T5 adds a relative position bias",
                    "position_bias, which layer 0's relative_attention_bias makes for every layer",
                ),
            ),
        ),
        Convention(
            "bert",
            "BERT",
            sizes=Sizes(kv_heads=None, head_dim=None),
            causal=False,
            check=bert_positions,
        ),
    )
}
GGUF_ARCHITECTURES: dict[str, Convention] = {arch: c for c in CONVENTIONS.values() for arch in c.gguf}


def convention_for(fields: Fields) -> Convention:
    """The conventions of config.json's model_type; an error naming those known."""
    model_type = fields.model_type
    if isinstance(model_type, str) and model_type in CONVENTIONS:
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
