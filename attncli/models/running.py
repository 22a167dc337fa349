"""Running a loaded model on texts: tokens, every head's attention weights
(``trace``), and sentence embeddings pooled as sentence-transformers does."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from attncli.core.arrays import unit_rows
from attncli.errors import AttnError
from attncli.models.loading import Model, load_model
from attncli.models.pooling import pool

BATCH = 32  # texts per forward pass in sentence_embeddings: bounds the memory


@dataclass
class Trace:
    """One text through the encoder: its tokens and every head's attention."""

    tokens: list[str]  # the tokenizer's tokens, special ones ([CLS], [SEP]) included
    special: list[bool]  # True for [CLS], [SEP] and the like
    hidden: np.ndarray  # [n, d_model] the last layer's vectors
    weights: np.ndarray  # [n_layer, n_head, n, n] attention weights: queries down, keys across
    ids: list[int] = field(default_factory=list)  # the token ids


@dataclass
class Batch:
    """Texts as padded token ids, with where the real tokens are."""

    ids: np.ndarray  # [b, n] int64, 0-padded on the right
    allowed: np.ndarray  # [b, n] bool, True for real tokens
    tokens: list[list[str]]  # each text's tokens, unpadded
    special: list[list[bool]]


def tokenize(model: Model, texts: Sequence[str], truncate: bool = False) -> Batch:
    """The tokenizer's tokens, special ones included, right-padded into one array.

    ``truncate`` cuts each text to ``model.max_tokens`` (as sentence-transformers
    does); otherwise a text longer than the model's positions is an error.
    """
    if truncate:  # the tokenizer keeps [CLS] and [SEP] and drops words from the end
        model.tokenizer.enable_truncation(model.max_tokens)
    else:
        model.tokenizer.no_truncation()
    encodings = model.tokenizer.encode_batch(list(texts))
    limit = model.config.n_positions
    for enc in encodings:
        if len(enc.ids) > limit:
            raise AttnError(f"the text is {len(enc.ids)} tokens but the model takes at most {limit}", hint="shorten it")
    rows = [(enc.ids, enc.tokens, enc.special_tokens_mask) for enc in encodings]
    n = max((len(ids) for ids, _, _ in rows), default=0)
    ids = np.zeros((len(rows), n), dtype=np.int64)  # [b, n]; the padding's id is never attended to
    allowed = np.zeros((len(rows), n), dtype=bool)
    for i, (row_ids, _, _) in enumerate(rows):
        ids[i, : len(row_ids)] = row_ids
        allowed[i, : len(row_ids)] = True
    if ids.size and ids.max() >= model.config.n_vocab:
        raise AttnError(
            f"the tokenizer gives id {int(ids.max())} but the model has {model.config.n_vocab} embeddings",
            source=str(model.path),
        )
    return Batch(ids, allowed, [list(t) for _, t, _ in rows], [[bool(s) for s in m] for _, _, m in rows])


def encode(model: Model, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """The family's forward pass on a batch, one segment per text (token types 0).

    -> hidden [b, n, d_model], weights [n_layer, b, n_head, n, n]
    """
    types = np.zeros_like(batch.ids)
    return model.family.forward(model.params, model.config, batch.ids, types, batch.allowed)


def trace(model: Model, text: str) -> Trace:
    """Run one text through the encoder, keeping every layer's and head's attention weights."""
    batch = tokenize(model, [text])
    hidden, weights = encode(model, batch)
    # [1, n, d], [n_layer, 1, n_head, n, n] -> [n, d], [n_layer, n_head, n, n]
    return Trace(batch.tokens[0], batch.special[0], hidden[0], weights[:, 0], batch.ids[0].tolist())


ModelLike = Model | str | os.PathLike[str]


def sentence_embeddings(model: ModelLike, texts: Sequence[str]) -> np.ndarray:
    """One vector per text, pooled as the model was trained to be
    (all-MiniLM-L6-v2: mean over tokens, then L2-normalised).

    ``model`` is a loaded Model, or a folder or cached name to load.
    -> [len(texts), d_model] float32; rows of normalising models have length 1,
    so ``a @ b.T`` gives cosine similarities.
    """
    if not isinstance(model, Model):
        model = load_model(model)
    texts = list(texts)
    if not texts:
        return np.zeros((0, model.config.d_model), dtype=np.float32)
    chunks = []
    for start in range(0, len(texts), BATCH):
        batch = tokenize(model, texts[start : start + BATCH], truncate=True)
        hidden, _ = encode(model, batch)  # [b, n, d]
        chunks.append(pool(hidden, batch.allowed, model.pooling))  # [b, d]
    vectors = np.concatenate(chunks)
    return unit_rows(vectors, floor=1e-12) if model.normalise else vectors  # torch's normalize eps
