"""A BERT encoder's forward pass in numpy, through attncli's own ``attention``.

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

Row vectors and ``x @ W`` with W of shape [d_in, d_out], as everywhere in
attncli (Hugging Face stores W as [d_out, d_in]; the loader transposes).
float32 throughout, like the trained weights. No I/O here: ``attncli.models``
finds, reads and tokenizes; this module only computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from attncli.core.api import attention
from attncli.errors import AttnError, ShapeError


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
    def from_dict(cls, config: Mapping, source: str | None = None) -> BertConfig:
        """Read a Hugging Face config.json; check what the forward pass relies on."""
        fields = {
            "n_vocab": "vocab_size", "d_model": "hidden_size", "n_layer": "num_hidden_layers",
            "n_head": "num_attention_heads", "d_ff": "intermediate_size",
            "n_positions": "max_position_embeddings", "n_types": "type_vocab_size",
        }
        sizes = {}
        for name, key in fields.items():
            value = config.get(key, 2 if key == "type_vocab_size" else None)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise AttnError(f"{key} must be a positive whole number, got {value!r}", source=source)
            sizes[name] = value
        activation = config.get("hidden_act", "gelu")
        if activation not in ACTIVATIONS:
            raise AttnError(f"unsupported activation hidden_act={activation!r}", source=source,
                            hint=f"attn knows {', '.join(sorted(ACTIVATIONS))}")
        embedding = config.get("position_embedding_type", "absolute")
        if embedding != "absolute":
            raise AttnError(f"unsupported position_embedding_type {embedding!r}", source=source,
                            hint="attn runs BERT with absolute position embeddings")
        if sizes["d_model"] % sizes["n_head"]:
            raise ShapeError(
                f"hidden_size {sizes['d_model']} does not split into {sizes['n_head']} heads",
                source=source, hint="hidden_size must be a multiple of num_attention_heads",
            )
        return cls(**sizes, eps=float(config.get("layer_norm_eps", 1e-12)), activation=activation)


@dataclass
class LayerWeights:
    """One encoder layer. Projections are [d_in, d_out]; biases [d_out]."""

    w_q: np.ndarray  # [d_model, d_model]
    b_q: np.ndarray
    w_k: np.ndarray
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: np.ndarray  # [d_model, d_model], heads merged -> model
    b_o: np.ndarray
    ln1_g: np.ndarray  # [d_model] LayerNorm after attention
    ln1_b: np.ndarray
    w_1: np.ndarray  # [d_model, d_ff]
    b_1: np.ndarray
    w_2: np.ndarray  # [d_ff, d_model]
    b_2: np.ndarray
    ln2_g: np.ndarray  # [d_model] LayerNorm after the feed-forward network
    ln2_b: np.ndarray


@dataclass
class BertWeights:
    """All of a BERT encoder's parameters, as float32 arrays."""

    e_word: np.ndarray  # [n_vocab, d_model]
    e_pos: np.ndarray  # [n_positions, d_model]
    e_type: np.ndarray  # [n_types, d_model]
    ln_g: np.ndarray  # [d_model] LayerNorm of the embeddings
    ln_b: np.ndarray
    layers: list[LayerWeights]

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, np.ndarray], config: BertConfig,
                     source: str | None = None) -> BertWeights:
        """Pick the Hugging Face ``BertModel`` tensors by name, checking each shape.

        Names may carry a ``bert.`` prefix (checkpoints of BertForMaskedLM and
        friends) and old LayerNorm names ``gamma``/``beta``; both are accepted.
        """
        names = {_plain_name(name): name for name in tensors}
        d, d_ff = config.d_model, config.d_ff

        def take(name: str, *shape: int) -> np.ndarray:
            if name not in names:
                raise AttnError(f"no tensor {name!r}", source=source,
                                hint="is this a BERT model? attn reads BertModel weights")
            array = tensors[names[name]]
            if array.shape != shape:
                raise ShapeError(f"tensor {name!r} is {_shape(array.shape)} but config.json "
                                 f"implies {_shape(shape)}", source=source)
            return np.ascontiguousarray(array, dtype=np.float32)

        def linear(prefix: str, d_in: int, d_out: int) -> tuple[np.ndarray, np.ndarray]:
            # Hugging Face stores W as [d_out, d_in]; x @ W wants [d_in, d_out].
            return take(f"{prefix}.weight", d_out, d_in).T.copy(), take(f"{prefix}.bias", d_out)

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return take(f"{prefix}.LayerNorm.weight", d), take(f"{prefix}.LayerNorm.bias", d)

        layers = []
        for i in range(config.n_layer):
            p = f"encoder.layer.{i}"
            layers.append(LayerWeights(
                *linear(f"{p}.attention.self.query", d, d),
                *linear(f"{p}.attention.self.key", d, d),
                *linear(f"{p}.attention.self.value", d, d),
                *linear(f"{p}.attention.output.dense", d, d),
                *norm(f"{p}.attention.output"),
                *linear(f"{p}.intermediate.dense", d, d_ff),
                *linear(f"{p}.output.dense", d_ff, d),
                *norm(f"{p}.output"),
            ))
        return cls(
            take("embeddings.word_embeddings.weight", config.n_vocab, d),
            take("embeddings.position_embeddings.weight", config.n_positions, d),
            take("embeddings.token_type_embeddings.weight", config.n_types, d),
            *norm("embeddings"),
            layers,
        )


def _plain_name(name: str) -> str:
    """'bert.encoder.…LayerNorm.gamma' -> 'encoder.…LayerNorm.weight'."""
    name = name.removeprefix("bert.")
    if name.endswith(".gamma"):
        return name[: -len("gamma")] + "weight"
    if name.endswith(".beta"):
        return name[: -len("beta")] + "bias"
    return name


def _shape(shape: tuple[int, ...]) -> str:
    return "×".join(map(str, shape))


# --- the building blocks -------------------------------------------------------


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """Each vector to mean 0 and variance 1, then scaled by g and shifted by b."""
    # [..., d] -> [..., d]
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b  # eps a python float: stays float32


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, vectorised (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7,
    below float32's resolution near 1); numpy has no erf and scipy is not needed."""
    p, a1, a2, a3, a4, a5 = 0.3275911, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
    sign, z = np.sign(x), np.abs(x)
    t = 1 / (1 + p * z)
    y = 1 - ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t * np.exp(-z * z)
    return sign * y


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x·Φ(x), BERT's activation ('gelu' in config.json)."""
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation ('gelu_new', 'gelu_pytorch_tanh')."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": relu,
}


# --- the forward pass ----------------------------------------------------------


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x W + b for every vector of a batch, as one 2-D product (numpy's stacked
    matmul calls BLAS once per text, several times slower on small inputs)."""
    # [..., d_in] @ [d_in, d_out] + [d_out] -> [..., d_out]
    return (x.reshape(-1, x.shape[-1]) @ w + b).reshape(*x.shape[:-1], w.shape[1])


def embed(w: BertWeights, config: BertConfig, ids: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Word + position + token-type embeddings, then LayerNorm."""
    # [b, n] token ids, [b, n] segment ids -> [b, n, d_model]
    n = ids.shape[-1]
    x = w.e_word[ids] + w.e_pos[np.arange(n)] + w.e_type[types]
    return layer_norm(x, w.ln_g, w.ln_b, config.eps)


def split_heads(x: np.ndarray, n_head: int) -> np.ndarray:
    # [b, n, d_model] -> [b, n_head, n, d_k]
    b, n, d = x.shape
    return x.reshape(b, n, n_head, d // n_head).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    # [b, n_head, n, d_k] -> [b, n, d_model]
    b, h, n, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d_k)


def self_attention(x: np.ndarray, allowed: np.ndarray, lw: LayerWeights,
                   n_head: int) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head self-attention: project, split heads, attend, merge, project out.

    ``allowed`` [b, n] is False at padding, which no query may attend to.
    """
    # [b, n, d_model], [b, n] -> [b, n, d_model], weights [b, n_head, n, n]
    q = split_heads(linear(x, lw.w_q, lw.b_q), n_head)  # [b, n_head, n, d_k]
    k = split_heads(linear(x, lw.w_k, lw.b_k), n_head)
    v = split_heads(linear(x, lw.w_v, lw.b_v), n_head)
    heads, weights = attention(q, k, v, mask=allowed[:, None, None, :])  # mask [b, 1, 1, n_k]
    return linear(merge_heads(heads), lw.w_o, lw.b_o), weights


def feed_forward(x: np.ndarray, lw: LayerWeights, activation: str) -> np.ndarray:
    """The same two-layer network applied to every token's vector."""
    # [b, n, d_model] -> [b, n, d_ff] -> [b, n, d_model]
    return linear(ACTIVATIONS[activation](linear(x, lw.w_1, lw.b_1)), lw.w_2, lw.b_2)


def encoder_layer(x: np.ndarray, allowed: np.ndarray, lw: LayerWeights,
                  config: BertConfig) -> tuple[np.ndarray, np.ndarray]:
    """One layer (post-LayerNorm, as BERT): attention and feed-forward, each
    added to its input and normalised."""
    # [b, n, d_model], [b, n] -> [b, n, d_model], weights [b, n_head, n, n]
    a, weights = self_attention(x, allowed, lw, config.n_head)
    x = layer_norm(x + a, lw.ln1_g, lw.ln1_b, config.eps)
    x = layer_norm(x + feed_forward(x, lw, config.activation), lw.ln2_g, lw.ln2_b, config.eps)
    return x, weights


def encode(w: BertWeights, config: BertConfig, ids: np.ndarray, allowed: np.ndarray,
           types: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The whole encoder: the last hidden states and every layer's attention.

    ids [b, n] token ids; allowed [b, n] True for real tokens, False for padding;
    types [b, n] segment ids (default all 0, one sentence).
    -> hidden [b, n, d_model], weights [n_layer, b, n_head, n, n]
    """
    if types is None:
        types = np.zeros_like(ids)
    x = embed(w, config, ids, types)
    per_layer = []
    for lw in w.layers:
        x, weights = encoder_layer(x, allowed, lw, config)
        per_layer.append(weights)
    return x, np.stack(per_layer)


# --- sentence embeddings -------------------------------------------------------

POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")


def pool(hidden: np.ndarray, allowed: np.ndarray, mode: str = "mean") -> np.ndarray:
    """One vector per text from its tokens' vectors, ignoring padding.

    mean (sentence-transformers' default, all-MiniLM-L6-v2): the average of
    the real tokens; cls: the [CLS] token's vector; max: the largest value in
    each dimension; mean_sqrt_len: the sum divided by √(number of tokens).
    """
    # [b, n, d], [b, n] -> [b, d]
    real = allowed[..., None].astype(hidden.dtype)  # [b, n, 1]
    count = np.maximum(real.sum(axis=1), 1)  # [b, 1]
    if mode == "mean":
        return (hidden * real).sum(axis=1) / count
    if mode == "mean_sqrt_len":
        return (hidden * real).sum(axis=1) / np.sqrt(count)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return np.where(allowed[..., None], hidden, -np.inf).max(axis=1)
    raise AttnError(f"unknown pooling {mode!r}", hint=f"use one of {', '.join(POOLINGS)}")


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1, so a dot product is the cosine similarity."""
    # [b, d] -> [b, d]
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, 1e-12)
