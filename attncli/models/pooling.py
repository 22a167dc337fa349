"""Sentence embeddings from token vectors: sentence-transformers' pooling modes."""

from __future__ import annotations

import numpy as np

from attncli.errors import AttnError

POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")


def pool(hidden: np.ndarray, allowed: np.ndarray, mode: str = "mean") -> np.ndarray:
    """One vector per text from its tokens' vectors, ignoring padding.

    mean (sentence-transformers' default, all-MiniLM-L6-v2): the average of
    the real tokens; cls: the first token's vector ([CLS] in BERT); max: the
    largest value in each dimension; mean_sqrt_len: the sum divided by
    √(number of tokens).
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
