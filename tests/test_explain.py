"""``attn explain``: every step in JSON and on screen, one query term by term."""

import numpy as np
import pytest

FOOTNOTE = ("q.csv", "k.csv", "v.csv")  # seed 000's footnote: q·K = [-3, 0, 3]


def footnote(samples):
    return [samples / name for name in FOOTNOTE]


def test_footnote_steps_in_json(attn, samples):
    out = attn.json("explain", *footnote(samples))
    assert out["scores"] == [[-3, 0, 3]]
    assert out["scale"] == pytest.approx(1 / np.sqrt(3))
    np.testing.assert_allclose(out["scaled"], [np.array([-3, 0, 3]) / np.sqrt(3)])
    assert out["logits"] == out["scaled"] and out["allowed"] is None
    expected = np.exp(np.array([-3, 0, 3]) / np.sqrt(3))
    expected /= expected.sum()
    np.testing.assert_allclose(out["weights"], [expected], rtol=1e-12)
    np.testing.assert_allclose(out["output"], [[expected @ [10, 5, 2]]], rtol=1e-12)
    assert out["query"] == "fruit" and out["query_index"] == 0
    assert out["q"] == [[2, 1, 3]] and out["v"] == [[10], [5], [2]]
    assert out["keys"] == ["apple", "banana", "chair"]


def test_explain_json_agrees_with_run(attn, samples):
    explained = attn.json("explain", samples / "colors.yaml")
    run = attn.json("run", samples / "colors.yaml")
    for key, value in run.items():
        assert explained[key] == value, key
    assert np.round(explained["output"], 3).tolist() == [[0.488, 0.512]]


def test_options_reach_every_step(attn, samples, tmp_path):
    out = attn.json("explain", *footnote(samples), "--scale", "0.5", "--temperature", "2", "--causal")
    assert out["scaled"] == [[-0.75, 0, 0.75]]
    assert out["allowed"] == [[True, False, False]]
    assert out["logits"] == [[-0.75, None, None]]  # JSON has no -inf: forbidden pairs are null
    assert out["weights"] == [[1, 0, 0]]
    (tmp_path / "m.csv").write_text("0,-inf,0.5\n")
    out = attn.json("explain", *footnote(samples), "--bias", tmp_path / "m.csv")
    assert out["allowed"] == [[True, False, True]] and out["logits"][0][1] is None
    assert out["logits"][0][2] == pytest.approx(3 / np.sqrt(3) + 0.5)


def test_query_by_label_or_row(attn, tmp_path):
    (tmp_path / "b.yaml").write_text("q: {a: [1, 0], b: [0, 1]}\nk: [[1, 0], [0, 1]]\nv: [[1], [2]]\n")
    assert attn.json("explain", tmp_path / "b.yaml", "--query", "b")["query_index"] == 1
    assert attn.json("explain", tmp_path / "b.yaml", "-q", "1")["query"] == "b"
    text = attn("explain", tmp_path / "b.yaml", "-q", "b", "-f", "table").stdout
    assert "b: 0.330 × [1.000] + 0.670 × [2.000] = [1.670]" in text


def test_view_walks_through_the_steps_in_order(attn, samples):
    result = attn("explain", samples / "colors.yaml", "-f", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    steps = [
        "1. The inputs",
        "Q: 1 query, 1×3",
        "K: 8 keys, 8×3",
        "V: one value per key, 8×2",
        "2. Scores: QKᵀ",
        "3. Scaled scores",
        "4. Weights: softmax of each row",
        "5. Output: weights · V",
    ]
    positions = [text.index(step) for step in steps]
    assert positions == sorted(positions)
    assert "1/√d_k = 1/√3 = 0.577" in text
    # one number format in the whole view: the tables' (0.090, as the Q table shows it, not 0.09)
    assert "#8517dc · #fef0d9 = 0.522 × 0.996 + 0.090 × 0.941 + 0.863 × 0.851 = 1.339" in text
    assert "#8517dc: 0.150 × [1.000, 0.000] + 0.128 × [1.000, 0.000] + 0.114 × [1.000, 0.000]" in text
    assert "0.093 × [0.000, 1.000] = [0.488, 0.512]" in text
    assert "#8517dc is 48.8 % warm, 51.2 % cool" in text
    assert "Seed 003's RGB colours, warm or cool" in text  # the bundle's description
    assert "\x1b[" not in text


def test_view_says_which_scale_and_shows_the_mask(attn, samples):
    text = attn("explain", *footnote(samples), "-f", "table", "--causal", "-t", "2").stdout
    assert "4. Mask" in text and "The mask forbids 2 of 3 query–key pairs" in text
    assert "divided by the temperature 2, which flattens the weights" in text
    assert "fruit: 1.000 × [10.000] = [10.000]" in text  # masked keys are left out of the sum
    assert "6. Output" in text
    text = attn("explain", *footnote(samples), "-f", "table", "--similarity", "cosine").stdout
    assert "cosine similarity" in text and "not scaled (scale 1)" in text
    assert "2. Scores: cos(q, k)" in text and "scores = cos(q, k) of each query and key" in text
    assert "Q · Kᵀ" not in text and "QKᵀ" not in text.split("\n", 1)[1]  # only the title's formula
    assert "cos(fruit, apple) = -3.000 / (3.742 × 2.449) = -0.327" in text
    text = attn("explain", *footnote(samples), "-f", "table", "--scale", "0.25").stdout
    assert "multiplied by 0.25, the scale given" in text


def test_negative_factors_are_bracketed(attn, samples):
    text = attn("explain", *footnote(samples), "-f", "table").stdout
    assert "fruit · apple = 2.000 × (-1.000) + 1.000 × 2.000 + 3.000 × (-1.000) = -3.000" in text
    assert "× -" not in text


def test_long_sums_are_summarised(attn, tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "b.npz", q=rng.normal(size=(1, 12)), k=rng.normal(size=(20, 12)), v=rng.normal(size=(20, 6)))
    text = attn("explain", tmp_path / "b.npz", "-f", "table").stdout
    assert "(4 more)" in text  # 12 products, 8 written
    assert "(12 more keys, weight" in text  # 20 terms, 8 written
    assert ", … 2 more]" in text  # value rows of 6 numbers show 4


def test_csv_emits_the_chosen_matrix(attn, samples):
    result = attn("explain", *footnote(samples), "-f", "csv", "--emit", "weights")
    assert result.stdout.splitlines()[0] == ",apple,banana,chair"


@pytest.mark.parametrize(
    "query, message",
    [
        ("3", "--query 3: no such query (Q has row 0; give a number or a label)"),
        ("apple", "--query apple: no such query (Q has row 0; give a number or a label)"),
        ("-1", "--query -1: no such query (Q has row 0; give a number or a label)"),
    ],
)
def test_unknown_query_exits_2(attn, samples, query, message):
    assert attn.fails("explain", *footnote(samples), "--query", query, code=2) == message


def test_errors_are_the_same_as_run(attn, samples, tmp_path):
    assert attn.fails("explain", "a", "b", code=2) == "expected one bundle file or three files Q K V, got 2"
    assert attn.fails("explain", tmp_path / "nope.yaml") == f"{tmp_path}/nope.yaml: no such file"
    (tmp_path / "q.csv").write_text("1,2\n")
    assert (
        attn.fails("explain", tmp_path / "q.csv", samples / "k.csv", samples / "v.csv")
        == "Q is 1×2 but K is 3×3 (Q and K need the same number of columns, d_k)"
    )
    assert (
        attn.fails("explain", samples / "colors.yaml", "--temperature", "0", code=2)
        == "temperature must be a positive finite number, got 0.0"
    )


def test_a_person_paging_json_is_told_about_the_table(attn, samples, monkeypatch):
    """`attn explain … | less` on a terminal: JSON (a pipe), and a note on the terminal's stderr naming -f table;
    a script (stderr not a terminal) or a chosen format gets no note."""
    import attncli.cli.emit as emit

    monkeypatch.setattr(emit, "stderr_is_terminal", lambda: True)
    out, notes = attn.json_and_notes("explain", samples / "colors.yaml")
    assert out["query"] == "#8517dc" and notes == [
        "stdout is not a terminal, so this is JSON; -f table writes the steps "
        "(FORCE_COLOR=1 attn explain … -f table | less -R keeps the colours)"
    ]
    assert attn.json_and_notes("explain", samples / "colors.yaml", "-f", "json")[1] == []
    monkeypatch.setattr(emit, "stderr_is_terminal", lambda: False)
    assert attn.json_and_notes("explain", samples / "colors.yaml")[1] == []


def test_made_up_vectors_say_so_in_the_header(attn, samples):
    """Seed 000's footnote names its made-up vectors fruit, apple, banana and chair: its sample says they are
    labels, not meanings, in explain's header and run's."""
    said = "Seed 000's footnote: made-up vectors (the names are labels, not meanings)"
    assert said in attn("explain", samples / "footnote.yaml", "-f", "table").stdout
    assert said in attn("run", samples / "footnote.yaml", "-f", "table").stdout
    out = attn.json("explain", samples / "footnote.yaml", "--scale", "1")
    assert out["scores"] == [[-3, 0, 3]] and out["columns"] == ["value"]


def test_the_score_step_says_when_length_beats_direction(attn, tmp_path, samples):
    """Seed 000's footnote: a = [1, 1, 1] scores 1000 with b = [1000, 0, 0] and 6 with c = [2, 2, 2], though c
    points its way; explain says so, with the cosines, and the terms that made each score."""
    (tmp_path / "b.yaml").write_text("q: {a: [1, 1, 1]}\nk: {b: [1000, 0, 0], c: [2, 2, 2]}\nv: [1, 2]\n")
    text = " ".join(attn("explain", tmp_path / "b.yaml", "-f", "table").stdout.split())
    assert (
        "Here length, not direction, decides: b has the biggest score with a (1000.000, length 1000.000), but c "
        "points most nearly the same way (cosine 1.000 against 0.577, length 3.464)."
    ) in text
    assert "--similarity cosine compares directions only" in text
    assert "a · b = 1000.000: d0 1.000 × 1000.000 = 1000.000, d1 1.000 × 0.000 = 0.000" in text
    footnote = " ".join(attn("explain", samples / "footnote.yaml", "-f", "table").stdout.split())
    assert "length, not direction" not in footnote  # chair wins by direction too


def test_the_scale_step_speaks_of_more_numbers_not_longer_vectors(attn, samples):
    """Step 3 once said "dot products of longer vectors spread wider", meaning more dimensions; a learner
    reads "larger". It says how many numbers a dot product adds up."""
    text = " ".join(attn("explain", samples / "colors.yaml", "-f", "table").stdout.split())
    assert "the more numbers a dot product adds up (d_k of them), the wider its values spread" in text
    assert "longer vectors" not in text
