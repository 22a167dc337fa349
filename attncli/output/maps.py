"""Attention weights to draw as pictures (the head view page, figures): one
typed object, whatever the command — one head (run), a head per slice (self),
layers × heads (trace)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class AttentionMaps:
    """Weights [n_layer, n_head, n_q, n_k] with the names of every axis."""

    weights: Any  # [n_layer, n_head, n_q, n_k] floats
    queries: list[str]  # n_q row names
    keys: list[str]  # n_k column names
    layers: list[str]  # n_layer names ("layer 5"); [""] when there are no layers
    heads: list[str]  # n_head names ("head 11"); ["weights"] for plain attention
    allowed: Any = None  # bool, broadcastable to weights: False where the mask forbids; None: all allowed
    title: str = ""
    top: float = 1.0  # the weight drawn in the brightest colour: 1, or the largest with --scale-to-max
    layer_axis: str = "layer"  # what the first axis is: "layer" (a model's), "batch" (tensors')
    explore: Any = None  # one head small enough to recompute in the page (headview.Explore), or None

    def __post_init__(self) -> None:
        import numpy as np

        self.weights = np.asarray(self.weights)
        shape = (len(self.layers), len(self.heads), len(self.queries), len(self.keys))
        if self.weights.shape != shape:
            raise ValueError(f"weights are {self.weights.shape}, the names say {shape}")
        if self.allowed is not None:
            self.allowed = np.broadcast_to(np.asarray(self.allowed, dtype=bool), shape)

    @classmethod
    def single(
        cls, weights: Any, queries: list[str], keys: list[str], allowed: Any = None, title: str = "", top: float = 1.0
    ) -> AttentionMaps:
        """One head's weights [n_q, n_k]."""
        return cls(
            weights[None, None],
            queries,
            keys,
            [""],
            ["weights"],
            None if allowed is None else allowed[None, None],
            title,
            top,
        )

    @property
    def count(self) -> int:
        """How many heads in all (layers × heads)."""
        return len(self.layers) * len(self.heads)

    def panels(self) -> Iterator[tuple[str, Any, Any]]:
        """(name, weights [n_q, n_k], allowed [n_q, n_k] or None) of every head, layer by layer."""
        for a, layer in enumerate(self.layers):
            for b, head in enumerate(self.heads):
                name = " · ".join(part for part in (layer, head) if part and part != "weights") or "weights"
                yield name, self.weights[a, b], None if self.allowed is None else self.allowed[a, b]
