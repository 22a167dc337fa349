"""A decoder on a text: its tokens, the attention weights of a selection, the
next-token prediction, and greedy generation.

    model = load_model("SmolLM2-135M-Instruct.Q4_1.gguf")      # or a Hugging Face folder
    d = decode(model, "The pink elephant tried to get into the car but it was too")
    d.tokens                 # ['The', ' pink', ' elephant', …]
    d.weights                # [layers, heads, queries, n]: every layer and head by default
    d.next[0].tokens         # the 5 likeliest next tokens: [' big', ' heavy', …]
    d = decode(model, text, Selection(layers=(3,), queries=(-1,), summaries=True))
    g = generate(model, "The pink elephant", 20)                 # greedy: g.generated, g.tokens

Every head goes through attn's own ``attention`` with the options its
family's conventions derive for its layer (``d.attention[i].options``), so a
trace and ``attn run`` with those options agree by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.positions import band_allowed
from attncli.errors import AttnError, UsageError
from attncli.models.base import DecoderSteps
from attncli.models.conventions import LayerAttention
from attncli.models.decoder import Cache, HeadSummaries, Kept, Selection, run
from attncli.models.families import decoder_names
from attncli.models.lens import Lens, LensReading
from attncli.models.loading import Model

TOP_NEXT = 5  # next-token candidates shown by default
EVERYTHING = Selection()  # every layer, head and query


@dataclass(frozen=True)
class Prediction:
    """The likeliest next tokens after one position, with their probabilities."""

    position: int  # the token whose next one is predicted
    ids: list[int]
    tokens: list[str]  # as text (" big")
    probabilities: list[float]  # softmax of the logits, largest first


@dataclass
class Decoded:
    """A text through a decoder: tokens, the selection's weights, summaries, predictions."""

    tokens: list[str]  # each token as text: " pink" (the beginning-of-sequence token too, when added)
    pieces: list[str]  # the tokenizer's own pieces: "Ġpink"
    ids: list[int]
    special: list[bool]  # True for the beginning-of-sequence token and the like
    prompt_length: int  # tokens of the text; those after it were generated
    layers: list[int]  # the selection, resolved: layers, heads, query positions
    heads: list[int]
    queries: list[int]
    weights: np.ndarray  # [len(layers), len(heads), len(queries), n] float32; 0 where a query may not attend
    allowed: np.ndarray  # [len(layers), len(queries), n] bool: where each query may attend (causal, window)
    summaries: HeadSummaries | None  # every layer and head, when asked
    columns: (
        np.ndarray | None
    )  # [len(layers), len(heads), n] float64, when asked: each key's weights summed over every query
    next: list[Prediction]  # at the positions asked (the last by default)
    hidden: np.ndarray  # [n, d_model] the final hidden states (after the final norm)
    attention: tuple[LayerAttention, ...]  # every layer's options and where each came from
    lens: LensReading | None = None  # the logit lens, when asked: each layer's top next tokens at each position

    @property
    def generated(self) -> list[int]:
        """The ids of the generated tokens (after the prompt)."""
        return self.ids[self.prompt_length :]


def _steps(model: Model) -> DecoderSteps[Any, Any]:
    if model.family.decoder is None:
        raise UsageError(
            f"{model.family.name} is an encoder: it predicts no next token and generates nothing",
            hint=f"decoders: {decoder_names()}",
        )
    return model.family.decoder


def encode(model: Model, text: str, more: int = 0) -> tuple[list[int], list[str], list[bool]]:
    """The text's token ids, pieces and special flags (the tokenizer's special tokens
    added, such as a beginning-of-sequence token), checked against the model's length."""
    enc = model.tokenizer.encode(text)
    ids = list(enc.ids)
    if not ids:
        raise AttnError("the text gives no tokens", hint="give some text")
    limit = model.config.n_positions
    if len(ids) + more > limit:
        asked = f" and {more} more to generate" if more else ""
        raise AttnError(
            f"the text is {len(ids)} tokens{asked} but the model takes at most {limit}",
            hint="shorten it" + (" or generate fewer" if more else ""),
        )
    if max(ids) >= model.config.n_vocab:
        raise AttnError(
            f"the tokenizer gives id {max(ids)} but the model has {model.config.n_vocab} embeddings",
            source=str(model.path),
        )
    return ids, list(enc.tokens), [bool(s) for s in enc.special_tokens_mask]


def decode(
    model: Model,
    text: str,
    selection: Selection = EVERYTHING,
    *,
    top_next: int = TOP_NEXT,
    predict: Sequence[int] = (-1,),
    lens: int = 0,
) -> Decoded:
    """Run a text through a decoder, keeping the selection's weights (every layer,
    head and query by default; refused with the memory it needs when too big) and
    the ``top_next`` likeliest next tokens after each position in ``predict``;
    ``lens``: the logit lens's likeliest tokens (that many) after every position
    of every layer."""
    steps = _steps(model)
    ids, pieces, special = encode(model, text)
    return _traced(model, steps, ids, pieces, special, len(ids), selection, top_next, predict, lens)


def generate(
    model: Model,
    text: str,
    n: int,
    selection: Selection = EVERYTHING,
    *,
    top_next: int = TOP_NEXT,
    stop_at_eos: bool = True,
    lens: int = 0,
) -> Decoded:
    """Greedy generation: append the likeliest next token n times (one token a pass,
    with a KV cache; stopping after an end-of-sequence token), then trace prompt and
    generated tokens together. Causal attention makes each generated token's row the
    one it had when the model read it to predict the token after it."""
    steps = _steps(model)
    if n < 0:
        raise UsageError(f"cannot generate {n} tokens", hint="give a number ≥ 0")
    ids, pieces, special = encode(model, text, more=n)
    config, params = model.config, model.params
    cache = Cache(config.n_layer, len(ids) + n)
    new: list[int] = []
    if n:
        p = run(steps, params, config, np.asarray(ids), cache=cache, predict=[-1])
        while True:
            token = int(np.argmax(p.logits[-1]))
            new.append(token)
            if len(new) == n or (stop_at_eos and token in model.eos):
                break
            p = run(steps, params, config, np.asarray([token]), cache=cache, predict=[-1])
    specials = _special_ids(model)
    return _traced(
        model,
        steps,
        ids + new,
        pieces + [model.tokenizer.id_to_token(i) for i in new],
        special + [i in specials for i in new],
        len(ids),
        selection,
        top_next,
        (-1,),
        lens,
    )


def _traced(
    model: Model,
    steps: DecoderSteps[Any, Any],
    ids: list[int],
    pieces: list[str],
    special: list[bool],
    prompt_length: int,
    selection: Selection,
    top_next: int,
    predict: Sequence[int],
    lens_top: int = 0,
) -> Decoded:
    config = model.config
    n = len(ids)
    positions = [_position(p, n) for p in predict]
    kept = Kept.plan(selection, config.n_layer, config.n_head, n)
    lens = Lens(config.n_layer, n, lens_top) if lens_top > 0 else None
    p = run(steps, model.params, config, np.asarray(ids), kept=kept, predict=positions, lens=lens)
    attention: tuple[LayerAttention, ...] = tuple(config.attention)  # type: ignore[attr-defined]  # a decoder's
    allowed = (
        np.stack(
            [
                band_allowed(
                    range(n), range(n), n, n, attention[layer].options.causal, attention[layer].options.window
                )[kept.queries]
                for layer in kept.layers
            ]
        )
        if kept.layers
        else np.zeros((0, len(kept.queries), n), dtype=bool)
    )
    tokens = [model.tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    return Decoded(
        tokens=tokens,
        pieces=pieces,
        ids=ids,
        special=special,
        prompt_length=prompt_length,
        layers=kept.layers,
        heads=kept.heads,
        queries=kept.queries,
        weights=kept.weights,
        allowed=allowed,
        summaries=kept.summaries,
        columns=kept.columns,
        next=[_prediction(model, position, row, top_next) for position, row in zip(positions, p.logits, strict=True)],
        hidden=p.hidden,
        attention=attention,
        lens=None if lens is None else lens.reading,
    )


def predictions(model: Model, decoded: Decoded, positions: Sequence[int], top_next: int = TOP_NEXT) -> list[Prediction]:
    """The ``top_next`` likeliest next tokens after more positions of a decoded text,
    from its final hidden states (the output head alone: no second pass)."""
    steps = _steps(model)
    n = len(decoded.ids)
    at = [_position(p, n) for p in positions]
    logits = steps.logits(model.params, model.config, decoded.hidden[at]) if at else np.zeros((0, 0))
    return [_prediction(model, position, row, top_next) for position, row in zip(at, logits, strict=True)]


def _position(position: int, n: int) -> int:
    if not -n <= position < n:
        raise UsageError(f"position {position} is out of range: the text has {n} tokens (0 to {n - 1})")
    return position % n


def _prediction(model: Model, position: int, logits: np.ndarray, k: int) -> Prediction:
    """The k likeliest next tokens: softmax of the logits (in float64), largest first."""
    z = logits.astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    k = min(max(k, 0), len(p))
    top = np.argpartition(-p, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
    top = top[np.lexsort((top, -p[top]))]  # by probability, then id
    return Prediction(
        position,
        [int(i) for i in top],
        [model.tokenizer.decode([int(i)], skip_special_tokens=False) for i in top],
        [float(p[i]) for i in top],
    )


def _special_ids(model: Model) -> set[int]:
    """The tokenizer's special tokens' ids (beginning and end of sequence, chat markers)."""
    added = getattr(model.tokenizer, "get_added_tokens_decoder", None)
    if added is None:  # pragma: no cover - tokenizers < 0.14
        return set(model.eos)
    return {i for i, token in added().items() if token.special} | set(model.eos)
