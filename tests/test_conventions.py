"""The registry of attention conventions (attncli/models/conventions.py): what each
family's config.json (or GGUF metadata) says about a layer's attention, and which
field said it. Gemma 2 and Gemma 3 are checked at the attention alone: Q and K
captured from transformers before RoPE (after Gemma 3's QK-norm), V, and the
weights and heads' output transformers gives, pinned by
scripts/make_decoder_refs.py; attn's ``attention`` with the derived options must
give the same (float32, 1e-5). GPT-2, Llama, Mistral and Qwen2 are checked through
whole models in tests/test_decoders.py."""

import numpy as np
import pytest

from attncli.core.api import attention
from attncli.errors import AttnError, UsageError
from attncli.models import CONVENTIONS, Fields, layer_attention
from attncli.models.conventions import gguf_fields

import decoder_models as dm

CAPTURES = np.load(dm.DATA / "convention_refs.npz")
LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
}


def describe(config: dict, layer: int = 0) -> str:
    return layer_attention(Fields(config, "config.json"), layer).describe()


def fails(config: dict, layer: int = 0) -> str:
    with pytest.raises(AttnError) as e:
        layer_attention(Fields(config, "config.json"), layer)
    return str(e.value)


@pytest.mark.parametrize("name", list(dm.refs.GEMMA))
def test_gemma_attention_from_its_config_alone(name):
    """Gemma's traps: the scale is 1/√query_pre_attn_scalar (24 here, not the head size 16),
    the soft-cap, windows on alternate layers (Gemma 3: 2 of 3) and their own RoPE θ."""
    config = dm.refs.GEMMA[name]
    for layer in range(config["num_hidden_layers"]):
        c = {k: CAPTURES[f"{name}.{layer}.{k}"] for k in ("q", "k", "v", "weights", "output")}
        options = layer_attention(Fields(config), layer).options
        output, weights = attention(c["q"], c["k"], c["v"], options)
        assert np.abs(weights - c["weights"]).max() < 1e-5 and np.abs(output - c["output"]).max() < 1e-5
        wrong = options.but(scale=None)  # 1/√head_dim, as a user would guess
        assert np.abs(attention(c["q"], c["k"], c["v"], wrong)[1] - c["weights"]).max() > 1e-3


def test_gemma_layers_say_where_each_setting_came_from():
    gemma2, gemma3 = dm.refs.GEMMA["gemma2"], dm.refs.GEMMA["gemma3_text"]
    assert (
        describe(gemma2, 0) == "scale 1/√24 (query_pre_attn_scalar), causal, window 3,0 (sliding_window 4; "
        "layer 0 even), soft-cap 2 (attn_logit_softcapping), RoPE neox θ 10000 (rope_theta)"
    )
    assert (
        describe(gemma2, 1) == "scale 1/√24 (query_pre_attn_scalar), causal, soft-cap 2 (attn_logit_softcapping),"
        " RoPE neox θ 10000 (rope_theta)"
    )
    assert (
        describe(gemma3, 1) == "scale 1/√20 (query_pre_attn_scalar), causal, window 2,0 (sliding_window 3; "
        "layer 1, sliding_window_pattern 3), RoPE neox θ 10000 (rope_local_base_freq)"
    )
    assert describe(gemma3, 2) == "scale 1/√20 (query_pre_attn_scalar), causal, RoPE neox θ 1000000 (rope_theta)"
    nested = {
        **gemma3,
        "layer_types": ["full_attention", "sliding_attention", "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 5e5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }
    assert describe(nested, 0).endswith("RoPE neox θ 500000 (rope_parameters.full_attention.rope_theta)")
    assert describe(nested, 1).endswith(
        "window 2,0 (sliding_window 3; layer_types[1] sliding), RoPE neox θ 10000 "
        "(rope_parameters.sliding_attention.rope_theta)"
    )
    scaled = dm.refs.GEMMA["gemma3-scaled"]  # Gemma 3 4B: rope_scaling stretches the full layers only
    assert describe(scaled, 0).endswith("RoPE neox θ 10000 (rope_local_base_freq)")
    assert describe(scaled, 2).endswith("RoPE neox θ 1000000 (rope_theta), RoPE scaling linear ×8 (rope_scaling)")


def test_windows_by_family():
    mistral = {**LLAMA, "model_type": "mistral"}
    assert "window 4095,0 (sliding_window 4096 by default)" in describe(mistral)  # MistralConfig's default
    assert "window" not in describe({**mistral, "sliding_window": None})  # Mistral 7B v0.2: null
    assert "window 31,0 (sliding_window 32)" in describe(
        {**mistral, "sliding_window": 32, "layer_types": ["full_attention", "full_attention"]}, 1
    )  # Mistral's attention ignores layer_types
    qwen2 = {**LLAMA, "model_type": "qwen2", "sliding_window": 32, "max_window_layers": 1}
    assert "window" not in describe(qwen2, 1)  # use_sliding_window is false by default
    assert "window 31,0 (sliding_window 32; layer 1 ≥ max_window_layers 1, use_sliding_window)" in describe(
        {**qwen2, "use_sliding_window": True}, 1
    )
    assert "window" not in describe({**qwen2, "use_sliding_window": True}, 0)
    assert "window" not in describe(LLAMA) + describe({**LLAMA, "sliding_window": 8})  # Llama never slides
    options = layer_attention(Fields({**mistral, "sliding_window": 32}), 0).options
    assert options.window == (31, 0) and options.causal == "bottom-right"


def test_rope_from_both_layouts_of_config_json():
    assert describe({**LLAMA, "rope_theta": 5e5}).endswith("RoPE neox θ 500000 (rope_theta)")
    assert describe({**LLAMA, "rope_theta": 5e5, "rope_scaling": None}).endswith("RoPE neox θ 500000 (rope_theta)")
    assert describe({**LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}).endswith(
        "RoPE neox θ 1000000 (rope_parameters.rope_theta)"
    )
    assert describe(LLAMA).endswith("RoPE neox θ 10000 (default)")
    partial = layer_attention(Fields({**LLAMA, "partial_rotary_factor": 0.5}), 0)
    assert partial.options.rope.dim == 8 and partial.describe().endswith(
        "RoPE neox θ 10000 on 8 of 16 features (default, partial_rotary_factor)"
    )
    assert (
        fails({**LLAMA, "rope_scaling": {"rope_type": "mrope"}})
        == "config.json: rope_scaling type 'mrope' is not yet supported (attn applies linear, dynamic, llama3, yarn, "
        "longrope RoPE scaling)"
    )


def test_rope_scaling_read_as_transformers_reads_it():
    """The original context: dynamic's is max_position_embeddings; Phi-3's top-level field wins over
    the scaling's own; absent, max_position_embeddings. yarn and longrope without a factor: the ratio."""

    def scaling(config: dict, layer: int = 0):
        return layer_attention(Fields(config), layer).options.rope.scaling

    assert (
        scaling({**LLAMA, "rope_scaling": {"type": "dynamic", "factor": 2.0}}).original_max_position_embeddings == 128
    )
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    assert scaling({**LLAMA, "rope_scaling": llama3}).original_max_position_embeddings == 128
    assert (
        scaling(
            {**LLAMA, "rope_scaling": {**llama3, "original_max_position_embeddings": 32}}
        ).original_max_position_embeddings
        == 32
    )
    phi3 = {
        **LLAMA,
        "original_max_position_embeddings": 16,
        "rope_scaling": {
            "type": "longrope",
            "short_factor": [1.0] * 8,
            "long_factor": [2.0] * 8,
            "original_max_position_embeddings": 64,
        },
    }
    longrope = scaling(phi3)
    assert (longrope.original_max_position_embeddings, longrope.factor) == (16, 8.0)
    assert longrope.long_factor == (2.0,) * 8
    yarn = scaling(
        {
            **LLAMA,
            "rope_parameters": {
                "rope_type": "yarn",
                "original_max_position_embeddings": 32,
                "rope_theta": 1e4,
                "beta_fast": 16,
            },
        }
    )
    assert (yarn.factor, yarn.beta_fast) == (4.0, 16)


def test_a_gguf_means_llama_cpps_conventions():
    """llama.cpp permutes a llama GGUF's Q/K rows: Q and K made from them pair adjacent
    features (gptj); attn's decoders undo the permutation and ask for Hugging Face's layout."""
    metadata = {
        "general.architecture": "llama",
        "llama.block_count": 30,
        "llama.context_length": 8192,
        "llama.embedding_length": 576,
        "llama.attention.head_count": 9,
        "llama.attention.head_count_kv": 3,
        "llama.rope.freq_base": 100000.0,
    }
    fields = gguf_fields(metadata, "m.gguf")
    la = layer_attention(fields, 0)
    assert la.options.rope.style == "gptj" and (la.shape.n_head, la.shape.n_kv_head, la.shape.head_dim) == (9, 3, 64)
    assert (
        la.describe() == "scale 1/√64 (llama.embedding_length/llama.attention.head_count), causal, "
        "RoPE gptj θ 100000 (llama.rope.freq_base)"
    )
    assert layer_attention(fields, 0, layout="hf").options.rope.style == "neox"
    qwen2 = gguf_fields(
        {**{k.replace("llama", "qwen2"): v for k, v in metadata.items()}, "general.architecture": "qwen2"}, "m.gguf"
    )
    assert layer_attention(qwen2, 0).options.rope.style == "neox"  # llama.cpp keeps qwen2's halves
    linear = gguf_fields({**metadata, "llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 4.0}, "m.gguf")
    assert layer_attention(linear, 0).describe().endswith("RoPE scaling linear ×4 (llama.rope.scaling)")
    with pytest.raises(AttnError) as e:
        gguf_fields({**metadata, "llama.rope.scaling.type": "yarn"}, "m.gguf")
    assert (
        str(e.value) == "m.gguf: llama.rope.scaling.type 'yarn' is not yet supported "
        "(attn reads a GGUF's linear RoPE scaling only)"
    )
    with pytest.raises(AttnError) as e:
        gguf_fields({"general.architecture": "falcon"}, "m.gguf")
    assert str(e.value) == "m.gguf: unsupported GGUF architecture 'falcon' (attn runs gpt2, llama, qwen2)"


def test_gpt2_scales():
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 64}
    assert describe(gpt2) == "scale 1/√16 (n_embd/n_head), causal"
    assert describe({**gpt2, "scale_attn_weights": False}) == "scale 1 (scale_attn_weights false), causal"
    inverse = layer_attention(Fields({**gpt2, "scale_attn_by_inverse_layer_idx": True}), 2)
    assert inverse.options.scale == pytest.approx(0.25 / 3) and inverse.options.rope is None


def test_bad_configs_in_one_line():
    assert (
        fails({**LLAMA, "model_type": "jamba"}) == "config.json: no attention conventions for model_type 'jamba' "
        f"(attn knows {', '.join(sorted(CONVENTIONS))})"
    )
    with pytest.raises(UsageError) as e:
        layer_attention(Fields(LLAMA, "config.json"), 2)
    assert str(e.value) == "config.json: layer 2 is out of range: the model has 2 layers (0 to 1)"
    assert fails({**LLAMA, "rope_theta": "1e4"}) == "config.json: rope_theta must be a positive number, got '1e4'"
    assert (
        fails({**LLAMA, "num_key_value_heads": 3})
        == "config.json: num_attention_heads 4 is not a multiple of num_key_value_heads 3 "
        "(each key/value head serves the same number of query heads)"
    )
    qwen2 = {**LLAMA, "model_type": "qwen2", "use_sliding_window": True, "sliding_window": 8}
    assert fails({**qwen2, "layer_types": ["full_attention"]}) == "config.json: layer_types has 1 entries for 2 layers"
    assert (
        fails({**qwen2, "layer_types": ["chunked_attention", "full_attention"]})
        == "config.json: layer_types[0] 'chunked_attention' is not yet supported "
        "(attn reads 'full_attention' and 'sliding_attention' layers)"
    )
    assert (
        fails({**LLAMA, "hidden_size": 66})
        == "config.json: hidden_size 66 does not split into 4 heads (hidden_size must be a multiple of "
        "num_attention_heads)"
    )
    assert (
        fails({**dm.refs.GEMMA["gemma3_text"], "use_bidirectional_attention": True})
        == "config.json: use_bidirectional_attention is not yet supported (attn reads Gemma 3 as a causal decoder)"
    )


def test_what_the_config_classes_default_and_older_names():
    """Fields a config.json leaves out take the config class's default, and say so; older names
    (BLOOM's n_embed, Falcon's n_head) are read; Falcon's K/V heads from its three switches."""
    gemma2 = {"model_type": "gemma2", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
    assert describe(gemma2, 1) == (
        "scale 1/√256 (query_pre_attn_scalar by default), causal, soft-cap 50 (attn_logit_softcapping by default), "
        "RoPE neox θ 10000 (default)"
    )
    assert "window 4095,0 (sliding_window 4096 by default; layer 0 even)" in describe(gemma2, 0)
    neox = {"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    assert layer_attention(Fields(neox), 0).options.rope.dim == 4  # rotary_pct 0.25 of 16
    falcon = {"model_type": "falcon", "n_embed": 64, "n_layer": 1, "n_head": 8}
    assert layer_attention(Fields(falcon), 0).shape.n_kv_head == 1  # multi_query, its default
    assert layer_attention(Fields({**falcon, "multi_query": False}), 0).shape.n_kv_head == 8
    new = {**falcon, "new_decoder_architecture": True, "num_kv_heads": 2}
    assert layer_attention(Fields(new), 0).shape.n_kv_head == 2
    phi3 = {**LLAMA, "model_type": "phi3", "rope_scaling": {"type": "su", "short_factor": [1.0] * 8}}
    assert fails({**phi3}) == (  # su is longrope, which needs both lists
        "config.json: rope_scaling: longrope rope scaling needs long_factor (one number per rotated pair, as in "
        "the config's rope_scaling)"
    )


def test_alibi_slopes_by_family():
    """BLOOM and MPT add ALiBi after the scale (attn's own slopes); Falcon before it (m/√d);
    MPT's alibi_bias_max other than 8 changes its slopes."""
    bloom = {"model_type": "bloom", "hidden_size": 48, "n_layer": 1, "n_head": 6}
    options = layer_attention(Fields(bloom), 0).options
    assert options.alibi and options.alibi_slopes is None
    falcon = {"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    options = layer_attention(Fields({**falcon, "alibi": True}), 0).options
    assert options.rope is None and list(options.alibi_slopes) == [2**-2 / 4, 2**-4 / 4, 2**-6 / 4, 2**-8 / 4]
    assert layer_attention(Fields(falcon), 0).options.alibi_slopes is None  # RoPE instead
    mpt = {"model_type": "mpt", "d_model": 32, "n_layers": 1, "n_heads": 4, "max_seq_len": 16}
    assert layer_attention(Fields(mpt), 0).options.alibi
    sixteen = layer_attention(Fields({**mpt, "attn_config": {"alibi_bias_max": 16}}), 0)
    assert list(sixteen.options.alibi_slopes) == [2**-4, 2**-8, 2**-12, 2**-16]
    assert "ALiBi" not in describe({**mpt, "attn_config": {"alibi": False}})
