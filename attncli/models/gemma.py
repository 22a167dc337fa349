"""The Gemma family — Gemma, Gemma 2 and Gemma 3 (text) — in numpy, through
attncli's own ``attention``.

    x = E[ids] · √d_model
    for each layer:
        h = RMSNorm₁₊(x)                    # x / rms(x) · (1 + w): Gemma's norms
        a = MultiHead(h)                    # Gemma 3: each head's Q and K RMSNorm₁₊-ed before RoPE
        x = x + RMSNorm₁₊(a)                # Gemma 2, 3: the attention's output normed too
        h = RMSNorm₁₊(x)
        m = (GELU(h W_gate) ⊙ h W_up) W_down
        x = x + RMSNorm₁₊(m)                # Gemma 2, 3: the MLP's output normed too (sandwich norms)
    logits = RMSNorm₁₊(x) Eᵀ                 # Gemma 2: then cap · tanh(logits / cap), final_logit_softcapping

The attention itself (the scale 1/√query_pre_attn_scalar, the soft-cap, the
sliding layers and their window, each layer type's RoPE θ and scaling) is
each layer's options from ``conventions``, as for every family. Gemma 1 has
neither the sandwich norms nor the soft-caps; its layers are Llama's with
Gemma's norms and GELU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.multihead import merge_heads, split_heads
from attncli.errors import AttnError
from attncli.models.base import AttentionParams, DecoderSteps, Family, Tensors
from attncli.models.blocks import ACTIVATIONS, Linear, dense, rms_norm
from attncli.models.conventions import LayerAttention, convention_for
from attncli.models.decoder import forward_all, probe_layer
from attncli.models.fields import as_fields

SANDWICHED = ("gemma2", "gemma3_text")  # norms after attention and after the MLP as well as before
QK_NORMED = ("gemma3_text",)  # each head's Q and K normed before RoPE
FINAL_SOFTCAP = {"gemma2": 30.0}  # final_logit_softcapping's default by model type (Gemma 3's: none)


@dataclass(frozen=True)
class GemmaConfig:
    """The sizes of a Gemma decoder (config.json's names in the comments)."""

    model_type: str  # gemma, gemma2 or gemma3_text
    n_vocab: int  # vocab_size
    d_model: int  # hidden_size
    n_layer: int  # num_hidden_layers
    n_head: int  # num_attention_heads
    n_kv_head: int  # num_key_value_heads
    head_dim: int  # head_dim (Gemma's default 256)
    d_ff: int  # intermediate_size
    n_positions: int  # max_position_embeddings
    eps: float  # rms_norm_eps
    activation: str  # hidden_activation (Gemma 2, 3) or hidden_act (Gemma)
    tied: bool  # tie_word_embeddings (Gemma's default: true)
    final_softcap: float | None  # final_logit_softcapping
    attention: tuple[LayerAttention, ...]  # each layer's options (conventions)

    @property
    def sandwiched(self) -> bool:
        return self.model_type in SANDWICHED

    @property
    def qk_normed(self) -> bool:
        return self.model_type in QK_NORMED

    @classmethod
    def from_dict(cls, config: Mapping[str, Any], source: str | None = None) -> GemmaConfig:
        fields = as_fields(config, source)
        convention = convention_for(fields)
        shape = convention.shape(fields)
        activation_key = "hidden_act" if convention.model_type == "gemma" else "hidden_activation"
        activation = fields.text(activation_key, "gelu_pytorch_tanh")
        if activation == "gelu" and convention.model_type == "gemma":
            activation = "gelu_pytorch_tanh"  # transformers reads Gemma's legacy "gelu" as the tanh approximation
        if activation not in ACTIVATIONS:
            raise AttnError(
                f"unsupported activation {fields.name(activation_key)}={activation!r}",
                source=fields.source,
                hint=f"attn knows {', '.join(sorted(ACTIVATIONS))}",
            )
        final = (  # null in the file: none; absent: the config class's default
            fields.maybe_number("final_logit_softcapping")
            if "final_logit_softcapping" in fields.raw
            else FINAL_SOFTCAP.get(convention.model_type)
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
            n_positions=fields.whole("max_position_embeddings", 8192),
            eps=fields.number("rms_norm_eps", 1e-6),
            activation=activation,
            tied=fields.flag("tie_word_embeddings", True),
            final_softcap=final,
            attention=tuple(convention.layer(fields, i, "hf") for i in range(shape.n_layer)),
        )


@dataclass(frozen=True)
class LayerParams:
    """One layer, under ``layers.{i}.``; shapes [d_in, d_out]; norms' w as stored (used as 1 + w)."""

    attn_norm: np.ndarray  # input_layernorm.weight  [d_model]
    q: Linear  # self_attn.q_proj  [d_model, n_head · head_dim]
    k: Linear  # self_attn.k_proj  [d_model, n_kv_head · head_dim]
    v: Linear  # self_attn.v_proj  [d_model, n_kv_head · head_dim]
    o: Linear  # self_attn.o_proj  [n_head · head_dim, d_model]
    q_norm: np.ndarray | None  # self_attn.q_norm.weight  [head_dim] (Gemma 3)
    k_norm: np.ndarray | None  # self_attn.k_norm.weight  [head_dim] (Gemma 3)
    post_attn_norm: np.ndarray | None  # post_attention_layernorm.weight (Gemma 2, 3: after attention)
    mlp_norm: np.ndarray  # pre_feedforward_layernorm.weight (Gemma 2, 3); post_attention_layernorm (Gemma)
    post_mlp_norm: np.ndarray | None  # post_feedforward_layernorm.weight (Gemma 2, 3)
    gate: Linear  # mlp.gate_proj  [d_model, d_ff]
    up: Linear  # mlp.up_proj  [d_model, d_ff]
    down: Linear  # mlp.down_proj  [d_ff, d_model]


@dataclass(frozen=True)
class GemmaParams:
    embed: np.ndarray  # embed_tokens.weight  [n_vocab, d_model]
    layers: tuple[LayerParams, ...]  # layers.{i}
    norm: np.ndarray  # norm.weight  [d_model]
    lm_head: np.ndarray | None  # lm_head.weight  [n_vocab, d_model]; None when tied


def read_params(t: Tensors, config: GemmaConfig) -> GemmaParams:
    """The ``Gemma*ForCausalLM`` tensors by name (q/k/v/o biases where the checkpoint has them)."""
    d, d_ff, hd = config.d_model, config.d_ff, config.head_dim
    q_out, kv_out = config.n_head * hd, config.n_kv_head * hd

    def linear(name: str, d_in: int, d_out: int) -> Linear:
        return t.linear(name, d_in, d_out, bias=None, copy=False)

    def layer(p: str) -> LayerParams:
        sandwiched = config.sandwiched
        return LayerParams(
            attn_norm=t.take(f"{p}.input_layernorm.weight", d),
            q=linear(f"{p}.self_attn.q_proj", d, q_out),
            k=linear(f"{p}.self_attn.k_proj", d, kv_out),
            v=linear(f"{p}.self_attn.v_proj", d, kv_out),
            o=linear(f"{p}.self_attn.o_proj", q_out, d),
            q_norm=t.take(f"{p}.self_attn.q_norm.weight", hd) if config.qk_normed else None,
            k_norm=t.take(f"{p}.self_attn.k_norm.weight", hd) if config.qk_normed else None,
            post_attn_norm=t.take(f"{p}.post_attention_layernorm.weight", d) if sandwiched else None,
            mlp_norm=t.take(f"{p}.{'pre_feedforward' if sandwiched else 'post_attention'}_layernorm.weight", d),
            post_mlp_norm=t.take(f"{p}.post_feedforward_layernorm.weight", d) if sandwiched else None,
            gate=linear(f"{p}.mlp.gate_proj", d, d_ff),
            up=linear(f"{p}.mlp.up_proj", d, d_ff),
            down=linear(f"{p}.mlp.down_proj", d_ff, d),
        )

    return GemmaParams(
        embed=t.take("embed_tokens.weight", config.n_vocab, d),
        layers=tuple(layer(f"layers.{i}") for i in range(config.n_layer)),
        norm=t.take("norm.weight", d),
        lm_head=None if config.tied else t.take("lm_head.weight", config.n_vocab, d),
    )


def gemma_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / rms(x) · (1 + w): Gemma's RMSNorm (its weights start at 0), in float32 as transformers'."""
    return rms_norm(x, 1.0 + w, eps)


# --- the forward pass, in the steps decoder.run drives ------------------------------


def embed(params: GemmaParams, config: GemmaConfig, ids: np.ndarray, start: int) -> np.ndarray:
    # [n] -> [n, d_model], scaled by √d_model (in the embeddings' dtype, as transformers)
    e = params.embed[ids]
    return e * e.dtype.type(config.d_model**0.5)


def attn_input(lp: LayerParams, config: GemmaConfig, x: np.ndarray) -> np.ndarray:
    return gemma_norm(x, lp.attn_norm, config.eps)  # [n, d_model] -> [n, d_model]


def project(lp: LayerParams, config: GemmaConfig, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # [n, d_model] (after input_layernorm) -> q [n_head, n, head_dim], k and v [n_kv_head, n, head_dim]
    q = split_heads(dense(h, lp.q), config.n_head)
    k = split_heads(dense(h, lp.k), config.n_kv_head)
    if lp.q_norm is not None and lp.k_norm is not None:  # Gemma 3: each head's Q and K, before RoPE
        q, k = gemma_norm(q, lp.q_norm, config.eps), gemma_norm(k, lp.k_norm, config.eps)
    return q, k, split_heads(dense(h, lp.v), config.n_kv_head)


def attn_params(lp: LayerParams) -> AttentionParams:
    return AttentionParams(q=lp.q, k=lp.k, v=lp.v, o=lp.o)


def finish(lp: LayerParams, config: GemmaConfig, x: np.ndarray, attended: np.ndarray) -> np.ndarray:
    # [n, d_model], heads [n_head, n, head_dim] -> [n, d_model]
    a = dense(merge_heads(attended), lp.o)
    x = x + (a if lp.post_attn_norm is None else gemma_norm(a, lp.post_attn_norm, config.eps))
    h = gemma_norm(x, lp.mlp_norm, config.eps)
    m = dense(ACTIVATIONS[config.activation](dense(h, lp.gate)) * dense(h, lp.up), lp.down)  # GeGLU
    return x + (m if lp.post_mlp_norm is None else gemma_norm(m, lp.post_mlp_norm, config.eps))


def norm(params: GemmaParams, config: GemmaConfig, x: np.ndarray) -> np.ndarray:
    return gemma_norm(x, params.norm, config.eps)


def logits(params: GemmaParams, config: GemmaConfig, x: np.ndarray) -> np.ndarray:
    # [m, d_model] @ [d_model, n_vocab] -> [m, n_vocab], soft-capped (Gemma 2)
    head = params.embed if params.lm_head is None else params.lm_head
    z = x @ head.T
    if config.final_softcap is not None:
        cap = z.dtype.type(config.final_softcap)
        z = np.tanh(z / cap) * cap
    return z


STEPS: DecoderSteps[GemmaConfig, GemmaParams] = DecoderSteps(
    embed=embed,
    attn_input=attn_input,
    project=project,
    finish=finish,
    layers=lambda p: p.layers,
    norm=norm,
    logits=logits,
    attn_params=attn_params,
    attn_read="the residual stream after Gemma's RMSNorm (input_layernorm, 1 + w)",
    after_projection=lambda config: "normalises each head's q and k (QK-norm)" if config.qk_normed else None,
)


def family(name: str, architecture: str) -> Family[GemmaConfig, GemmaParams]:
    return Family(
        name=name,
        architecture=architecture,
        prefix="model.",
        config=GemmaConfig.from_dict,
        params=read_params,
        forward=forward_all(STEPS),
        probe=probe_layer(STEPS),
        decoder=STEPS,
    )


FAMILIES = {
    "gemma": family("Gemma", "GemmaForCausalLM"),
    "gemma2": family("Gemma 2", "Gemma2ForCausalLM"),
    "gemma3_text": family("Gemma 3", "Gemma3ForCausalLM"),
}
