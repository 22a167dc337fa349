"""The BERT family: a BERT encoder's config, params and forward pass in numpy,
through attncli's own ``attention``.

This is the transformer of the seeds, trained: every token's vector is the sum
of a word, a position and a token-type embedding; each layer lets every token
attend to every other (multi-head self-attention, our ``attention`` with a
padding mask), then passes each vector through a small feed-forward network.
Residual connections and LayerNorm keep the numbers in range.

    x = LayerNorm(E_word[ids] + E_pos[0..n-1] + E_type[types])
    for each layer:
        a = MultiHead(x)                      # softmax(QKᵀ/√d_k)V per head, W_O
        x = LayerNorm(x + a)
        x = LayerNorm(x + GELU(x W_1 + b_1) W_2 + b_2)

Params are picked by their Hugging Face ``BertModel`` names (``read_params``)
into typed fields. float32 throughout, like the trained params. No I/O here:
``attncli.models.loading`` finds and reads the files; this module only computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.api import attention
from attncli.core.multihead import merge_heads, split_heads
from attncli.core.options import AttentionOptions
from attncli.errors import AttnError, UsageError
from attncli.models.base import (
    AttentionParams,
    Family,
    LayerProbe,
    Tensors,
    check_heads,
    positive_number,
    whole_number,
)
from attncli.models.blocks import ACTIVATIONS, Linear, Norm, dense, layer_norm
from attncli.text import plural


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT encoder, named as in the formulas (from config.json)."""

    n_vocab: int  # vocab_size
    d_model: int  # hidden_size
    n_layer: int  # num_hidden_layers
    n_head: int  # num_attention_heads
    d_ff: int  # intermediate_size
    n_positions: int  # max_position_embeddings
    n_types: int  # type_vocab_size
    eps: float  # layer_norm_eps
    activation: str  # hidden_act

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_head

    @classmethod
    def from_dict(cls, config: Mapping[str, Any], source: str | None = None) -> BertConfig:
        """Read a Hugging Face config.json; check what the forward pass relies on."""
        sizes = {
            "n_vocab": whole_number(config, "vocab_size", source),
            "d_model": whole_number(config, "hidden_size", source),
            "n_layer": whole_number(config, "num_hidden_layers", source),
            "n_head": whole_number(config, "num_attention_heads", source),
            "d_ff": whole_number(config, "intermediate_size", source),
            "n_positions": whole_number(config, "max_position_embeddings", source),
            "n_types": whole_number(config, "type_vocab_size", source, default=2),
        }
        activation = config.get("hidden_act", "gelu")
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise AttnError(
                f"unsupported activation hidden_act={activation!r}",
                source=source,
                hint=f"attn knows {', '.join(sorted(ACTIVATIONS))}",
            )
        embedding = config.get("position_embedding_type", "absolute")
        if embedding != "absolute":
            raise AttnError(
                f"unsupported position_embedding_type {embedding!r}",
                source=source,
                hint="attn runs BERT with absolute position embeddings",
            )
        check_heads(sizes["d_model"], sizes["n_head"], source, "hidden_size", "num_attention_heads")
        return cls(**sizes, eps=positive_number(config, "layer_norm_eps", source, default=1e-12), activation=activation)


@dataclass(frozen=True)
class LayerParams:
    """One encoder layer; the comments give each field's Hugging Face name
    under ``encoder.layer.{i}.`` and its shape here ([d_in, d_out] for a Linear)."""

    query: Linear  # attention.self.query  [d_model, d_model]
    key: Linear  # attention.self.key  [d_model, d_model]
    value: Linear  # attention.self.value  [d_model, d_model]
    attn_out: Linear  # attention.output.dense  [d_model, d_model]: heads merged -> model (W_O)
    attn_norm: Norm  # attention.output.LayerNorm  [d_model]: after attention
    ff_in: Linear  # intermediate.dense  [d_model, d_ff]
    ff_out: Linear  # output.dense  [d_ff, d_model]
    ff_norm: Norm  # output.LayerNorm  [d_model]: after the feed-forward network


@dataclass(frozen=True)
class BertParams:
    """All of a BERT encoder's params, as float32 arrays."""

    word: np.ndarray  # embeddings.word_embeddings.weight  [n_vocab, d_model]
    position: np.ndarray  # embeddings.position_embeddings.weight  [n_positions, d_model]
    token_type: np.ndarray  # embeddings.token_type_embeddings.weight  [n_types, d_model]
    embed_norm: Norm  # embeddings.LayerNorm  [d_model]
    layers: tuple[LayerParams, ...]  # encoder.layer.{i}


def read_params(t: Tensors, config: BertConfig) -> BertParams:
    """Pick the ``BertModel`` tensors by name, each checked against the shape
    config.json implies. Every Linear's weight is transposed (``Tensors.linear``)."""
    d, d_ff = config.d_model, config.d_ff

    def layer(p: str) -> LayerParams:
        return LayerParams(
            query=t.linear(f"{p}.attention.self.query", d, d),
            key=t.linear(f"{p}.attention.self.key", d, d),
            value=t.linear(f"{p}.attention.self.value", d, d),
            attn_out=t.linear(f"{p}.attention.output.dense", d, d),
            attn_norm=t.norm(f"{p}.attention.output.LayerNorm", d),
            ff_in=t.linear(f"{p}.intermediate.dense", d, d_ff),
            ff_out=t.linear(f"{p}.output.dense", d_ff, d),
            ff_norm=t.norm(f"{p}.output.LayerNorm", d),
        )

    return BertParams(
        word=t.take("embeddings.word_embeddings.weight", config.n_vocab, d),
        position=t.take("embeddings.position_embeddings.weight", config.n_positions, d),
        token_type=t.take("embeddings.token_type_embeddings.weight", config.n_types, d),
        embed_norm=t.norm("embeddings.LayerNorm", d),
        layers=tuple(layer(f"encoder.layer.{i}") for i in range(config.n_layer)),
    )


# --- the forward pass ----------------------------------------------------------


def embed(params: BertParams, config: BertConfig, ids: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Word + position + token-type embeddings, then LayerNorm."""
    # [b, n] token ids, [b, n] segment ids -> [b, n, d_model]
    n = ids.shape[-1]
    x = params.word[ids] + params.position[np.arange(n)] + params.token_type[types]
    return layer_norm(x, params.embed_norm, config.eps)


def project(x: np.ndarray, lp: LayerParams, n_head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K, V, split into heads: [b, n, d_model] -> [b, n_head, n, d_k] each."""
    return (
        split_heads(dense(x, lp.query), n_head),
        split_heads(dense(x, lp.key), n_head),
        split_heads(dense(x, lp.value), n_head),
    )


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every head's attention; ``allowed`` [b, n] is False at padding, which no query may attend to."""
    # [b, n_head, n, d_k] each, [b, n] -> heads [b, n_head, n, d_k], weights [b, n_head, n, n]
    heads, weights = attention(q, k, v, AttentionOptions(mask=allowed[:, None, None, :]))  # mask [b, 1, 1, n_k]
    assert weights is not None  # need_weights is on by default
    return heads, weights


def self_attention(x: np.ndarray, allowed: np.ndarray, lp: LayerParams, n_head: int) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head self-attention: project, split heads, attend, merge, project out."""
    # [b, n, d_model], [b, n] -> [b, n, d_model], weights [b, n_head, n, n]
    heads, weights = attend(*project(x, lp, n_head), allowed)
    return dense(merge_heads(heads), lp.attn_out), weights


def feed_forward(x: np.ndarray, lp: LayerParams, activation: str) -> np.ndarray:
    """The same two-layer network applied to every token's vector."""
    # [b, n, d_model] -> [b, n, d_ff] -> [b, n, d_model]
    return dense(ACTIVATIONS[activation](dense(x, lp.ff_in)), lp.ff_out)


def encoder_layer(
    x: np.ndarray, allowed: np.ndarray, lp: LayerParams, config: BertConfig
) -> tuple[np.ndarray, np.ndarray]:
    """One layer (post-LayerNorm, as BERT): attention and feed-forward, each
    added to its input and normalised."""
    # [b, n, d_model], [b, n] -> [b, n, d_model], weights [b, n_head, n, n]
    a, weights = self_attention(x, allowed, lp, config.n_head)
    x = layer_norm(x + a, lp.attn_norm, config.eps)
    x = layer_norm(x + feed_forward(x, lp, config.activation), lp.ff_norm, config.eps)
    return x, weights


def forward(
    params: BertParams, config: BertConfig, ids: np.ndarray, types: np.ndarray, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The whole encoder: the last hidden states and every layer's attention weights.

    ids [b, n] token ids; types [b, n] segment ids (all 0 for one sentence);
    allowed [b, n] True for real tokens, False for padding.
    -> hidden [b, n, d_model], weights [n_layer, b, n_head, n, n]
    """
    x = embed(params, config, ids, types)
    per_layer = []
    for lp in params.layers:
        x, weights = encoder_layer(x, allowed, lp, config)
        per_layer.append(weights)
    return x, np.stack(per_layer)


def attn_params(lp: LayerParams) -> AttentionParams:
    return AttentionParams(q=lp.query, k=lp.key, v=lp.value, o=lp.attn_out)


def probe(params: BertParams, config: BertConfig, ids: np.ndarray, layer: int) -> LayerProbe:
    """One layer's attention on one text, as ``forward`` runs it (a batch of one, the
    same calls): layers before it, then its projections and heads."""
    if not 0 <= layer < config.n_layer:
        raise UsageError(f"layer {layer} is out of range: there are {plural(config.n_layer, 'layer')}")
    ids = np.asarray(ids)[None]  # [1, n]
    allowed = np.ones(ids.shape, dtype=bool)
    x = embed(params, config, ids, np.zeros_like(ids))
    for lp in params.layers[:layer]:
        x, _ = encoder_layer(x, allowed, lp, config)
    lp = params.layers[layer]
    q, k, v = project(x, lp, config.n_head)  # [1, n_head, n, d_k] each
    heads, _ = attend(q, k, v, allowed)
    return LayerProbe(
        layer,
        x[0],
        q[0],
        k[0],
        v[0],
        heads[0],
        attn_params(lp),
        AttentionOptions(),
        "the layer's input, already normalised (BERT's LayerNorm comes after each sublayer)"
        if layer
        else "the embeddings, after their LayerNorm",
    )


FAMILY: Family[BertConfig, BertParams] = Family(
    name="BERT",
    architecture="BertModel",
    prefix="bert.",
    config=BertConfig.from_dict,
    params=read_params,
    forward=forward,
    probe=probe,
)
