"""Learners' guard-rails: one `attn: note:` line on stderr when softmax
saturates or a query may attend to nothing, for run, explain, self and
lookup; never in the data on stdout, never when the command fails."""

import numpy as np
import pytest

from attncli.cli.guards import empty_rows, saturated_rows
from attncli.core.options import AttentionOptions

COLOURS_255 = """\
q: {"#8517dc": [133, 23, 220]}
k:
  "#fef0d9": [254, 240, 217]
  "#fdcc8a": [253, 204, 138]
  "#fc8d59": [252, 141, 89]
  "#d7301f": [215, 48, 31]
  "#f6eff7": [246, 239, 247]
  "#bdc9e1": [189, 201, 225]
  "#67a9cf": [103, 169, 207]
  "#02818a": [2, 129, 138]
v: {columns: [warm, cool], rows: [[1, 0], [1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1], [0, 1]]}
"""
SATURATED = (
    "softmax saturates: query #8517dc puts 99.9 % or more of the weight on one key, the scaled scores "
    "spanning up to 3.404e+04 (scale the inputs down, e.g. divide: 255 for 0–255 colours, "
    "or raise --temperature)"
)


def test_seed_003_without_divide_is_saturated(attn, tmp_path, samples):
    (tmp_path / "c.yaml").write_text(COLOURS_255)
    out, notes = attn.json_and_notes("run", tmp_path / "c.yaml")
    assert np.round(out["output"], 3).tolist() == [[0.0, 1.0]] and notes == [SATURATED]  # "100 % cool"
    assert attn.json_and_notes("explain", tmp_path / "c.yaml")[1] == [SATURATED]
    assert attn.json_and_notes("run", samples / "colors.yaml")[1] == []  # divide: 255, as the seed does
    assert attn.json_and_notes("run", tmp_path / "c.yaml", "--temperature", "1e4")[1] == []


def test_only_colours_are_told_to_divide_by_255(attn, tmp_path):
    (tmp_path / "b.yaml").write_text("q: [[100, 0]]\nk: [[1, 0], [0, 1]]\nv: [[1], [2]]\n")
    _, notes = attn.json_and_notes("run", tmp_path / "b.yaml")
    assert notes == [
        "softmax saturates: query q0 puts 99.9 % or more of the weight on one key, the scaled scores spanning "
        "up to 70.71 (scale the inputs down, or raise --temperature)"
    ]
    (tmp_path / "rgb.yaml").write_text(
        "q: [[133, 23, 220]]\nk: [[254, 240, 217], [2, 129, 138]]\nv: [[1], [0]]\nrgb: true\n"
    )
    _, notes = attn.json_and_notes("run", tmp_path / "rgb.yaml")
    assert "e.g. divide: 255 for 0–255 colours" in notes[0]  # rgb: true rows are colours


def test_the_note_is_on_stderr_after_the_table(attn, tmp_path):
    (tmp_path / "c.yaml").write_text(COLOURS_255)
    result = attn("run", tmp_path / "c.yaml", "-f", "table")
    assert result.exit_code == 0 and "softmax saturates" not in result.stdout
    assert result.stderr == f"attn: note: {SATURATED}\n"


def test_lookup_and_self_say_so_too(attn, tmp_path):
    _, notes = attn.json_and_notes("lookup", "fruit", "-k", "apple,banana,chair", "--scale", "10")
    assert notes[0].startswith("softmax saturates: query fruit puts 99.9 % or more of the weight on one key")
    assert attn.json_and_notes("lookup", "fruit", "-k", "apple,banana,chair")[1] == []
    (tmp_path / "x.csv").write_text("100,0\n0,100\n")
    _, notes = attn.json_and_notes(
        "self", tmp_path / "x.csv", "--heads", "2", "--wq", tmp_path / "x.csv", "--wk", tmp_path / "x.csv"
    )
    assert notes[0].startswith("softmax saturates in some head: queries x0, x1 put 99.9 % or more")


def test_queries_that_see_nothing(attn, tmp_path):
    (tmp_path / "b.yaml").write_text(
        "q: [[1], [2], [3]]\nk: [[1], [1]]\nv: [[3], [4]]\nmask: [[0, 0], [1, 1], [0, 0]]\n"
    )
    expected = "queries q0, q2 may attend to no key (the mask forbids every key): their weights and outputs are 0"
    assert attn.json_and_notes("explain", tmp_path / "b.yaml")[1] == [expected]
    (tmp_path / "x.csv").write_text("1,0\n0,1\n1,1\n")
    (tmp_path / "bias.csv").write_text("0,0,0\n-inf,-inf,-inf\n0,0,0\n")
    _, notes = attn.json_and_notes("self", tmp_path / "x.csv", "--bias", tmp_path / "bias.csv")
    assert notes == [
        "query x1 may attend to no key (the mask forbids every key): its weights and output are 0",
        "random W_Q, W_K, W_V: the pattern means nothing; `attn trace` shows a trained model",
    ]


def test_no_note_when_the_command_fails(attn, tmp_path):
    (tmp_path / "q.csv").write_text("0,1\n0.5,1.5\n")  # a pandas header: a note, had it succeeded
    (tmp_path / "k.csv").write_text("1,2,3\n")
    attn.fails("run", tmp_path / "q.csv", tmp_path / "k.csv", tmp_path / "k.csv")  # exactly one line


@pytest.mark.parametrize(
    "mask, causal, n_q, n_k, empty",
    [
        (None, None, 3, 2, []),
        (None, "top-left", 3, 2, []),
        (None, "bottom-right", 4, 2, [0, 1]),
        ([[True, False]], "bottom-right", 3, 2, [0]),
        ([[False, True]], "bottom-right", 3, 2, [0, 1]),
        ([[False, True]], "top-left", 3, 2, [0]),
        ([[False], [True], [False]], None, 3, 4, [0, 2]),  # one column for every key
        ([[False, False, True], [True, False, False]], "top-left", 2, 3, [0]),
        ([[[False, False]], [[False, True]]], None, 1, 2, []),  # heads: empty only if empty in every head
    ],
)
def test_empty_rows(mask, causal, n_q, n_k, empty):
    options = AttentionOptions(causal=causal, mask=None if mask is None else np.array(mask))
    assert empty_rows(options, n_q, n_k).tolist() == empty


def test_saturated_rows_need_both_a_heavy_weight_and_a_wide_span():
    weights = np.array([[0.9995, 0.0005, 0], [0.9995, 0.0005, 0], [0.5, 0.5, 0]])
    logits = np.array([[60, 0, -np.inf], [8, 0.4, -np.inf], [100, 100, 0]])
    rows, span = saturated_rows(weights, logits, logits)
    assert rows.tolist() == [0] and span == 60


def test_a_bias_does_not_count_as_a_wide_span():
    """The span is of the scaled scores: a large bias the user chose is no reason to scale the inputs."""
    weights = np.array([[1.0, 0.0, 0.0]])
    scaled = np.array([[0.5, 0.1, 0.2]])
    logits = scaled + np.array([[1e308, -1e308, 0]])
    rows, _ = saturated_rows(weights, logits, scaled)
    assert rows.tolist() == []
