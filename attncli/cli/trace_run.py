"""What ``attn trace`` runs: the command line's choices (``TraceRequest``) turned
into a model run, an encoder's whole trace cut to the selection or a decoder's
``decode``/``generate`` keeping only the selection, and the result gathered as
one ``Traced`` for the views and JSON (``trace_result.py``).

A decoder never holds weights that will not be shown: ``--query`` is found in
the prompt's tokens before the pass, so only its row is kept; ``--summary``
keeps no weights at all, only the head summaries summed as the pass goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attncli.errors import AttnError, UsageError
from attncli.text import clip, parse_index

if TYPE_CHECKING:
    import numpy as np

    from attncli.models import HeadSteps, HeadSummaries, LayerAttention, Model, Prediction
    from attncli.models.lens import LensReading

LENS_TOP = 3  # the likeliest tokens --lens keeps per layer and position (JSON); the table shows the first


@dataclass(frozen=True)
class TraceRequest:
    """What the command line asks of a trace."""

    layers: tuple[int, ...] = ()  # () for every layer; negative from the end
    heads: tuple[int, ...] = ()
    query: str | None = None  # a word of the text or a position
    hide_special: bool = False
    top_next: int | None = None  # None: the default (decoders); 0: no prediction
    generate: int = 0
    summary: bool = False
    lens: bool = False  # the logit lens: each layer's likeliest next tokens, no weights
    aggregate: str | None = None  # "mean", "max" or "rollout"
    explain: bool = False  # --query's steps through the one --layer and --head

    def check(self, fmt: str | None) -> None:
        """Options that do not fit together (``fmt``: the --format given), refused before the model is read."""
        if self.explain:
            from attncli.cli.trace_explained import check_explain

            check_explain(self)
        if self.summary:
            if self.query is not None or self.aggregate is not None:
                other = "--query" if self.query is not None else "--aggregate"
                raise UsageError(
                    f"--summary summarises every query of every head; {other} shows weights", hint="give one of them"
                )
            if fmt not in (None, "table", "json"):
                raise UsageError(f"--summary is a table: {fmt} writes weights", hint="use json, or leave out --summary")
        if self.lens:
            shows = [name for name, given in self._weight_options() if given]
            if shows:
                raise UsageError(f"--lens is a view of its own, and so is {shows[0]}", hint="give one of them")
            if self.heads:
                raise UsageError("--lens reads whole layers, not heads", hint="leave out --head; --layer picks rows")
            if fmt not in (None, "table", "json"):
                raise UsageError(f"--lens is a table: {fmt} writes weights", hint="use json, or leave out --lens")
        one_head = len(self.heads) == 1 or self.aggregate is not None
        if fmt in ("csv", "tsv") and not (len(self.layers) == 1 and one_head):
            what = "one --layer" if self.aggregate is not None else "one --layer and one --head"
            raise UsageError(f"{fmt} writes one matrix", hint=f"pick {what}, or use json or npy")

    def _weight_options(self) -> list[tuple[str, bool]]:
        return [
            ("--summary", self.summary),
            ("--query", self.query is not None),
            ("--aggregate", self.aggregate is not None),
            ("--explain", self.explain),
        ]

    @property
    def explicit(self) -> bool:
        """Were layers or heads chosen (full heatmaps rather than the overview)?"""
        return bool(self.layers or self.heads)


@dataclass
class Traced:
    """A trace cut to what is shown: tokens, the selection's weights, where each
    query may attend, head summaries, next-token predictions."""

    model: Model
    tokens: list[str]  # every token of the run as text (a decoder's " it"; an encoder's WordPieces)
    special: list[bool]
    keys: list[int]  # the positions shown (every one, or those not special with --hide-special)
    layers: list[int]
    heads: list[int]
    rows: list[int]  # the query positions shown: keys, or --query's one
    query: int | None
    weights: np.ndarray  # [len(layers), len(heads) or 1, len(rows), len(keys)] float32; 0 where forbidden
    allowed: np.ndarray | None  # [len(layers), len(rows), len(keys)] bool; None: every pair allowed
    summaries: HeadSummaries | None = None  # every layer and head of the model (cut when shown)
    others: np.ndarray | None = None  # [len(layers), len(heads), len(keys)] with --query: the others' mean
    next: list[Prediction] = field(default_factory=list)  # at the last position, then at --query's
    prompt_length: int = 0  # tokens of the text; those after it were generated
    aggregate: str | None = None
    attention: tuple[LayerAttention, ...] = ()  # a decoder's layers' options and where they came from
    ids: list[int] = field(default_factory=list)  # the token ids of the run
    explained: HeadSteps | None = None  # --explain: the query through the one layer and head
    lens: LensReading | None = None  # --lens: every layer's likeliest next tokens at every position

    @property
    def decoder(self) -> bool:
        return self.model.family.decoder is not None

    @property
    def generated(self) -> list[int]:
        """The positions of the generated tokens."""
        return list(range(self.prompt_length, len(self.tokens)))

    def shown(self, positions: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in positions]


def run_trace(model: Model, text: str, request: TraceRequest) -> Traced:
    """The model on the text, as the request asks."""
    traced = _run(model, text, request)
    if request.explain:
        from attncli.models import explain_head

        assert traced.query is not None  # check_explain: --explain has a --query, one --layer and one --head
        traced.explained = explain_head(model, traced.ids, traced.layers[0], traced.heads[0], traced.query)
    return traced


def _run(model: Model, text: str, request: TraceRequest) -> Traced:
    from attncli.models.families import decoder_names

    top_next = request.top_next
    if model.family.decoder is None:
        if request.generate:
            raise UsageError(
                f"--generate: {model.family.name} is an encoder, which predicts no next token",
                hint=f"generate with a decoder: {decoder_names()}",
            )
        for flag, given in (("--top-next", top_next), ("--lens", request.lens)):
            if given:
                raise UsageError(
                    f"{flag}: {model.family.name} is an encoder, which predicts no next token",
                    hint=f"predict with a decoder: {decoder_names()}",
                )
        return _encoder(model, text, request)
    return _decoder(model, text, request)


# --- choosing ---------------------------------------------------------------------


def pick(option: str, chosen: Sequence[int], n: int, what: str) -> list[int]:
    """Indices from the command line (negative counts from the end), checked, in
    the order given without repeats; all of them when none were given."""
    if not chosen:
        return list(range(n))
    picked: list[int] = []
    for i in chosen:
        if not -n <= i < n:
            raise UsageError(f"{option} {i} is out of range: the model has {n} {what} (0 to {n - 1})")
        if i % n not in picked:
            picked.append(i % n)
    return picked


def find_word(tokens: Sequence[str], shown: Sequence[int], word: str, pieces: Sequence[str]) -> int | None:
    """The position of ``word`` among the shown tokens: a token equal to it, else one
    equal to it without case or surrounding spaces (a decoder's " it" for "it"),
    else the first of the ``pieces`` the tokenizer splits it into ('Elephants'
    finds 'elephant'); None when none is."""

    def bare(token: str) -> str:
        return token.strip().lower()

    for matches in (
        lambda token: token == word,
        lambda token: bare(token) == bare(word) and bool(bare(word)),
        lambda token: any(token == p or bare(token) == bare(p) for p in pieces if bare(p)),
    ):
        for i in shown:
            if matches(tokens[i]):
                return i
    return None


def position_of(word: str, n: int, shown: Sequence[int]) -> int | None:
    """``word`` read as a position among n tokens (negative from the end), if it is a shown one."""
    position = parse_index(word)
    if position is not None and -n <= position < n and position % n in shown:
        return position % n
    return None


def no_such_query(tokens: Sequence[str], shown: Sequence[int], word: str) -> UsageError:
    listed = " ".join(_quoted(tokens[i]) for i in shown[:24]) + (" …" if len(shown) > 24 else "")
    return UsageError(f"--query {clip(word)!r} is not a token of the text", hint=f"its tokens: {listed}")


def _quoted(token: str) -> str:
    """A token as the error's list shows it: quoted when spaces start or end it (" it")."""
    return repr(token) if token != token.strip() or not token else token


def _first_pieces(model: Model, word: str, spell: Callable[[int], str]) -> list[str]:
    """The first token of ``word`` as the tokenizer splits it, alone and after a space."""
    out = []
    for text in (word, " " + word.strip()):
        ids = model.tokenizer.encode(text, add_special_tokens=False).ids
        if ids:
            out.append(spell(ids[0]))
    return out


# --- an encoder: the whole trace, cut ----------------------------------------------


def _encoder(model: Model, text: str, request: TraceRequest) -> Traced:
    import numpy as np

    from attncli.models import trace
    from attncli.models.decoder import summarise

    t = trace(model, text)
    config = model.config
    layers = pick("--layer", request.layers, config.n_layer, "layers")
    heads = pick("--head", request.heads, config.n_head, "heads")
    keys = [i for i, special in enumerate(t.special) if not (request.hide_special and special)]
    q = None
    if request.query is not None:
        pieces = _first_pieces(model, request.query, model.tokenizer.id_to_token)
        q = find_word(t.tokens, keys, request.query, pieces)
        q = position_of(request.query, len(t.tokens), keys) if q is None else q
        if q is None:
            raise no_such_query(t.tokens, keys, request.query)
    rows = keys if q is None else [q]
    full = t.weights  # [n_layer, n_head, n, n]
    traced = Traced(
        model=model,
        tokens=t.tokens,
        special=t.special,
        keys=keys,
        layers=layers,
        heads=heads,
        rows=rows,
        query=q,
        weights=np.zeros((0, 0, 0, 0), dtype=np.float32),
        allowed=None,
        summaries=summarise(full) if request.summary else None,
        prompt_length=len(t.tokens),
        aggregate=request.aggregate,
        ids=t.ids,
    )
    if request.summary:
        return traced
    if request.aggregate == "rollout":
        from attncli.models.aggregates import rollout

        flow = rollout(full[: max(layers) + 1][:, heads])  # [L, n, n], every head chosen averaged
        traced.weights = flow[np.ix_(layers, rows, keys)][:, None].astype(np.float32)
        return traced
    traced.weights = full[np.ix_(layers, heads, rows, keys)]
    if q is not None:
        n = len(t.tokens)  # every other token of the text sees every key
        own = full[np.ix_(layers, heads, [q], keys)][:, :, 0]  # [L, H, keys]
        traced.others = (
            (full[np.ix_(layers, heads, range(n), keys)].sum(axis=2, dtype=np.float64) - own) / max(n - 1, 1)
        ).astype(np.float32)
    _aggregate_heads(traced)
    return traced


def _aggregate_heads(traced: Traced) -> None:
    if traced.aggregate in ("mean", "max"):
        from attncli.models.aggregates import over_heads

        traced.weights = over_heads(traced.weights, traced.aggregate)[:, None]
        traced.others = None


# --- a decoder: only the selection kept ---------------------------------------------


def _decoder(model: Model, text: str, request: TraceRequest) -> Traced:
    from attncli.models import Selection, decode, generate
    from attncli.models.decoding import TOP_NEXT, encode, predictions

    config = model.config
    layers = pick("--layer", request.layers, config.n_layer, "layers")
    heads = pick("--head", request.heads, config.n_head, "heads")
    ids, _, special = encode(model, text, more=request.generate)  # the length checked before any pass

    def spell(i: int) -> str:
        return str(model.tokenizer.decode([i], skip_special_tokens=False))

    prompt = [spell(i) for i in ids]
    q: int | None = None  # found in the prompt before the pass, so that only its row is kept
    if request.query is not None:
        shown = [i for i, s in enumerate(special) if not (request.hide_special and s)]
        q = find_word(prompt, shown, request.query, _first_pieces(model, request.query, spell))
        longest = len(ids) + request.generate
        position = parse_index(request.query)
        if q is None and position is not None and -longest <= position < longest:
            q = position  # from the end of the generated text too: checked after the pass
        if q is None and not request.generate:
            raise no_such_query(prompt, shown, request.query)
    late = request.query is not None and q is None  # a word of the generated tokens: every row kept, found after
    if request.summary:
        selection = Selection(layers=(), heads=(), queries=(), summaries=True)
    elif request.lens:
        selection = Selection.nothing()
    elif request.aggregate == "rollout":
        selection = Selection(layers=tuple(range(max(layers) + 1)), heads=tuple(heads))
    else:
        queries = None if q is None else (q,)
        selection = Selection(layers=tuple(layers), heads=tuple(heads), queries=queries, columns=q is not None or late)
    try:
        lens = LENS_TOP if request.lens else 0
        if request.generate:
            d = generate(model, text, request.generate, selection, top_next=0, lens=lens)
        else:
            d = decode(model, text, selection, top_next=0, lens=lens)
    except AttnError as e:
        if e.message.startswith("keeping the weights of"):  # decode's refusal: say which options choose less
            raise AttnError(
                e.message, hint="show fewer with --layer L, --head H or --query WORD, or use --summary"
            ) from None
        raise
    n = len(d.ids)
    keys = [i for i, s in enumerate(d.special) if not (request.hide_special and s)]
    if late:
        assert request.query is not None
        q = find_word(d.tokens, keys, request.query, _first_pieces(model, request.query, spell))
        if q is None:
            raise no_such_query(d.tokens, keys, request.query)
    elif q is not None:
        if not -n <= q < n or q % n not in keys:
            raise no_such_query(d.tokens, keys, request.query or "")
        q %= n
    rows = keys if q is None else [q]
    k = TOP_NEXT if request.top_next is None else request.top_next
    traced = Traced(
        model=model,
        tokens=d.tokens,
        special=d.special,
        keys=keys,
        layers=layers,
        heads=heads,
        rows=rows,
        query=q,
        weights=d.weights,
        allowed=None,
        summaries=d.summaries,
        next=predictions(model, d, [n - 1] + ([q] if q is not None else []), k) if k else [],
        prompt_length=d.prompt_length,
        aggregate=request.aggregate,
        attention=d.attention,
        ids=d.ids,
        lens=d.lens,
    )
    if request.summary or request.lens:
        return traced
    if request.aggregate == "rollout":
        _decoder_rollout(traced, d.weights, d.allowed)
        return traced
    import numpy as np

    at = [d.queries.index(r) for r in rows]  # rows among those kept
    traced.weights = d.weights[np.ix_(range(len(layers)), range(len(heads)), at, keys)]
    traced.allowed = d.allowed[np.ix_(range(len(layers)), at, keys)]
    if q is not None and d.columns is not None:
        traced.others = _others(d.columns, d.weights[:, :, at[0]], q, n, [d.attention[i] for i in layers], keys)
    _aggregate_heads(traced)
    return traced


def _others(
    columns: np.ndarray, own: np.ndarray, q: int, n: int, attention: list[LayerAttention], keys: list[int]
) -> np.ndarray:
    """The mean weight each key gets from the queries other than ``q`` that may attend to it:
    columns [L, H, n] summed over every query, own [L, H, n] the query's row -> [L, H, len(keys)],
    NaN where no other query may see the key."""
    import numpy as np

    from attncli.core.positions import band_allowed

    out = np.empty(columns.shape)
    for a, la in enumerate(attention):
        seen = band_allowed(range(n), range(n), n, n, la.options.causal, la.options.window)  # [n, n]
        count = seen.sum(axis=0) - seen[q]  # [n]: the other queries that may see each key
        with np.errstate(invalid="ignore", divide="ignore"):
            out[a] = np.where(count > 0, (columns[a] - own[a]) / np.maximum(count, 1), np.nan)
    return out[..., keys].astype(np.float32)


def _decoder_rollout(traced: Traced, weights: np.ndarray, allowed: np.ndarray) -> None:
    """Rollout of layers 0 .. max(shown) (every query kept), cut to the rows and keys shown."""
    import numpy as np

    from attncli.models.aggregates import rollout, rollout_reach

    flow = rollout(weights)  # [L, n, n]
    reach = rollout_reach(allowed)
    layers, rows, keys = traced.layers, traced.rows, traced.keys
    traced.weights = flow[np.ix_(layers, rows, keys)][:, None].astype(np.float32)
    traced.allowed = reach[np.ix_(layers, rows, keys)]
