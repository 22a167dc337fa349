"""The logit lens (nostalgebraist, 2020): each layer's output read through the
model's final norm and output head, as if the model stopped there. What the
residual stream "predicts" after each position, layer by layer; the last
layer's reading is the model's own prediction.

    lens = Lens(n_layer, n, top=3)
    run(steps, params, config, ids, lens=lens)     # reads each layer as the pass goes by
    lens.reading.ids[layer, position]              # the top 3 next-token ids, likeliest first

Logits are made a block of positions at a time (``LENS_ROWS`` × n_vocab), so a
long prompt never holds layers × positions × vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

LENS_ROWS = 256  # positions turned into logits at a time: [LENS_ROWS, n_vocab] float32


@dataclass
class LensReading:
    """The likeliest next tokens after each position, read off each layer's output."""

    ids: np.ndarray  # [n_layer, n, top] int64, likeliest first (ties by id)
    probabilities: np.ndarray  # [n_layer, n, top] float64: softmax of that layer's logits


class Lens:
    """Collects a ``LensReading`` as a forward pass goes by (``decoder.run``'s ``lens``)."""

    def __init__(self, n_layer: int, n: int, top: int) -> None:
        self.top = top
        self.reading = LensReading(
            np.zeros((n_layer, n, top), dtype=np.int64), np.zeros((n_layer, n, top), dtype=np.float64)
        )

    def read(self, steps: Any, params: Any, config: Any, layer: int, x: np.ndarray, start: int) -> None:
        """x [n, d_model]: layer ``layer``'s output for the positions start .. start + n − 1."""
        for a in range(0, x.shape[0], LENS_ROWS):
            b = min(x.shape[0], a + LENS_ROWS)
            logits = steps.logits(params, config, steps.norm(params, config, x[a:b]))  # [b − a, n_vocab]
            ids, probabilities = top_tokens(logits, self.top)
            self.reading.ids[layer, start + a : start + b] = ids
            self.reading.probabilities[layer, start + a : start + b] = probabilities


def top_tokens(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """logits [m, n_vocab] -> the k likeliest ids [m, k] and their probabilities [m, k]
    (softmax in float64), largest first, ties by id (as ``decoding``'s predictions)."""
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    k = min(k, p.shape[-1])
    top = np.argpartition(-p, k - 1, axis=-1)[:, :k]  # [m, k], unordered
    chosen = np.take_along_axis(p, top, axis=-1)
    order = np.lexsort((top, -chosen), axis=-1)  # by probability, then id
    top = np.take_along_axis(top, order, axis=-1)
    return top, np.take_along_axis(p, top, axis=-1)
