"""The Llama family — Llama, Mistral, Qwen2 (and SmolLM2, a Llama) — in numpy,
through attncli's own ``attention``.

    x = E[ids]
    for each layer:
        h = RMSNorm(x)
        x = x + MultiHead(h)                # RoPE on Q and K; K/V heads shared by groups of query heads
        h = RMSNorm(x)
        x = x + (SiLU(h W_gate) ⊙ h W_up) W_down
    logits = RMSNorm(x) W_outᵀ              # W_out: lm_head, or E when tied

The three differ only in their attention conventions (``conventions``:
Mistral's window on every layer, Qwen2's from ``max_window_layers`` on) and in
biases: Qwen2's Q, K and V have them, Llama's have them with
``attention_bias``; a bias is used when the checkpoint holds it. The head size
is ``head_dim`` when config.json gives it, and K/V heads are as many as
``num_key_value_heads`` (grouped-query attention, by shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.multihead import merge_heads, split_heads
from attncli.errors import AttnError
from attncli.models.base import AttentionParams, DecoderSteps, Family, GgufNames, Tensors
from attncli.models.blocks import ACTIVATIONS, Linear, dense, rms_norm
from attncli.models.conventions import LayerAttention, convention_for
from attncli.models.decoder import forward_all, probe_layer
from attncli.models.fields import as_fields


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a Llama-family decoder (config.json's names in the comments)."""

    model_type: str  # llama, mistral or qwen2
    n_vocab: int  # vocab_size
    d_model: int  # hidden_size
    n_layer: int  # num_hidden_layers
    n_head: int  # num_attention_heads
    n_kv_head: int  # num_key_value_heads (grouped-query attention when fewer than n_head)
    head_dim: int  # head_dim, else hidden_size / num_attention_heads
    d_ff: int  # intermediate_size
    n_positions: int  # max_position_embeddings
    eps: float  # rms_norm_eps
    activation: str  # hidden_act
    tied: bool  # tie_word_embeddings: the output head is the token embeddings
    attention: tuple[LayerAttention, ...]  # each layer's options (conventions)

    @classmethod
    def from_dict(cls, config: Mapping[str, Any], source: str | None = None) -> LlamaConfig:
        fields = as_fields(config, source)
        convention = convention_for(fields)
        shape = convention.shape(fields)
        activation = fields.text("hidden_act", "silu")
        if activation not in ACTIVATIONS:
            raise AttnError(
                f"unsupported activation {fields.name('hidden_act')}={activation!r}",
                source=fields.source,
                hint=f"attn knows {', '.join(sorted(ACTIVATIONS))}",
            )
        return cls(
            model_type=convention.model_type,
            n_vocab=fields.whole("vocab_size"),
            d_model=shape.d_model,
            n_layer=shape.n_layer,
            n_head=shape.n_head,
            n_kv_head=shape.n_kv_head,
            head_dim=shape.head_dim,
            d_ff=fields.whole("intermediate_size"),
            n_positions=fields.whole(convention.sizes.positions or "max_position_embeddings"),
            eps=fields.number("rms_norm_eps", 1e-6),
            activation=activation,
            tied=fields.flag("tie_word_embeddings", False),
            attention=tuple(convention.layer(fields, i, "hf") for i in range(shape.n_layer)),
        )


@dataclass(frozen=True)
class LayerParams:
    """One layer, under ``layers.{i}.``; shapes [d_in, d_out]."""

    attn_norm: np.ndarray  # input_layernorm.weight  [d_model]
    q: Linear  # self_attn.q_proj  [d_model, n_head · head_dim] (bias: Qwen2, attention_bias)
    k: Linear  # self_attn.k_proj  [d_model, n_kv_head · head_dim]
    v: Linear  # self_attn.v_proj  [d_model, n_kv_head · head_dim]
    o: Linear  # self_attn.o_proj  [n_head · head_dim, d_model]
    mlp_norm: np.ndarray  # post_attention_layernorm.weight  [d_model]
    gate: Linear  # mlp.gate_proj  [d_model, d_ff]
    up: Linear  # mlp.up_proj  [d_model, d_ff]
    down: Linear  # mlp.down_proj  [d_ff, d_model]


@dataclass(frozen=True)
class LlamaParams:
    embed: np.ndarray  # embed_tokens.weight  [n_vocab, d_model]
    layers: tuple[LayerParams, ...]  # layers.{i}
    norm: np.ndarray  # norm.weight  [d_model]
    lm_head: np.ndarray | None  # lm_head.weight  [n_vocab, d_model]; None when tied


def read_params(t: Tensors, config: LlamaConfig) -> LlamaParams:
    """The ``LlamaForCausalLM`` tensors by name; each weight kept as a transposed
    view (x @ W.T is one BLAS call either way), biases where the checkpoint has them."""
    d, d_ff, q_out, kv_out = (
        config.d_model,
        config.d_ff,
        config.n_head * config.head_dim,
        config.n_kv_head * config.head_dim,
    )

    def linear(name: str, d_in: int, d_out: int) -> Linear:
        return t.linear(name, d_in, d_out, bias=None, copy=False)

    def layer(p: str) -> LayerParams:
        return LayerParams(
            attn_norm=t.take(f"{p}.input_layernorm.weight", d),
            q=linear(f"{p}.self_attn.q_proj", d, q_out),
            k=linear(f"{p}.self_attn.k_proj", d, kv_out),
            v=linear(f"{p}.self_attn.v_proj", d, kv_out),
            o=linear(f"{p}.self_attn.o_proj", q_out, d),
            mlp_norm=t.take(f"{p}.post_attention_layernorm.weight", d),
            gate=linear(f"{p}.mlp.gate_proj", d, d_ff),
            up=linear(f"{p}.mlp.up_proj", d, d_ff),
            down=linear(f"{p}.mlp.down_proj", d_ff, d),
        )

    return LlamaParams(
        embed=t.take("embed_tokens.weight", config.n_vocab, d),
        layers=tuple(layer(f"layers.{i}") for i in range(config.n_layer)),
        norm=t.take("norm.weight", d),
        lm_head=None if config.tied else t.take("lm_head.weight", config.n_vocab, d),  # tied: as transformers
    )


# --- the forward pass, in the steps decoder.run drives ------------------------------


def embed(params: LlamaParams, config: LlamaConfig, ids: np.ndarray, start: int) -> np.ndarray:
    return params.embed[ids]  # [n] -> [n, d_model]; positions enter through RoPE, in attention


def attn_input(lp: LayerParams, config: LlamaConfig, x: np.ndarray) -> np.ndarray:
    return rms_norm(x, lp.attn_norm, config.eps)  # [n, d_model] -> [n, d_model]


def project(lp: LayerParams, config: LlamaConfig, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # [n, d_model] (after input_layernorm) -> q [n_head, n, head_dim], k and v [n_kv_head, n, head_dim]
    return (
        split_heads(dense(h, lp.q), config.n_head),
        split_heads(dense(h, lp.k), config.n_kv_head),
        split_heads(dense(h, lp.v), config.n_kv_head),
    )


def attn_params(lp: LayerParams) -> AttentionParams:
    return AttentionParams(q=lp.q, k=lp.k, v=lp.v, o=lp.o)


def finish(lp: LayerParams, config: LlamaConfig, x: np.ndarray, attended: np.ndarray) -> np.ndarray:
    # [n, d_model], heads [n_head, n, head_dim] -> [n, d_model]
    x = x + dense(merge_heads(attended), lp.o)
    h = rms_norm(x, lp.mlp_norm, config.eps)
    return x + dense(ACTIVATIONS[config.activation](dense(h, lp.gate)) * dense(h, lp.up), lp.down)  # SwiGLU


def norm(params: LlamaParams, config: LlamaConfig, x: np.ndarray) -> np.ndarray:
    return rms_norm(x, params.norm, config.eps)


def logits(params: LlamaParams, config: LlamaConfig, x: np.ndarray) -> np.ndarray:
    # [m, d_model] @ [d_model, n_vocab] -> [m, n_vocab]
    head = params.embed if params.lm_head is None else params.lm_head
    return x @ head.T


STEPS: DecoderSteps[LlamaConfig, LlamaParams] = DecoderSteps(
    embed=embed,
    attn_input=attn_input,
    project=project,
    finish=finish,
    layers=lambda p: p.layers,
    norm=norm,
    logits=logits,
    attn_params=attn_params,
    attn_read="the residual stream after RMSNorm (input_layernorm)",
)

# llama.cpp's names; for the llama architecture it permutes the rows of Q and K
# (per head) so that its RoPE pairs adjacent features; loading undoes it.
GGUF = GgufNames(
    names={
        "token_embd": "embed_tokens",
        "output_norm": "norm",
        "output": "lm_head",
        "blk.{i}.attn_norm": "layers.{i}.input_layernorm",
        "blk.{i}.attn_q": "layers.{i}.self_attn.q_proj",
        "blk.{i}.attn_k": "layers.{i}.self_attn.k_proj",
        "blk.{i}.attn_v": "layers.{i}.self_attn.v_proj",
        "blk.{i}.attn_output": "layers.{i}.self_attn.o_proj",
        "blk.{i}.ffn_norm": "layers.{i}.post_attention_layernorm",
        "blk.{i}.ffn_gate": "layers.{i}.mlp.gate_proj",
        "blk.{i}.ffn_up": "layers.{i}.mlp.up_proj",
        "blk.{i}.ffn_down": "layers.{i}.mlp.down_proj",
    },
    permuted={"blk.{i}.attn_q": "num_attention_heads", "blk.{i}.attn_k": "num_key_value_heads"},
)


def family(name: str, architecture: str) -> Family[LlamaConfig, LlamaParams]:
    return Family(
        name=name,
        architecture=architecture,
        prefix="model.",
        config=LlamaConfig.from_dict,
        params=read_params,
        forward=forward_all(STEPS),
        probe=probe_layer(STEPS),
        decoder=STEPS,
        gguf=GGUF,
    )


FAMILIES = {
    "llama": family("Llama", "LlamaForCausalLM"),
    "mistral": family("Mistral", "MistralForCausalLM"),
    "qwen2": family("Qwen2", "Qwen2ForCausalLM"),
}
