"""The public functions of the core: ``attention`` and its step-by-step and
blocked forms, each taking ``AttentionOptions`` or the keywords of 0.1.

    output, weights = attention(q, k, v)                                # [n_q, d_v], [n_q, n_k]
    output, weights = attention(q, k, v, AttentionOptions(causal="top-left"))
    output, _ = attention(q, k, v, causal=True, need_weights=False)    # the blocked kernel
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from attncli.core.kernel import blocked
from attncli.core.options import AttentionOptions
from attncli.core.reference import Steps, reference
from attncli.errors import UsageError

Implementation = Literal["auto", "reference", "blocked"]
IMPLEMENTATIONS: tuple[Implementation, ...] = ("auto", "reference", "blocked")


def _options(options: AttentionOptions | None, keywords: dict[str, Any]) -> AttentionOptions:
    """AttentionOptions, or the same settings given as keywords (not both)."""
    if options is not None and keywords:
        raise UsageError(f"give AttentionOptions or keywords ({', '.join(keywords)}), not both")
    return options if options is not None else AttentionOptions.from_keywords(**keywords)


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    options: AttentionOptions | None = None,
    *,
    need_weights: bool = True,
    implementation: Implementation = "auto",
    **keywords: Any,
) -> tuple[np.ndarray, np.ndarray | None]:
    """softmax(QKᵀ/√d_k)V -> (output, weights); weights None if not needed.

    [n_q, d_k], [n_k, d_k], [n_k, d_v] -> [n_q, d_v], [n_q, n_k]; leading
    batch axes [..., n, d] broadcast. As in seed 000, a single query [d_k]
    gives [d_v] and [n_k] weights, and scalar values [n_k] give one number
    per query. Settings come as ``AttentionOptions`` or as its keywords
    (``scale``, ``temperature``, ``similarity``, ``causal`` = True or an
    alignment, ``mask`` boolean/0-1 or additive, ``bias``, and the variants:
    ``softcap``, ``window``, ``alibi``, ``alibi_slopes``, ``sinks``, and
    ``rope``, a style name or a ``Rope``, which may carry a ``RopeScaling``:
    ``rope=Rope("neox", theta=500000, scaling=RopeScaling("llama3", factor=8,
    original_max_position_embeddings=8192, low_freq_factor=1, high_freq_factor=4))``).

    ``implementation``: "reference" (``reference``, every step held whole),
    "blocked" (the kernel: the weights are never held whole, every core is
    used; then no weights are returned) or "auto": the reference when the
    weights are needed, else the kernel.
    """
    if implementation not in IMPLEMENTATIONS:
        raise UsageError(f"unknown implementation {implementation!r}", hint="use auto, reference or blocked")
    options = _options(options, keywords)
    q, v = np.asarray(q), np.asarray(v)
    one_query, scalar_values = q.ndim == 1, v.ndim == 1
    q2, v2 = (q[None] if one_query else q), (v[:, None] if scalar_values else v)
    weights: np.ndarray | None
    if implementation == "reference" or (implementation == "auto" and need_weights):
        steps = reference(q2, k, v2, options)
        output, weights = steps.output, steps.weights if need_weights else None
    else:
        output, weights = blocked(q2, k, v2, options), None
    if scalar_values:
        output = output[..., 0]
    if one_query:
        output = output[0]
        weights = None if weights is None else weights[0]
    return output, weights


def attention_steps(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, options: AttentionOptions | None = None, **keywords: Any
) -> Steps:
    """Every step of attention (``reference``): scores, logits, weights, output."""
    return reference(q, k, v, _options(options, keywords))


def attention_blocked(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    options: AttentionOptions | None = None,
    *,
    query_block: int | None = None,
    key_block: int | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    **keywords: Any,
) -> np.ndarray:
    """The output alone, from the blocked kernel (see ``kernel.blocked``)."""
    return blocked(
        q,
        k,
        v,
        _options(options, keywords),
        query_block=query_block,
        key_block=key_block,
        workers=workers,
        progress=progress,
    )
