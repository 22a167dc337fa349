"""Learners' guard-rails: what is worth a remark about an attention result,
found in one place for every command, said in one ``attn: note:`` line each.

- A query that may attend to no key (the mask, a bias of -inf or causal
  forbid every key): its weights and output are 0, not a softmax.
- Softmax saturated: a query puts at least 99.9 % of its weight on one key
  while its scaled scores span more than 50 (e^50 ≈ 5e21): usually inputs on
  the wrong scale, such as seed 003's colours typed as 0–255 without
  ``divide: 255``, which make #8517dc 100 % cool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.notes import note
from attncli.text import noun

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions

SATURATED_WEIGHT = 0.999  # a row's largest weight from which softmax is saturated...
SATURATED_SPAN = 50.0  # ...when its scaled scores span more than this
SHOWN = 5  # queries named in a note before the rest are counted


def check_attention(
    options: AttentionOptions,
    queries: list[str],
    n_k: int,
    steps: Any = None,
    head_count: int = 1,
    colours: bool = False,
) -> None:
    """Note queries that may attend to nothing and, given the ``Steps``,
    queries whose softmax saturates (``colours``: the rows are colours, so
    ``divide: 255`` is the likely cure)."""
    empty = empty_rows(options, len(queries), n_k)
    if len(empty):
        whose = "its weights and output are" if len(empty) == 1 else "their weights and outputs are"
        note(f"{_queries(queries, empty)} may attend to no key ({_why(options)}): {whose} 0")
    if steps is None:
        return
    rows, span = saturated_rows(steps.weights, steps.logits, steps.scaled)
    if len(rows):
        where = " in some head" if head_count > 1 else ""
        puts = "puts" if len(rows) == 1 else "put"
        example = ", e.g. divide: 255 for 0–255 colours" if colours else ""
        note(
            f"softmax saturates{where}: {_queries(queries, rows)} {puts} {100 * SATURATED_WEIGHT:g} % or more "
            f"of the weight on one key, the scaled scores spanning up to {span:,.4g} (scale the inputs down"
            f"{example}, or raise --temperature)"
        )


def empty_rows(options: AttentionOptions, n_q: int, n_k: int) -> Any:
    """The queries (row numbers) that the mask and causal leave no key, found
    without building an n_q × n_k matrix: a row is empty when the first key
    its mask allows comes after the last key causal allows."""
    import numpy as np

    last = np.full(n_q, n_k - 1)  # [n_q] the last key each query may see
    if options.causal is not None:
        last = np.minimum(np.arange(n_q) + (n_k - n_q if options.causal == "bottom-right" else 0), n_k - 1)
    first = np.zeros(n_q, dtype=np.int64)  # [n_q] the first key each query's mask allows; n_k: none
    if options.mask is not None:
        given = np.atleast_2d(options.mask)
        one = np.asarray(given.reshape(-1, *given.shape[-2:]).any(axis=0))  # [n_q or 1, n_k or 1], every head's
        mask = np.broadcast_to(one, (one.shape[0], n_k))  # [n_q or 1, n_k], a view
        first = np.broadcast_to(np.where(mask.any(axis=-1), mask.argmax(axis=-1), n_k), (n_q,))
    return np.flatnonzero(first > last)


def saturated_rows(weights: Any, logits: Any, scaled: Any) -> tuple[Any, float]:
    """(the queries whose softmax saturates in any head, the largest span of
    their scaled scores over the keys they may attend to). The scaled scores,
    not the logits: a bias the user adds is theirs to choose, the advice is
    about the inputs' scale."""
    import numpy as np

    n_q, n_k = weights.shape[-2:]
    w = weights.reshape(-1, n_q, n_k)  # [heads, n_q, n_k]
    x = np.broadcast_to(scaled, logits.shape).reshape(-1, n_q, n_k)
    finite = np.isfinite(logits.reshape(-1, n_q, n_k)) & np.isfinite(x)
    with np.errstate(invalid="ignore", over="ignore"):
        span = np.where(finite, x, -np.inf).max(axis=-1) - np.where(finite, x, np.inf).min(axis=-1)  # [heads, n_q]
    span = np.where(finite.any(axis=-1), span, 0.0)
    saturated = (w.max(axis=-1) >= SATURATED_WEIGHT) & (span > SATURATED_SPAN)  # [heads, n_q]
    rows = np.flatnonzero(saturated.any(axis=0))
    return rows, float(span[saturated].max()) if len(rows) else 0.0


def _queries(labels: list[str], rows: Any) -> str:
    """'query q2', 'queries q0, q1', 'queries q0, q1, … (12 in all)'."""
    names = [labels[i] for i in rows[:SHOWN]]
    more = f", … ({len(rows)} in all)" if len(rows) > SHOWN else ""
    return f"{noun(len(rows), 'query', 'queries')} {', '.join(names)}{more}"


def _why(options: AttentionOptions) -> str:
    causes = [
        name
        for name, given in (
            ("the mask", options.mask is not None),
            ("causal " + str(options.causal), options.causal is not None),
        )
        if given
    ]
    return f"{' and '.join(causes)} forbid{'s' if len(causes) == 1 else ''} every key"


def rows_sum(options: AttentionOptions, n_q: int, n_k: int) -> str:
    """What the rows of the weights sum to, for a heatmap's title: a row with no key to attend to sums to 0,
    and with attention sinks every row to less than 1."""
    if options.sinks is not None:
        return "each row sums to less than 1 (the sink takes the rest)"
    return (
        "each row sums to 1, or 0 where no key may be attended to"
        if len(empty_rows(options, n_q, n_k))
        else "each row sums to 1"
    )
