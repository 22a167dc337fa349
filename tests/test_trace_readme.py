"""Every number README.md and docs/trace.md quote from the real models, run again:
SmolLM2-135M-Instruct's GGUF ($ATTN_TEST_GGUF) and all-MiniLM-L6-v2 ($ATTN_TEST_MODEL),
skipped when absent and required in CI (.ci/run sets both). Each claim is checked
twice: the text is in the document word for word, and the model gives its numbers."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOC = (ROOT / "docs" / "trace.md").read_text(encoding="utf-8")
SEED = "The pink elephant tried to get into the car but it was too"
SMOLLM2 = os.environ.get("ATTN_TEST_GGUF")
MINILM = os.environ.get("ATTN_TEST_MODEL")
needs_smollm2 = pytest.mark.skipif(not SMOLLM2, reason="SmolLM2's GGUF not found (set ATTN_TEST_GGUF; .ci/run does)")
needs_minilm = pytest.mark.skipif(not MINILM, reason="all-MiniLM-L6-v2 not found (set ATTN_TEST_MODEL; .ci/run does)")


def said(text: str, *documents: str) -> None:
    """The claim is in each document, as written (line breaks and indentation aside)."""
    for document in documents:
        assert " ".join(text.split()) in " ".join(document.split()), text


def two(x: float) -> str:
    return f"{x:.2f}"


@pytest.fixture(scope="module")
def query_it():
    """The JSON of --query it on the seed sentence: every layer's and head's row, and the others' mean."""
    from conftest import Attn

    out = Attn().json("trace", SEED, "-m", SMOLLM2, "--query", "it")
    w = np.array(out["weights"], dtype=float)[:, :, 0]  # [30, 9, 13], null (forbidden) as NaN
    others = np.array(out["others"], dtype=float)
    return out, w, others


@needs_smollm2
def test_the_next_token(query_it):
    out = query_it[0]
    p = dict(zip(out["next"]["tokens"], out["next"]["probabilities"], strict=True))
    assert f"{p[' big']:.3f}" == "0.345" and f"{p[' heavy']:.3f}" == "0.227" and f"{p[' large']:.3f}" == "0.095"
    assert max(p, key=p.get) == " big"
    said('the next token is " big" (0.345), then " heavy" (0.227) and " large" (0.095)', README)
    for token, value in ((" big", "0.345"), (" heavy", "0.227"), (" large", "0.095")):
        assert re.search(rf"^'{token}'\s+{value}", DOC, re.M), token
    said(
        '"next": {"position": 12, "tokens": [" big", " heavy", " large", " far", " close"], '
        '"ids": [2066, 4591, 1507, 1869, 2800], "probabilities": [0.3451, 0.2272, 0.0951, 0.0355, 0.0268]}',
        DOC,
    )
    assert out["next"]["ids"] == [2066, 4591, 1507, 1869, 2800]
    assert [round(x, 4) for x in out["next"]["probabilities"]] == [0.3451, 0.2272, 0.0951, 0.0355, 0.0268]


@needs_smollm2
def test_where_it_looks_beside_the_other_tokens(query_it):
    out, w, others = query_it
    assert out["tokens"][out["queries"][0]] == " it" and w.shape == (30, 9, 13)
    heaviest = np.nanargmax(w, axis=-1)
    assert (heaviest == 0).sum() == 156 and heaviest.size == 270 and out["tokens"][0] == "The"
    assert two(w[..., 0].mean()) == "0.45" and two(np.nanmean(others[..., 0])) == "0.65"
    said(
        'in 156 of the 270 heads its heaviest key is the first token, "The", which the other tokens weigh even '
        'more (0.65 on average, against 0.45 from " it")',
        README,
    )
    said(
        'in 156 of them its heaviest key is the first token, "The", and it gives "The" 0.45 on average, less '
        "than the other tokens do (0.65)",
        DOC,
    )
    elephant, car = out["tokens"].index(" elephant"), out["tokens"].index(" car")
    h3, h4, o3, o4 = w[9, 3], w[9, 4], others[9, 3], others[9, 4]
    assert (two(h3[elephant]), two(o3[elephant])) == ("0.18", "0.04") and heaviest[9, 3] == elephant
    assert round(h3[elephant] / o3[elephant]) == 4  # "four times"
    assert [two(x) for x in (h4[elephant], h4[car], o4[elephant], o4[car])] == ["0.27", "0.26", "0.09", "0.05"]
    said('In layer 9, head 3, " it" gives " elephant" 0.18 where the other tokens give it 0.04', README)
    said(
        'head 4 splits " it" between " elephant" (0.27) and " car" (0.26), against 0.09 and 0.05 from the others',
        README,
    )
    said('Layer 9\'s head 3 gives " elephant" 0.18 from " it", four times what the other tokens give it (0.04)', DOC)
    said('" elephant" 0.27 and " car" 0.26, where the others give them 0.09 and 0.05', DOC)
    row = [None if np.isnan(x) else round(float(x), 4) for x in h3]
    said(f'"weights": [[[[{row[0]}, {row[1]}, {row[2]}, …, {row[10]}, null, null]]]]', DOC)
    assert row[-2:] == [None, None]
    o = [round(float(x), 4) for x in o3]
    said(f'"others": [[[{o[0]}, {o[1]}, {o[2]}, …, {o[11]}, {o[12]}]]]', DOC)


@needs_smollm2
def test_the_top_view_in_docs_is_what_attn_prints(attn):
    result = attn(
        "trace",
        SEED,
        "-m",
        SMOLLM2,
        "--query",
        "it",
        "--layer",
        "9",
        "--head",
        "3",
        "--head",
        "4",
        "--top",
        "3",
        "--top-next",
        "0",
        "-f",
        "table",
        env={"COLUMNS": "100", "NO_COLOR": "1"},
    )
    assert result.exit_code == 0, result.output
    printed = result.stdout[result.stdout.index("layer 9 · head 3") :].rstrip()
    block = DOC[DOC.index("layer 9 · head 3") :]
    block = block[: block.index("```")].rstrip()
    assert [line.rstrip() for line in printed.splitlines()] == block.splitlines()


@needs_minilm
def test_minilm_it_and_elephant_beside_the_others(attn):
    out = attn.json("trace", SEED + " big", "-m", MINILM, "--query", "it", "--layer", "5", "--head", "11")
    w, others = np.array(out["weights"])[0, 0, 0], np.array(out["others"])[0, 0]
    elephant = out["tokens"].index("elephant")
    assert int(w.argmax()) == elephant and (two(w[elephant]), two(others[elephant])) == ("0.37", "0.40")
    said(
        'in layer 5, head 11, "it" gives "elephant" 0.37, its largest weight there — but the other tokens give '
        '"elephant" 0.40 on average in that head',
        DOC,
    )


@needs_smollm2
def test_explain_one_head():
    """docs/trace.md's --explain: why " it" gives " elephant" most in layer 9's head 3."""
    from conftest import Attn

    args = ("trace", SEED, "-m", SMOLLM2, "--layer", 9, "--head", 3, "--query", "it", "--explain")
    e = Attn().json(*args)["explain"]
    tokens, q, k = e["tokens"], np.array(e["q"]), np.array(e["k"])
    scores, weights = np.array(e["scores"]), np.array(e["weights"])
    at = {t: tokens.index(t) for t in ("The", " elephant", " to", " the")}
    el = at[" elephant"]
    allowed = [j for j, x in enumerate(e["logits"]) if x is not None]
    assert (e["position"], len(allowed), e["kv_head"]) == (10, 11, 1)
    assert [two(scores[at[t]]) for t in (" elephant", " to", "The")] == ["37.53", "36.13", "35.38"]
    assert [two(weights[at[t]]) for t in (" elephant", " to", "The")] == ["0.18", "0.15", "0.14"]
    assert two((scores[el] - scores[at["The"]]) / 8) == "0.27"  # the three scaled scores' spread
    assert [two(x) for x in (q[24], k[el, 24], q[24] * k[el, 24], q[24] * k[at[" to"], 24])] == [
        "-1.95", "9.65", "-18.79", "-25.02",
    ]  # fmt: skip
    others = [j for j in allowed if tokens[j] not in ("The", " the")]
    assert f"{k[others, 24].min():.0f} {k[others, 24].max():.0f}" == "9 13"
    taken = -q[24] * k[others, 24]
    assert f"{taken.min():.1f} {taken.max():.1f}" == "18.4 25.5"
    assert [two(k[at[t], 56]) for t in ("The", " the", " elephant")] == ["4.08", "3.99", "2.78"] and two(
        q[56]
    ) == "6.43"
    mean = scores[allowed].mean()
    parts = q * (k[el] - k[allowed].mean(axis=0))
    top = np.argsort(-np.abs(parts))[:3]
    assert (two(scores[el] - mean), two(mean)) == ("6.82", "30.72")
    assert [(int(d), two(parts[d])) for d in top] == [(22, "-5.67"), (56, "5.53"), (52, "4.09")]
    lengths = np.linalg.norm(k, axis=1)
    cosines = k @ q / (lengths * np.linalg.norm(q))
    assert (two(lengths[el]), two(cosines[el]), two(cosines[at["The"]])) == ("17.75", "0.17", "0.46")
    for line in (
        "it · elephant = 37.53: d24 (-1.95) × 9.65 = -18.79, d56 6.43 × 2.78 = 17.91, d49 1.96 × 3.81 = 7.46",
        "it · to = 36.13: d24 (-1.95) × 12.86 = -25.02, d49 1.96 × 3.46 = 6.77, d11 (-2.59) × (-2.49) = 6.43",
        "Softmax weighs only how scores differ: elephant, the heaviest key, scores 6.82 above the mean of the "
        "11 keys it may see (30.72); the features that set it apart, q_d × (k_d − the keys' mean k_d): d22 "
        "-5.67, d56 +5.53, d52 +4.09.",
        "grouped-query attention: query head 3 reads K/V head 1 of 3, which heads 3, 4, 5 share",
    ):
        said(line, DOC)
    view = Attn()(*args, "-f", "table", env={"COLUMNS": "130"})
    assert view.exit_code == 0, view.output
    for line in (
        "it · elephant = 37.53: d24 (-1.95) × 9.65 = -18.79",
        "Softmax weighs only how scores differ: elephant, the heaviest key, scores 6.82 above",
    ):
        said(line, view.stdout)
    said(
        'Dimension 56 of q (6.43) meets a large k_56 in "The" and " the" (4.08, 3.99) and a smaller one in '
        '" elephant" (2.78).',
        DOC,
    )
