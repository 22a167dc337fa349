"""Which query rows a sampled check (``attn check --rows K``) takes.

A kernel's bugs gather where its blocks meet: the first and last row of a
query block, and the rows where the causal or window band crosses the edge
of a key block (or of the keys themselves), where a block turns from fully
visible to partly masked. A sampled check takes all of those, and the rest
at random, with a seed that can be given again to repeat the check.

The blocks are attn's kernel's (``blocking.QUERY_BLOCK`` queries,
``blocking.KEY_BLOCK`` keys): powers of two, so their edges are also edges of
every smaller power-of-two block that starts at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli.core.blocking import KEY_BLOCK, QUERY_BLOCK
from attncli.core.positions import band
from attncli.errors import UsageError

SEED_LIMIT = 2**32  # seeds are whole numbers below this


@dataclass(frozen=True)
class Sample:
    """The rows one sampled check takes, the same for every (batch, head)."""

    rows: np.ndarray  # [K] row numbers, increasing
    edges: int  # how many of them are block edges and band rows (the rest are random)
    seed: int  # the seed the random rows were drawn with


def edge_rows(
    n_q: int, n_k: int, causal: str | None, window: tuple[int, int] | None, query_block: int, key_block: int
) -> np.ndarray:
    """[E] the rows every sampled check takes: the first and last row of each query
    block, and each row whose band (lo ≤ j − i ≤ hi) has an edge at the last key of
    a key block or the first of the next (0 and n_k included). Increasing."""
    starts = np.arange(0, n_q, query_block)
    rows = [starts, np.minimum(starts + query_block, n_q) - 1]
    key_edges = np.unique(np.append(np.arange(0, n_k, key_block), n_k))  # keys where a block starts (n_k: none)
    for bound in band(n_q, n_k, causal, window):
        if bound is not None:  # row i's edge key is i + bound: at e − 1 or e for a block edge e
            rows += [key_edges - 1 - bound, key_edges - bound]
    every = np.unique(np.concatenate(rows))
    return every[(every >= 0) & (every < n_q)]


def sample_rows(
    n_q: int,
    n_k: int,
    count: int,
    causal: str | None,
    window: tuple[int, int] | None,
    seed: int | None = None,
    query_block: int = QUERY_BLOCK,
    key_block: int = KEY_BLOCK,
) -> Sample:
    """``count`` rows of ``n_q``: every edge row (``edge_rows``), the rest drawn at
    random (with ``seed``, or a new one). Every row when ``count`` ≥ n_q."""
    if seed is None:
        entropy = np.random.SeedSequence().entropy
        seed = int(entropy if isinstance(entropy, int) else 0) % SEED_LIMIT
    if count >= n_q:
        return Sample(np.arange(n_q), n_q, seed)
    edges = edge_rows(n_q, n_k, causal, window, query_block, key_block)
    if len(edges) > count:
        raise UsageError(
            f"--rows {count} is fewer than the {len(edges):,} rows every sampled check takes here: the first and "
            f"last row of each block of {query_block} queries and the rows where the causal or window band "
            f"meets a block of {key_block} keys",
            hint=f"give --rows {len(edges)} or more",
        )
    others = np.setdiff1d(np.arange(n_q), edges, assume_unique=True)
    drawn = np.random.default_rng(seed).choice(others, size=count - len(edges), replace=False)
    return Sample(np.union1d(edges, drawn), len(edges), seed)
