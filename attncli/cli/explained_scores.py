"""The scores step of explain: what a score is, the query's first one written out,
each key's score with the products that made it high or low (which features:
bertviz's neuron view), and seed 000's footnote when length rather than
direction decides. ``explained.attention_sections`` places them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.written import TERMS, columns, factor, terms

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.explained import Page


def score_sentences(page: Page) -> list[str]:
    """What a score is, and the first one written out for the query (of the rotated
    Q and K with RoPE), in the tables' number format."""
    import math

    from attncli.output.blocks import fmt

    inputs, i, precision = page.inputs, page.i, page.precision
    rotated = page.steps.rotated
    q, k = (inputs.q.values[i], inputs.k.values[0]) if rotated is None else (rotated[0][i], rotated[1][0])
    products = [f"{factor(a, precision)} × {factor(b, precision)}" for a, b in zip(q.tolist(), k.tolist(), strict=True)]
    dot = f"{inputs.queries[i]} · {inputs.keys[0]} = {terms(products)} = {fmt(float(q @ k), precision)}"
    if inputs.options.similarity == "cosine":
        lengths = math.sqrt(float(q @ q)) * math.sqrt(float(k @ k))
        cosine = float(q @ k) / lengths if lengths else 0.0
        return [
            "A score is the cosine similarity of a query and a key: their dot product divided by both "
            "lengths, from −1 (opposite directions) to 1 (the same direction).",
            dot,
            f"cos({inputs.queries[i]}, {inputs.keys[0]}) = {fmt(float(q @ k), precision)} / "
            f"({fmt(math.sqrt(float(q @ q)), precision)} × {fmt(math.sqrt(float(k @ k)), precision)}) "
            f"= {fmt(cosine, precision)}",
        ]
    return [
        "A score is the dot product of a query and a key: multiply them number by number and add up. "
        "The more alike they are, the bigger the score.",
        dot,
        *magnitude_sentences(page),
    ]


def query_and_keys(page: Page) -> tuple[np.ndarray, np.ndarray]:
    """The query's row and K as they meet in the scores (rotated by RoPE when it is on)."""
    import numpy as np

    rotated = page.steps.rotated
    q, k = (page.inputs.q.values[page.i], page.inputs.k.values) if rotated is None else (rotated[0][page.i], rotated[1])
    return np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)  # bfloat16 as read: numpy cannot sum it


def allowed_keys(page: Page) -> list[int]:
    """The keys the query may attend to."""
    allowed = page.steps.allowed
    n_k = page.steps.weights.shape[-1]
    return [j for j in range(n_k) if allowed is None or allowed[page.i, j]]


def magnitude_sentences(page: Page) -> list[str]:
    """Seed 000's footnote, when it bites: the key with the biggest dot product is not
    the one pointing most nearly the query's way, because length counts as well as direction."""
    import numpy as np

    from attncli.output.blocks import fmt

    q, k = query_and_keys(page)
    keys = allowed_keys(page)
    lengths = np.sqrt(np.einsum("ij,ij->i", k, k))  # [n_k]
    q_length = float(np.sqrt(q @ q))
    if len(keys) < 2 or q_length == 0 or not lengths[keys].all():
        return []
    dots = k[keys] @ q  # [n_keys]
    cosines = dots / (lengths[keys] * q_length)
    by_dot, by_cos = keys[int(np.argmax(dots))], keys[int(np.argmax(cosines))]
    if by_dot == by_cos or dots.max() == dots[keys.index(by_cos)]:
        return []
    p, names, query = page.precision, page.inputs.keys, page.inputs.queries[page.i]
    return [
        f"Here length, not direction, decides: {names[by_dot]} has the biggest score with {query} "
        f"({fmt(float(dots.max()), p)}, length {fmt(float(lengths[by_dot]), p)}), but {names[by_cos]} points most "
        f"nearly the same way (cosine {fmt(float(cosines.max()), p)} against "
        f"{fmt(float(cosines[keys.index(by_dot)]), p)}, length {fmt(float(lengths[by_cos]), p)}). The dot product "
        "rewards long vectors as well as alike ones (seed 000's footnote); --similarity cosine compares "
        "directions only."
    ]


TOP_TERMS = 3  # the products named for each key's score
SCORE_LINES = 16  # keys whose scores are written out before only the highest are


def score_terms(page: Page) -> list[Any]:
    """Each key's score for the query, with the products that add the most to it:
    which features made the score high (or low)."""
    import numpy as np
    from rich.text import Text

    from attncli.output.blocks import fmt

    if page.inputs.options.similarity == "cosine":
        return []
    q, k = query_and_keys(page)
    p, query = page.precision, page.inputs.queries[page.i]
    names = page.inputs.q.col_labels or page.inputs.k.col_labels or columns(q.shape[-1])
    if len(names) != q.shape[-1]:
        names = columns(q.shape[-1])
    keys = list(range(k.shape[0]))
    seen = allowed_keys(page)
    dots = k @ q  # [n_k]
    shown = keys if len(keys) <= SCORE_LINES else sorted(seen, key=lambda j: -dots[j])[:TERMS]
    lines = []
    for j in shown:
        products = q * k[j]  # [d_k], the terms of q·k_j
        top = np.argsort(-np.abs(products), kind="stable")[:TOP_TERMS]
        named = ", ".join(
            f"{names[d]} {factor(float(q[d]), p)} × {factor(float(k[j, d]), p)} = {fmt(float(products[d]) + 0.0, p)}"
            for d in top
        )
        masked = "" if page.steps.allowed is None or page.steps.allowed[page.i, j] else " (masked)"
        lines.append(f"{query} · {page.inputs.keys[j]} = {fmt(float(dots[j]), p)}{masked}: {named}")
    more = len(keys) - len(shown)
    biggest = f"its {TOP_TERMS} biggest terms" if q.shape[-1] > TOP_TERMS else "its terms, biggest first"
    intro = f"Each key's score for {query}, with {biggest} (the features that made it high or low)"
    among = f"{len(keys)} keys" if len(seen) == len(keys) else f"the {len(seen)} keys {query} may see"
    intro += f"; the {len(shown)} highest of {among}:" if more else ":"
    return [Text("\n".join([intro, *lines, *apart(page, q, k, names)]))]


def apart(page: Page, q: np.ndarray, k: np.ndarray, names: list[str]) -> list[str]:
    """What sets the heaviest key apart: softmax is unchanged when every score moves by the same
    amount, so what counts is how far a score is from the others'. Its gap from the mean of the
    keys the query may see, split by feature: q_d · (k_d − mean k_d), the largest named."""
    import numpy as np

    from attncli.output.blocks import fmt

    keys = allowed_keys(page)
    if len(keys) < 3:
        return []
    top = keys[int(np.argmax(page.steps.weights[page.i, keys]))]
    dots = k[keys] @ q  # [n_keys]
    gap = float(k[top] @ q) - float(dots.mean())
    parts = q * (k[top] - k[keys].mean(axis=0))  # [d_k], summing to the gap
    biggest = np.argsort(-np.abs(parts), kind="stable")[:TOP_TERMS]
    p, query, key = page.precision, page.inputs.queries[page.i], page.inputs.keys[top]
    named = ", ".join(f"{names[d]} {'+' if parts[d] >= 0 else ''}{fmt(float(parts[d]), p)}" for d in biggest)
    return [
        f"Softmax weighs only how scores differ: {key}, the heaviest key, scores {fmt(gap, p)} "
        f"{'above' if gap >= 0 else 'below'} the mean of the {len(keys)} keys {query} may see "
        f"({fmt(float(dots.mean()), p)}); the features that set it apart, q_d × (k_d − the keys' mean k_d): "
        f"{named}."
    ]
