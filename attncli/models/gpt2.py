"""The GPT-2 family: OpenAI's decoder, in numpy, through attncli's own ``attention``.

Pre-LayerNorm: each layer normalises its input before attention and before
the feed-forward network, and adds their outputs to it (the residual stream);
positions are learned vectors added to the token embeddings; the output head
is the token embeddings again (tied).

    x = E_tok[ids] + E_pos[positions]
    for each layer:
        x = x + MultiHead(LayerNorm(x))             # causal: a token sees itself and those before
        x = x + GELU(LayerNorm(x) W_fc + b) W_proj + b
    logits = LayerNorm(x) E_tokᵀ

Params are picked by their Hugging Face ``GPT2LMHeadModel`` names. GPT-2's
``Conv1D`` stores weights [d_in, d_out], as x @ W wants them: no transpose;
``c_attn`` holds W_Q, W_K and W_V side by side. Scale and causal come from
``conventions`` (``scale_attn_weights``, ``scale_attn_by_inverse_layer_idx``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.multihead import merge_heads, split_heads
from attncli.errors import AttnError
from attncli.models.base import AttentionParams, DecoderSteps, Family, GgufNames, Tensors
from attncli.models.blocks import ACTIVATIONS, Linear, Norm, dense, layer_norm
from attncli.models.conventions import CONVENTIONS, LayerAttention
from attncli.models.decoder import forward_all, probe_layer
from attncli.models.fields import as_fields


@dataclass(frozen=True)
class Gpt2Config:
    """The sizes of a GPT-2, named as in the formulas (config.json's names in the comments)."""

    n_vocab: int  # vocab_size
    d_model: int  # n_embd
    n_layer: int  # n_layer
    n_head: int  # n_head
    n_positions: int  # n_positions: learned positions, the longest input
    d_ff: int  # n_inner (default 4 · n_embd)
    eps: float  # layer_norm_epsilon
    activation: str  # activation_function
    tied: bool  # tie_word_embeddings: the output head is the token embeddings
    attention: tuple[LayerAttention, ...]  # each layer's options (conventions)

    @property
    def n_kv_head(self) -> int:
        return self.n_head

    @classmethod
    def from_dict(cls, config: Mapping[str, Any], source: str | None = None) -> Gpt2Config:
        fields = as_fields(config, source)
        convention = CONVENTIONS["gpt2"]
        shape = convention.shape(fields)
        activation = fields.text("activation_function", "gelu_new")
        if activation not in ACTIVATIONS:
            raise AttnError(
                f"unsupported activation {fields.name('activation_function')}={activation!r}",
                source=fields.source,
                hint=f"attn knows {', '.join(sorted(ACTIVATIONS))}",
            )
        return cls(
            n_vocab=fields.whole("vocab_size"),
            d_model=shape.d_model,
            n_layer=shape.n_layer,
            n_head=shape.n_head,
            n_positions=fields.whole("n_positions"),
            d_ff=fields.whole("n_inner", 4 * shape.d_model),
            eps=fields.number("layer_norm_epsilon", 1e-5),
            activation=activation,
            tied=fields.flag("tie_word_embeddings", True),
            attention=tuple(convention.layer(fields, i, "hf") for i in range(shape.n_layer)),
        )


@dataclass(frozen=True)
class LayerParams:
    """One layer, under ``h.{i}.``; shapes [d_in, d_out] for a Conv1D."""

    ln_1: Norm  # ln_1  [d_model]: before attention
    c_attn: Linear  # attn.c_attn  [d_model, 3 d_model]: W_Q | W_K | W_V
    c_proj: Linear  # attn.c_proj  [d_model, d_model]: W_O
    ln_2: Norm  # ln_2  [d_model]: before the feed-forward network
    c_fc: Linear  # mlp.c_fc  [d_model, d_ff]
    mlp_proj: Linear  # mlp.c_proj  [d_ff, d_model]


@dataclass(frozen=True)
class Gpt2Params:
    wte: np.ndarray  # wte.weight  [n_vocab, d_model]: token embeddings (and the output head when tied)
    wpe: np.ndarray  # wpe.weight  [n_positions, d_model]: position embeddings
    layers: tuple[LayerParams, ...]  # h.{i}
    ln_f: Norm  # ln_f  [d_model]: the final norm
    lm_head: np.ndarray | None  # lm_head.weight  [n_vocab, d_model] when not tied


def read_params(t: Tensors, config: Gpt2Config) -> Gpt2Params:
    d, d_ff = config.d_model, config.d_ff

    def layer(p: str) -> LayerParams:
        return LayerParams(
            ln_1=t.norm(f"{p}.ln_1", d),
            c_attn=t.conv1d(f"{p}.attn.c_attn", d, 3 * d),
            c_proj=t.conv1d(f"{p}.attn.c_proj", d, d),
            ln_2=t.norm(f"{p}.ln_2", d),
            c_fc=t.conv1d(f"{p}.mlp.c_fc", d, d_ff),
            mlp_proj=t.conv1d(f"{p}.mlp.c_proj", d_ff, d),
        )

    return Gpt2Params(
        wte=t.take("wte.weight", config.n_vocab, d),
        wpe=t.take("wpe.weight", config.n_positions, d),
        layers=tuple(layer(f"h.{i}") for i in range(config.n_layer)),
        ln_f=t.norm("ln_f", d),
        lm_head=None if config.tied else t.take("lm_head.weight", config.n_vocab, d),
    )


# --- the forward pass, in the steps decoder.run drives ------------------------------


def embed(params: Gpt2Params, config: Gpt2Config, ids: np.ndarray, start: int) -> np.ndarray:
    # [n] ids at positions start .. start + n − 1 -> [n, d_model]
    return params.wte[ids] + params.wpe[start : start + len(ids)]


def attn_input(lp: LayerParams, config: Gpt2Config, x: np.ndarray) -> np.ndarray:
    return layer_norm(x, lp.ln_1, config.eps)  # [n, d_model] -> [n, d_model]


def project(lp: LayerParams, config: Gpt2Config, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # [n, d_model] (after ln_1) -> q, k, v [n_head, n, d_model / n_head] each
    qkv = dense(h, lp.c_attn)  # [n, 3 d_model]: W_Q | W_K | W_V in one product
    q, k, v = np.split(qkv, 3, axis=-1)
    return split_heads(q, config.n_head), split_heads(k, config.n_head), split_heads(v, config.n_head)


def attn_params(lp: LayerParams) -> AttentionParams:
    """c_attn cut into W_Q, W_K, W_V (views), and c_proj, W_O."""
    w, b = lp.c_attn.w, lp.c_attn.b
    d = w.shape[0]
    assert b is not None  # GPT-2's Conv1D has a bias
    q, k, v = (Linear(w[:, i * d : (i + 1) * d], b[i * d : (i + 1) * d]) for i in range(3))
    return AttentionParams(q=q, k=k, v=v, o=lp.c_proj)


def finish(lp: LayerParams, config: Gpt2Config, x: np.ndarray, attended: np.ndarray) -> np.ndarray:
    # [n, d_model], heads [n_head, n, d_k] -> [n, d_model]
    x = x + dense(merge_heads(attended), lp.c_proj)
    hidden = ACTIVATIONS[config.activation](dense(layer_norm(x, lp.ln_2, config.eps), lp.c_fc))  # [n, d_ff]
    return x + dense(hidden, lp.mlp_proj)


def norm(params: Gpt2Params, config: Gpt2Config, x: np.ndarray) -> np.ndarray:
    return layer_norm(x, params.ln_f, config.eps)


def logits(params: Gpt2Params, config: Gpt2Config, x: np.ndarray) -> np.ndarray:
    # [m, d_model] @ [d_model, n_vocab] -> [m, n_vocab]
    head = params.wte if params.lm_head is None else params.lm_head
    return x @ head.T


STEPS: DecoderSteps[Gpt2Config, Gpt2Params] = DecoderSteps(
    embed=embed,
    attn_input=attn_input,
    project=project,
    finish=finish,
    layers=lambda p: p.layers,
    norm=norm,
    logits=logits,
    attn_params=attn_params,
    attn_read="the residual stream after LayerNorm (ln_1)",
)

# llama.cpp's names (convert_hf_to_gguf.py writes Conv1D weights transposed, [d_out, d_in])
GGUF = GgufNames(
    names={
        "token_embd": "wte",
        "position_embd": "wpe",
        "output_norm": "ln_f",
        "output": "lm_head",
        "blk.{i}.attn_norm": "h.{i}.ln_1",
        "blk.{i}.attn_qkv": "h.{i}.attn.c_attn",
        "blk.{i}.attn_output": "h.{i}.attn.c_proj",
        "blk.{i}.ffn_norm": "h.{i}.ln_2",
        "blk.{i}.ffn_up": "h.{i}.mlp.c_fc",
        "blk.{i}.ffn_down": "h.{i}.mlp.c_proj",
    },
    transposed=("blk.{i}.attn_qkv", "blk.{i}.attn_output", "blk.{i}.ffn_up", "blk.{i}.ffn_down"),
)

FAMILY: Family[Gpt2Config, Gpt2Params] = Family(
    name="GPT-2",
    architecture="GPT2LMHeadModel",
    prefix="transformer.",
    config=Gpt2Config.from_dict,
    params=read_params,
    forward=forward_all(STEPS),
    probe=probe_layer(STEPS),
    decoder=STEPS,
    gguf=GGUF,
)
