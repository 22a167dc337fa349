"""What a model family is: the contract between the loader and a family module.

A family (``bert.py`` is the first) gives a ``Family``: how to read its
config.json into a typed config, how to pick its parameters by name from the
checkpoint's tensors, and its forward pass. The loader hands it a ``Tensors``,
which finds each tensor by its Hugging Face name and checks the shape the
config implies (nanoGPT's ``from_pretrained`` asserts names and shapes the
same way), so a family module never opens a file.

A decoder family (``gpt2.py``, ``llama.py``) also gives its ``DecoderSteps``
(embed, the norm before attention, project to Q/K/V, finish a layer, the
output head), which ``decoder.run`` drives layer by layer with a KV cache,
keeping only the attention weights asked for; and the names of its tensors in
a GGUF file (``GgufNames``).

Every family also gives its ``probe``: one layer's attention as its forward
pass runs it (``LayerProbe``: the rows the projections read, Q, K, V, each
head's output, W_Q, W_K, W_V, W_O), what ``attn trace --explain`` walks through
(``explaining.explain_head``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from attncli.core.arrays import shape_text
from attncli.core.options import AttentionOptions
from attncli.errors import AttnError, ShapeError
from attncli.models.blocks import Linear, Norm


class ModelConfig(Protocol):
    """The sizes every family's config has, which the loader and ``attn trace`` read."""

    @property
    def n_vocab(self) -> int: ...  # token embeddings: ids must be below this
    @property
    def d_model(self) -> int: ...  # the width of every token's vector
    @property
    def n_layer(self) -> int: ...
    @property
    def n_head(self) -> int: ...
    @property
    def n_positions(self) -> int: ...  # the longest input, special tokens included


C = TypeVar("C", bound=ModelConfig)
P = TypeVar("P")

# forward(params, config, ids [b, n], types [b, n], allowed [b, n])
#   -> hidden [b, n, d_model], weights [n_layer, b, n_head, n, n]
Forward = Callable[[P, C, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class AttentionParams:
    """One layer's attention projections, as x @ W + b wants them ([d_in, d_out]; views
    of the family's own params, e.g. GPT-2's ``c_attn`` cut in three)."""

    q: Linear  # W_Q [d_model, n_head · head_dim], b_q
    k: Linear  # W_K [d_model, n_kv_head · head_dim], b_k
    v: Linear  # W_V [d_model, n_kv_head · d_v], b_v
    o: Linear  # W_O [n_head · d_v, d_model], b_o: the heads' outputs side by side -> the model's width


@dataclass(frozen=True)
class LayerProbe:
    """One layer's attention as the family's forward pass ran it, for one sequence:
    what it read, what it made of it, and the weights it used."""

    layer: int
    x: np.ndarray  # [n, d_model] the rows the projections read (after the layer's norm, where there is one)
    q: np.ndarray  # [n_head, n, head_dim] as projected: RoPE, if any, is attention's (not applied here)
    k: np.ndarray  # [n_kv_head, n, head_dim]
    v: np.ndarray  # [n_kv_head, n, d_v]
    attended: np.ndarray  # [n_head, n, d_v] each head's output, Σ_j α_ij v_j, before W_O
    params: AttentionParams
    options: AttentionOptions  # the layer's attention settings, every head's
    read: str  # what x is, in words: "the residual stream after RMSNorm (input_layernorm)"


# probe(params, config, ids [n], layer) -> that layer's attention on the sequence
Probe = Callable[[P, C, np.ndarray, int], LayerProbe]


@dataclass(frozen=True)
class DecoderSteps(Generic[C, P]):
    """A decoder's forward pass cut where attention goes, so that ``decoder.run``
    can drive every family's layers alike (one token at a time with a cache,
    or a whole prompt) and call attn's own attention in between.

    Arrays are one sequence, no batch: x [n, d_model]; heads [n_head, n, head_dim].
    """

    embed: Callable[[P, C, np.ndarray, int], np.ndarray]  # (ids [n], position of the first) -> x [n, d_model]
    # (params of layer i, config, x [n, d_model]) -> the rows attention's projections read [n, d_model]
    attn_input: Callable[[Any, C, np.ndarray], np.ndarray]
    # (params of layer i, config, attn_input's rows [n, d_model])
    #   -> q [n_head, n, d], k [n_kv_head, n, d], v [n_kv_head, n, d]
    project: Callable[[Any, C, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
    # (params of layer i, config, x [n, d_model], attended [n_head, n, d]) -> x [n, d_model] after the layer
    finish: Callable[[Any, C, np.ndarray, np.ndarray], np.ndarray]
    layers: Callable[[P], Sequence[Any]]  # params -> each layer's params
    norm: Callable[[P, C, np.ndarray], np.ndarray]  # the final norm: x [m, d_model] -> [m, d_model]
    logits: Callable[[P, C, np.ndarray], np.ndarray]  # the output head: normed x [m, d_model] -> [m, n_vocab]
    attn_params: Callable[[Any], AttentionParams]  # params of layer i -> its W_Q, W_K, W_V, W_O (what project uses)
    attn_read: str  # what attn_input gives, in words: "the residual stream after RMSNorm (input_layernorm)"
    # what project does after x W + b, in words, when it does more (Gemma 3's QK-norm); None: nothing
    after_projection: Callable[[C], str | None] = lambda config: None


@dataclass(frozen=True)
class GgufNames:
    """A family's tensors in llama.cpp's GGUF files: GGUF name -> Hugging Face name
    (``{i}`` the layer; ``.weight``/``.bias`` carried over), and how they differ."""

    names: Mapping[str, str]  # "blk.{i}.attn_q" -> "layers.{i}.self_attn.q_proj"
    permuted: Mapping[str, str] = field(default_factory=dict)  # rows permuted for RoPE: GGUF name -> heads field
    transposed: tuple[str, ...] = ()  # GGUF names stored [d_out, d_in] where Hugging Face has [d_in, d_out]


@dataclass(frozen=True)
class Family(Generic[C, P]):
    """One registered model family: its names, and the three steps that run it."""

    name: str  # as shown to people: "BERT"
    architecture: str  # the Hugging Face class whose tensor names it reads: "BertModel"
    prefix: str  # the prefix task heads' checkpoints put on those names: "bert."
    config: Callable[[Mapping[str, Any], str], C]  # config.json (and its path, for errors) -> typed config
    params: Callable[[Tensors, C], P]  # the checkpoint's tensors -> typed params, picked by name
    forward: Forward[P, C]  # every layer's and head's weights of a batch (what `trace` and embeddings use)
    probe: Probe[P, C]  # one layer's attention on one sequence, as forward runs it (attn trace --explain)
    decoder: DecoderSteps[C, P] | None = None  # a causal language model: its steps, for decoder.run
    gguf: GgufNames | None = None  # its tensors' names in GGUF files, where attn reads those

    @property
    def kind(self) -> str:
        return "decoder" if self.decoder is not None else "encoder"


class Tensors:
    """A checkpoint's tensors by name, each taken with the shape the config implies.

    Names are Hugging Face's, without the family's prefix (``bert.encoder…``
    is found as ``encoder…``); old LayerNorm names ``gamma``/``beta`` are
    found as ``weight``/``bias``. Every tensor comes out float32 and contiguous.
    """

    def __init__(
        self,
        tensors: Mapping[str, np.ndarray],
        family: Family[Any, Any],
        source: str | None = None,
        implied_by: str = "config.json",
    ) -> None:
        self.tensors, self.family, self.source, self.implied_by = tensors, family, source, implied_by
        self.names = {self._plain(name): name for name in tensors}

    def _plain(self, name: str) -> str:
        """'bert.encoder.…LayerNorm.gamma' -> 'encoder.…LayerNorm.weight'."""
        name = name.removeprefix(self.family.prefix)
        if name.endswith(".gamma"):
            return name[: -len("gamma")] + "weight"
        if name.endswith(".beta"):
            return name[: -len("beta")] + "bias"
        return name

    def take(self, name: str, *shape: int) -> np.ndarray:
        """The tensor ``name``, which must have ``shape``."""
        if name not in self.names:
            raise AttnError(
                f"no tensor {name!r}",
                source=self.source,
                hint=f"is this a {self.family.name} model? attn reads {self.family.architecture}'s parameters",
            )
        array = self.tensors[self.names[name]]
        if array.shape != shape:
            raise ShapeError(
                f"tensor {name!r} is {shape_text(array.shape)} but {self.implied_by} implies {shape_text(shape)}",
                source=self.source,
            )
        return np.ascontiguousarray(array, dtype=np.float32)

    def has(self, name: str) -> bool:
        return name in self.names

    def linear(self, name: str, d_in: int, d_out: int, bias: bool | None = True, copy: bool = True) -> Linear:
        """``name.weight`` and ``name.bias`` of a torch Linear, as x @ w + b wants them:
        torch stores the weight [d_out, d_in]; it is transposed to [d_in, d_out]
        (``copy`` False: as a view, which BLAS reads as it is). ``bias`` None: the
        bias when the checkpoint has one (Qwen2's q/k/v, Llama's ``attention_bias``)."""
        has_bias = bias if bias is not None else self.has(f"{name}.bias")
        w = self.take(f"{name}.weight", d_out, d_in).T
        return Linear(w=w.copy() if copy else w, b=self.take(f"{name}.bias", d_out) if has_bias else None)

    def conv1d(self, name: str, d_in: int, d_out: int) -> Linear:
        """GPT-2's ``Conv1D``: the weight is stored [d_in, d_out] already, as x @ w + b wants it."""
        return Linear(w=self.take(f"{name}.weight", d_in, d_out), b=self.take(f"{name}.bias", d_out))

    def norm(self, name: str, d: int) -> Norm:
        """``name.weight`` and ``name.bias`` of a LayerNorm over d features."""
        return Norm(g=self.take(f"{name}.weight", d), b=self.take(f"{name}.bias", d))


def whole_number(config: Mapping[str, Any], key: str, source: str | None, default: int | None = None) -> int:
    """A positive whole number from config.json (``default`` when the key is absent)."""
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise AttnError(f"{key} must be a positive whole number, got {value!r}", source=source)
    return value


def positive_number(config: Mapping[str, Any], key: str, source: str | None, default: float) -> float:
    """A positive finite number from config.json (``default`` when the key is absent)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise AttnError(f"{key} must be a positive number, got {value!r}", source=source)
    return float(value)


def check_heads(d_model: int, n_head: int, source: str | None, d_key: str, n_key: str) -> None:
    """The model width must split into the heads (named as config.json names them)."""
    if d_model % n_head:
        raise ShapeError(
            f"{d_key} {d_model} does not split into {n_head} heads",
            source=source,
            hint=f"{d_key} must be a multiple of {n_key}",
        )
