"""What a model family is: the contract between the loader and a family module.

A family (``bert.py`` is the first) gives a ``Family``: how to read its
config.json into a typed config, how to pick its parameters by name from the
checkpoint's tensors, and its forward pass. The loader hands it a ``Tensors``,
which finds each tensor by its Hugging Face name and checks the shape the
config implies (nanoGPT's ``from_pretrained`` asserts names and shapes the
same way), so a family module never opens a file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from attncli.core.arrays import shape_text
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
class Family(Generic[C, P]):
    """One registered model family: its names, and the three steps that run it."""

    name: str  # as shown to people: "BERT"
    architecture: str  # the Hugging Face class whose tensor names it reads: "BertModel"
    prefix: str  # the prefix task heads' checkpoints put on those names: "bert."
    config: Callable[[Mapping[str, Any], str], C]  # config.json (and its path, for errors) -> typed config
    params: Callable[[Tensors, C], P]  # the checkpoint's tensors -> typed params, picked by name
    forward: Forward[P, C]


class Tensors:
    """A checkpoint's tensors by name, each taken with the shape the config implies.

    Names are Hugging Face's, without the family's prefix (``bert.encoder…``
    is found as ``encoder…``); old LayerNorm names ``gamma``/``beta`` are
    found as ``weight``/``bias``. Every tensor comes out float32 and contiguous.
    """

    def __init__(self, tensors: Mapping[str, np.ndarray], family: Family[Any, Any], source: str | None = None) -> None:
        self.tensors, self.family, self.source = tensors, family, source
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
                f"tensor {name!r} is {shape_text(array.shape)} but config.json implies {shape_text(shape)}",
                source=self.source,
            )
        return np.ascontiguousarray(array, dtype=np.float32)

    def linear(self, name: str, d_in: int, d_out: int) -> Linear:
        """``name.weight`` and ``name.bias`` of a torch Linear, as x @ w + b wants them:
        torch stores the weight [d_out, d_in]; it is transposed to [d_in, d_out]."""
        return Linear(w=self.take(f"{name}.weight", d_out, d_in).T.copy(), b=self.take(f"{name}.bias", d_out))

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
