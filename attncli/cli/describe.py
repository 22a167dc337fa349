"""The settings in force, said the one way the core declares them
(``core.options.SAYINGS``): the words of a header, the JSON fields every
attention command writes, and explain's sentence for each; and under RoPE
scaling, the frequencies it gives (``scaled_frequencies``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from attncli.core.options import AttentionOptions, Call


def call_of(q_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> Call:
    """What saying the settings needs of Q [..., H_q, n_q, d_k] and K [..., n_k, d_k]."""
    from attncli.core.options import Call

    return Call(d_k=q_shape[-1], n_q=q_shape[-2], n_k=k_shape[-2], heads=q_shape[-3] if len(q_shape) > 2 else 1)


def settings_line(options: AttentionOptions, call: Call, allowed: np.ndarray | None = None) -> str:
    """'scale 1/√3 = 0.5774 · RoPE neox (θ 10000) · causal (top-left)', and with ``allowed``
    [..., n_q, n_k] how many of the first head's pairs are masked."""
    from attncli.core.options import said

    parts = [s.words for s in said(options, call) if s.words]
    if allowed is not None:
        first = allowed.reshape(-1, *allowed.shape[-2:])[0]  # [n_q, n_k], the first head's
        parts.append(f"{int((~first).sum())} of {first.size} pairs masked")
    return " · ".join(parts)


def attention_data(options: AttentionOptions, call: Call) -> dict[str, Any]:
    """The JSON fields every attention command writes: scale, temperature, similarity,
    causal and each variant in force."""
    from attncli.core.options import said

    return {s.field: s.data for s in said(options, call) if s.data is not None}


def sentence(options: AttentionOptions, call: Call, field: str) -> str | None:
    """The setting ``field``'s sentence in explain, or None when it is not in force."""
    from attncli.core.options import said

    return next((s.explain for s in said(options, call) if s.field == field), None)


def scaled_frequencies(options: AttentionOptions, call: Call) -> dict[str, Any] | None:
    """Under RoPE scaling, each pair's frequency as plain RoPE has it and as the scaling makes it
    (the core's own ``rope_frequencies``, for this sequence's length), and the attention factor;
    None without scaling. What explain shows, and writes in its JSON."""
    from dataclasses import replace

    from attncli.core.positions import rope_frequencies, rope_length

    rope = options.rope
    if rope is None or rope.scaling is None:
        return None
    dim = rope.dim or call.d_k
    length = rope_length(call.n_q, call.n_k, rope)
    plain, _ = rope_frequencies(replace(rope, scaling=None), dim, length)
    scaled, factor = rope_frequencies(rope, dim, length)
    return {"plain": plain, "scaled": scaled, "attention_factor": factor, "length": length}
