"""``attn self`` against an independent reference: projections, heads, masks,
random weights, sentences, output formats and every error path."""

import io
import math

import numpy as np
import pytest

from reference import attention as attention_reference
from reference import multi_head as reference

TOL = 1e-9  # float64 agreement with the reference below
RANDOM = "random W_Q, W_K, W_V: the pattern means nothing; `attn trace` shows a trained model"  # its note


def save(tmp_path, **arrays):
    """Each array to NAME.npy; returns the command-line options --NAME FILE."""
    args = []
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", np.asarray(a, dtype=np.float64))
        if name not in ("x", "z"):
            args += [f"--{name}", tmp_path / f"{name}.npy"]
    return args


def problem(seed=0, n_x=4, d_x=6, n_z=None, d_z=None, d_attn=6, d_v=6, d_out=None, biases=False):
    """Random X (Z), W and b of the given sizes."""
    rng = np.random.default_rng(seed)
    p = {"x": rng.normal(size=(n_x, d_x)), "wq": rng.normal(size=(d_x, d_attn)) / 2}
    d_in_kv = d_x if d_z is None else d_z
    if n_z is not None:
        p["z"] = rng.normal(size=(n_z, d_in_kv))
    p["wk"] = rng.normal(size=(d_in_kv, d_attn)) / 2
    p["wv"] = rng.normal(size=(d_in_kv, d_v))
    if d_out is not None:
        p["wo"] = rng.normal(size=(d_v, d_out))
    if biases:
        p.update(bq=rng.normal(size=d_attn), bk=rng.normal(size=d_attn), bv=rng.normal(size=d_v))
        if d_out is not None:
            p["bo"] = rng.normal(size=d_out)
    return p


CASES = {
    "self, one head": dict(problem=dict(), heads=1),
    "self, 3 heads, W_O and biases": dict(problem=dict(d_attn=6, d_v=9, d_out=4, biases=True), heads=3),
    "self, 2 heads, biases, no W_O": dict(problem=dict(biases=True), heads=2),
    "cross, n_z≠n_x, d_z≠d_x, 2 heads, W_O and biases": dict(
        problem=dict(n_x=3, d_x=4, n_z=5, d_z=7, d_attn=8, d_v=6, d_out=3, biases=True), heads=2
    ),
    "cross, no W_O, no biases": dict(problem=dict(n_x=2, d_x=3, n_z=6, d_z=5, d_attn=4, d_v=2), heads=2),
    "self, causal, 2 heads, W_O": dict(problem=dict(d_out=5, biases=True), heads=2, causal=True),
    "cross, causal, n_q < n_k": dict(problem=dict(n_x=3, n_z=5, d_z=4), heads=3, causal=True),
    "cross, causal, n_q > n_k": dict(problem=dict(n_x=5, n_z=3, d_z=4, d_out=2), heads=1, causal=True),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_matches_the_reference(attn, tmp_path, case):
    p = problem(**case["problem"])
    args = save(tmp_path, **p)
    context = ["--context", tmp_path / "z.npy"] if "z" in p else []
    causal = ["--causal"] if case.get("causal") else []
    out = attn.json("self", tmp_path / "x.npy", *context, *args, "--heads", case["heads"], *causal)
    weights, output = reference(**p, heads=case["heads"], causal=case.get("causal", False))
    assert np.array(out["weights"]).shape == weights.shape  # [heads, n_q, n_k], always 3-D
    np.testing.assert_allclose(out["weights"], weights, rtol=0, atol=TOL)
    np.testing.assert_allclose(out["output"], output, rtol=0, atol=TOL)
    assert out["heads"] == case["heads"] and out["random"] == []
    assert out["d_in"] == p["x"].shape[1] and out["d_out"] == output.shape[1]
    assert out["d_attn"] == p["wq"].shape[1] and out["d_head"] == p["wq"].shape[1] // case["heads"]
    assert out["scale"] == pytest.approx(1 / math.sqrt(out["d_head"]), rel=1e-15)
    np.testing.assert_allclose(out["q"], p["x"] @ p["wq"] + p.get("bq", 0), rtol=0, atol=TOL)


def test_the_maths_alone_matches_the_reference():
    from attncli.core.multihead import multi_head_attention

    p = problem(n_x=3, d_x=4, n_z=5, d_z=7, d_attn=8, d_v=6, d_out=3, biases=True)
    output, weights = multi_head_attention(
        p["x"],
        p["wq"],
        p["wk"],
        p["wv"],
        context=p["z"],
        w_o=p["wo"],
        b_q=p["bq"],
        b_k=p["bk"],
        b_v=p["bv"],
        b_o=p["bo"],
        n_head=2,
    )
    ref_weights, ref_output = reference(**p, heads=2)
    assert np.abs(weights - ref_weights).max() < TOL and np.abs(output - ref_output).max() < TOL


def test_float32_stays_float32():
    from attncli.core.multihead import multi_head_attention

    p = {name: a.astype(np.float32) for name, a in problem().items()}
    output, weights = multi_head_attention(p["x"], p["wq"], p["wk"], p["wv"], n_head=2)
    assert output.dtype == np.float32 and weights.dtype == np.float32
    ref_weights, ref_output = reference(**p, heads=2)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(output, ref_output, rtol=1e-4, atol=1e-5)


def test_matches_torch_multihead_attention(attn, tmp_path):
    torch = pytest.importorskip("torch")
    e, heads, n_x, n_z = 6, 3, 4, 5
    mha = torch.nn.MultiheadAttention(e, heads, bias=True, batch_first=True, dtype=torch.float64)
    rng = np.random.default_rng(1)
    x, z = rng.normal(size=(n_x, e)), rng.normal(size=(n_z, e))
    with torch.no_grad():
        output, weights = mha(
            torch.tensor(x)[None],
            torch.tensor(z)[None],
            torch.tensor(z)[None],
            need_weights=True,
            average_attn_weights=False,
        )
    # torch computes x Wᵀ + b: its weights are the transpose of ours.
    w_in, b_in = mha.in_proj_weight.detach().numpy(), mha.in_proj_bias.detach().numpy()
    p = dict(
        wq=w_in[:e].T,
        wk=w_in[e : 2 * e].T,
        wv=w_in[2 * e :].T,
        wo=mha.out_proj.weight.detach().numpy().T,
        bq=b_in[:e],
        bk=b_in[e : 2 * e],
        bv=b_in[2 * e :],
        bo=mha.out_proj.bias.detach().numpy(),
    )
    args = save(tmp_path, x=x, z=z, **p)
    out = attn.json("self", tmp_path / "x.npy", "--context", tmp_path / "z.npy", *args, "--heads", heads)
    np.testing.assert_allclose(out["weights"], weights[0].numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(out["output"], output[0].numpy(), rtol=0, atol=TOL)


def test_bundle_holds_everything(attn, tmp_path):
    p = problem(n_x=3, d_x=4, n_z=5, d_z=7, d_attn=8, d_v=6, d_out=3, biases=True)
    bundle = {("context" if name == "z" else name): a for name, a in p.items()}
    np.savez(tmp_path / "b.npz", **bundle, x_labels=np.array(["a", "b", "c"]))
    out = attn.json("self", tmp_path / "b.npz", "--heads", 2)
    weights, output = reference(**p, heads=2)
    np.testing.assert_allclose(out["weights"], weights, rtol=0, atol=TOL)
    np.testing.assert_allclose(out["output"], output, rtol=0, atol=TOL)
    assert out["queries"] == ["a", "b", "c"] and out["keys"] == ["z0", "z1", "z2", "z3", "z4"]
    # a file on the command line takes the place of the bundle's entry
    np.save(tmp_path / "wo2.npy", 2 * p["wo"])
    out2 = attn.json("self", tmp_path / "b.npz", "--heads", 2, "--wo", tmp_path / "wo2.npy")
    np.testing.assert_allclose(out2["output"], reference(**{**p, "wo": 2 * p["wo"]}, heads=2)[1], atol=TOL)


def test_yaml_bundle_and_labelled_matrix(attn, tmp_path):
    (tmp_path / "b.yaml").write_text(
        "description: two tokens\nx: {cat: [1, 0], sat: [0, 1]}\nwq: [[1, 0], [0, 1]]\n"
        "wk: [[2, 0], [0, 2]]\nwv: [[1, 2], [3, 4]]\nbv: [0.5, -0.5]\n"
    )
    out = attn.json("self", tmp_path / "b.yaml")
    x, w = np.eye(2), {"wq": np.eye(2), "wk": 2 * np.eye(2), "wv": np.array([[1, 2], [3, 4]])}
    weights, output = reference(x, **w, bv=np.array([0.5, -0.5]))
    np.testing.assert_allclose(out["weights"], weights, atol=TOL)
    np.testing.assert_allclose(out["output"], output, atol=TOL)
    assert out["queries"] == out["keys"] == ["cat", "sat"]
    # a YAML mapping without an x entry is X itself, labelled by its keys
    (tmp_path / "x.yaml").write_text("cat: [1, 0]\nsat: [0, 1]\n")
    assert attn.json("self", tmp_path / "x.yaml", random=True)["queries"] == ["cat", "sat"]


def test_three_spaces_sample(attn, samples):
    out = attn.json("self", samples / "three_spaces.yaml")
    x = np.array([[1.0, 0.2, -0.5], [0.1, 0.9, 0.3], [-0.4, 0.3, 1.2]])
    p = dict(
        wq=np.array([[2.0, 0.0], [0.0, 2.0], [1.0, -1.0]]),
        wk=np.array([[1.0, 2.0], [2.0, 0.0], [0.0, 2.0]]),
        wv=np.array([[1, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, -1]]),
        bq=np.array([0.1, 0.0]),
        bk=np.array([0.0, 0.1]),
        bv=np.array([0, 0, 0, 0.5]),
    )
    weights, output = reference(x, **p)
    np.testing.assert_allclose(out["weights"], weights, rtol=0, atol=TOL)
    np.testing.assert_allclose(out["output"], output, rtol=0, atol=TOL)
    assert out["queries"] == ["I", "like", "apples"] and out["columns"] == ["o1", "o2", "o3", "o4"]
    assert (out["d_in"], out["d_attn"], out["d_out"]) == (3, 2, 4)


def test_column_convention_gives_the_same_numbers(attn, tmp_path):
    p = problem(n_x=3, d_x=4, n_z=5, d_z=7, d_attn=8, d_v=6, d_out=3, biases=True)
    rows = attn.json("self", tmp_path / "x.npy", "--context", tmp_path / "z.npy", *save(tmp_path, **p), "--heads", 2)
    columns = tmp_path / "columns"
    columns.mkdir()
    transposed = {n: (a.T if a.ndim == 2 else a[:, None]) for n, a in p.items()}  # biases as columns too
    args = save(columns, **transposed)
    cols = attn.json("self", columns / "x.npy", "--context", columns / "z.npy", *args, "--heads", 2, "--columns")
    np.testing.assert_allclose(cols["output"], rows["output"], rtol=0, atol=TOL)
    np.testing.assert_allclose(cols["weights"], rows["weights"], rtol=0, atol=TOL)


def test_mask_applies_to_every_head(attn, tmp_path):
    p = problem(n_x=3, n_z=4, d_z=5)
    (tmp_path / "m.csv").write_text("1,1,0,0\n0,1,1,0\n1,1,1,1\n")
    out = attn.json(
        "self",
        tmp_path / "x.npy",
        "--context",
        tmp_path / "z.npy",
        *save(tmp_path, **p),
        "--heads",
        2,
        "--mask",
        tmp_path / "m.csv",
    )
    weights = np.array(out["weights"])
    assert (weights[:, 0, 2:] == 0).all() and (weights[:, 1, [0, 3]] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, atol=TOL)


SENTENCE = "The pink elephant tried to get into the car but it was too big."


def test_sentence_out_of_the_box_matches_the_reference(attn):
    from attncli.vectors.table import load_default, phrase_words

    out = attn.json("self", SENTENCE, "--heads", 2, random=True)
    words = phrase_words(SENTENCE)
    assert out["queries"] == out["keys"] == words and len(words) == 14
    assert out["seed"] == 0 and out["random"] == ["W_Q", "W_K", "W_V"]
    assert (out["d_in"], out["d_attn"], out["d_out"], out["heads"]) == (50, 50, 50, 2)
    # The documented recipe: W_Q, W_K, W_V are streams 0, 1, 2 of SeedSequence(seed), N(0, 1/d_in).
    x = load_default().lookup(words).astype(np.float64)
    wq, wk, wv = (
        np.random.default_rng(s).normal(0, 1 / math.sqrt(50), size=(50, 50)) for s in np.random.SeedSequence(0).spawn(3)
    )
    weights, output = reference(x, wq, wk, wv, heads=2)
    np.testing.assert_allclose(out["weights"], weights, rtol=0, atol=TOL)
    np.testing.assert_allclose(out["output"], output, rtol=0, atol=TOL)
    # LeCun scale keeps the scores sensible: no head is one-hot, none is uniform
    assert 0.1 < np.max(out["weights"]) < 0.9


def test_seed_is_deterministic(attn):
    a, b = (
        attn.json("self", SENTENCE, "--heads", 2, random=True),
        attn.json("self", SENTENCE, "--heads", 2, random=True),
    )
    c = attn.json("self", SENTENCE, "--heads", 2, "--seed", 1, random=True)
    assert a == b
    assert c["seed"] == 1 and not np.allclose(a["weights"], c["weights"])


def test_a_given_weight_leaves_the_random_ones_unchanged(attn, tmp_path):
    rng = np.random.default_rng(3)
    np.save(tmp_path / "wq.npy", rng.normal(size=(50, 10)))
    np.save(tmp_path / "wv.npy", rng.normal(size=(50, 4)))
    base = attn.json("self", "she made her uncle tea", "--d-attn", 10, "--d-out", 4, random=True)
    out = attn.json(
        "self", "she made her uncle tea", "--wq", tmp_path / "wq.npy", "--wv", tmp_path / "wv.npy", random="W_K"
    )
    assert out["random"] == ["W_K"] and out["d_attn"] == 10 and out["d_out"] == 4
    np.testing.assert_array_equal(out["k"], base["k"])


def test_cross_attention_between_sentences_and_own_vectors(attn, tmp_path):
    (tmp_path / "vec.txt").write_text("cat 1 0 0\nsat 0 1 0\nmat 0 0 1\nthe 1 1 1\n")
    out = attn.json(
        "self",
        "the cat",
        "--context",
        "cat sat mat",
        "--vectors",
        tmp_path / "vec.txt",
        "--d-attn",
        4,
        "--d-out",
        2,
        random=True,
    )
    assert out["queries"] == ["the", "cat"] and out["keys"] == ["cat", "sat", "mat"]
    assert (out["d_in"], out["d_z"], out["d_attn"], out["d_out"]) == (3, 3, 4, 2)
    assert np.array(out["weights"]).shape == (1, 2, 3)
    np.save(tmp_path / "vec.npy", np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=np.float32))
    (tmp_path / "words.txt").write_text("cat\nsat\nmat\nthe\n")
    same = attn.json(
        "self",
        "the cat",
        "--context",
        "cat sat mat",
        "--vectors",
        tmp_path / "vec.npy",
        "--words",
        tmp_path / "words.txt",
        "--d-attn",
        4,
        "--d-out",
        2,
        random=True,
    )
    assert same == out


def test_table_view(attn, tmp_path):
    result = attn("self", "she made her uncle tea", "--heads", 2, "-f", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "self-attention X 5×50 → output 5×50" in text
    assert "d_in 50 · d_attn 50 · d_out 50 · 2 heads of d_head 25" in text
    assert "random W_Q, W_K, W_V (seed 0): the pattern means nothing; `attn trace` shows a trained model" in text
    assert "head 0 of 2" in text and "head 1 of 2" in text and "uncle" in text
    assert "… and 38 more columns" in text
    one = attn("self", "she made her uncle tea", "--heads", 2, "--head", 1, "-f", "table").stdout
    assert "head 1 of 2" in one and "head 0 of 2" not in one
    p = problem(n_x=2, n_z=3, d_z=4, d_out=2, biases=True)
    crossed = attn(
        "self", tmp_path / "x.npy", "-c", tmp_path / "z.npy", *save(tmp_path, **p), "--causal", "-f", "table"
    ).stdout
    assert "cross-attention X 2×6 over Z 3×4 → output 2×2" in crossed
    assert "d_v 6 · d_out 2" in crossed and "no random weights" in crossed and "causal (top-left)" in crossed
    assert "output = concat(heads) · W_O + b_o" in crossed


def test_weights_as_npy_csv_and_one_head(attn, tmp_path):
    p = problem(n_x=3, n_z=2, d_z=4)
    args = ["self", tmp_path / "x.npy", "--context", tmp_path / "z.npy", *save(tmp_path, **p), "--heads", 3]
    weights, output = reference(**p, heads=3)
    npy = attn(*args, "-f", "npy", "--emit", "weights")
    np.testing.assert_allclose(np.load(io.BytesIO(npy.stdout_bytes)), weights, atol=TOL)  # [heads, n_q, n_k]
    csv = attn(*args, "-f", "csv", "--emit", "weights").stdout.splitlines()
    assert len(csv) == 9 and csv[0].startswith("0:x0,") and csv[3].startswith("1:x0,")
    one = attn(*args, "-f", "npy", "--emit", "weights", "--head", 2)
    np.testing.assert_allclose(np.load(io.BytesIO(one.stdout_bytes)), weights[2], atol=TOL)
    out = attn(*args, "-f", "tsv").stdout.splitlines()
    assert len(out) == 3 and len(out[0].split("\t")) == 6
    np.testing.assert_allclose(np.loadtxt(io.StringIO("\n".join(out))), output, atol=TOL)
    v = attn(*args, "-f", "npy", "--emit", "v")
    np.testing.assert_allclose(np.load(io.BytesIO(v.stdout_bytes)), p["z"] @ p["wv"], atol=TOL)


def test_sentence_csv_keeps_the_words(attn):
    lines = attn("self", "she made tea", "-f", "csv", "--emit", "weights", "--head", 0).stdout.splitlines()
    assert lines[0] == ",she,made,tea" and lines[1].startswith("she,")


def test_is_file_name():
    from attncli.cli.paths import is_file_name

    assert is_file_name("-") and is_file_name("x.csv") and is_file_name("data/x") and is_file_name("W.NPY")
    assert is_file_name("x.cvs")  # a typo is "no such file", not an unknown word
    assert not is_file_name("elephant") and not is_file_name("the car is too big.")
    assert not is_file_name("big.") and not is_file_name("U.S.") and not is_file_name("...")
    assert not is_file_name("a/b c")  # with a space it is a sentence


# --- errors -----------------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    """x 3×4, z 5×7 and weights that chain, plus a few that do not."""
    p = problem(n_x=3, d_x=4, n_z=5, d_z=7, d_attn=6, d_v=6, d_out=2)
    save(tmp_path, **p)
    bad = {
        "w56": np.ones((5, 6)),
        "w48": np.ones((4, 8)),
        "w44": np.ones((4, 4)),
        "w45": np.ones((4, 5)),
        "w32": np.ones((3, 2)),
        "b5": np.ones(5),
        "b23": np.ones((2, 3)),
        "b2": np.ones(2),
    }
    save(tmp_path, **bad)
    return {name: tmp_path / f"{name}.npy" for name in [*p, *bad]}


def test_shape_errors_name_both_shapes(attn, files):
    f = files
    cases = [
        (["--wq", f["w56"]], "X is 3×4 but W_Q is 5×6 (W_Q needs 4 rows, one per column of X)"),
        (["--context", f["z"], "--wk", f["w56"]], "Z is 5×7 but W_K is 5×6 (W_K needs 7 rows, one per column of Z)"),
        (["--context", f["z"], "--wv", f["w45"]], "Z is 5×7 but W_V is 4×5 (W_V needs 7 rows, one per column of Z)"),
        (
            ["--wq", f["w45"], "--wk", f["w44"]],
            "W_Q is 4×5 but W_K is 4×4 (W_Q and W_K need the same number of columns, d_attn)",
        ),
        (["--wv", f["w44"], "--wo", f["w32"]], "W_V is 4×4 but W_O is 3×2 (W_O needs 4 rows, one per column of W_V)"),
        (["--wq", f["w48"], "--bq", f["b5"]], "b_q has 5 numbers but W_Q is 4×8 (one per column of W_Q)"),
        (["--bv", f["b23"]], "b_v must be a vector (one row or one column of numbers), got shape 2×3"),
        (["--bo", f["b2"]], "b_o is given but W_O is not (b_o is added after the output projection W_O)"),
        (
            ["--wq", f["w45"], "--wk", f["w45"], "--heads", 2],
            "W_Q is 4×5: d_attn = 5 does not split into 2 heads (the number of heads must divide d_attn)",
        ),
        (
            ["--wv", f["w45"], "--heads", 2],
            "W_V is 4×5: d_v = 5 does not split into 2 heads (the number of heads must divide d_v)",
        ),
        (["--heads", 3], "W_Q is 4×4: d_attn = 4 does not split into 3 heads (the number of heads must divide d_attn)"),
        (
            ["--mask", f["w44"]],
            (
                "the mask is 4×4 but each head's weights are 3×3 (queries × keys) "
                "(give a 3×3 mask, or 1×3 for every query)"
            ),
        ),
    ]
    for extra, message in cases:
        assert attn.fails("self", f["x"], *extra) == message, extra


def test_unknown_words(attn):
    assert attn.fails("self", "the pink elephnat") == "unknown word 'elephnat' (did you mean 'elephant'?)"
    assert attn.fails("self", "the cat", "--context", "qzxqzx sat").startswith("unknown word 'qzxqzx'")
    assert attn.fails("self", "...") == "no words in '...' (give a sentence or a matrix file)"


def test_bad_files(attn, files, tmp_path):
    assert attn.fails("self", tmp_path / "nope.csv") == f"{tmp_path}/nope.csv: no such file"
    assert attn.fails("self", files["x"], "--wq", tmp_path / "nope.npy") == f"{tmp_path}/nope.npy: no such file"
    (tmp_path / "bad.csv").write_text("1,2\n3,five\n")
    assert attn.fails("self", tmp_path / "bad.csv") == f"{tmp_path}/bad.csv:2: column 2: 'five' is not a number"
    (tmp_path / "b.yaml").write_text("x: [[1, 2]]\nwz: [[1, 2]]\n")
    assert attn.fails("self", tmp_path / "b.yaml") == (
        f"{tmp_path}/b.yaml: the bundle has an unexpected entry 'wz' "
        "(a bundle holds x and any of context, wq, wk, wv, wo, bq, bk, bv, bo, mask, bias)"
    )
    assert attn.fails("self", "the cat", "--vectors", tmp_path / "none.txt") == f"{tmp_path}/none.txt: no such file"
    (tmp_path / "empty.txt").write_text("")
    assert attn.fails("self", "the cat", "--vectors", tmp_path / "empty.txt").startswith(
        f"{tmp_path}/empty.txt: empty file, no word vectors"
    )
    np.save(tmp_path / "huge.npy", np.full((2, 4), 1e308))
    assert attn.fails("self", tmp_path / "huge.npy", "--wq", files["w44"], "--wk", files["w44"]) == (
        "the projections overflow: X, Z or the W hold numbers too large (scale the inputs down, or pass float64 data)"
    )


def test_usage_errors_exit_2(attn, files):
    f = files
    assert (
        attn.fails("self", f["x"], "--heads", 2, "--head", 2, code=2)
        == "--head 2 but there are 2 heads (heads are numbered from 0 to 1)"
    )
    assert (
        attn.fails("self", f["x"], "--wq", f["w45"], "--d-attn", 4, code=2)
        == "--d-attn 4 but W_Q is 4×5 (--d-attn sets the width of random projections only)"
    )
    assert (
        attn.fails("self", f["x"], "--vectors", f["x"], code=2)
        == "--vectors turns the words of a sentence into rows, but X and Z are files"
    )
    assert (
        attn.fails("self", "-", "--wq", "-", input="1,2\n", code=2)
        == "stdin ('-') is named more than once, but can be read only once (save all but one input to a file)"
    )
    assert attn.fails("self", f["x"], "--heads", 0, code=2).startswith("Invalid value for '--heads' / '-H'")


def test_maths_rejects_a_bad_head_count():
    from attncli.core.multihead import multi_head_attention
    from attncli.errors import UsageError

    with pytest.raises(UsageError, match="positive whole number, got 0"):
        multi_head_attention(np.eye(2), np.eye(2), np.eye(2), np.eye(2), n_head=0)


def test_help_has_examples(attn):
    result = attn("self", "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and "N(0, 1/d)" in result.stdout and "--columns" in result.stdout


@pytest.mark.parametrize(
    "options, scale, temperature",
    [
        (["--scale", "1"], 1.0, 1.0),  # seed 001: unscaled scores e_ij = q_i·k_j
        (["--temperature", "2"], None, 2.0),
        (["--scale", "0.5", "-t", "0.25"], 0.5, 0.25),
    ],
)
def test_attention_options_apply_to_every_head(attn, tmp_path, options, scale, temperature):
    p = problem(n_x=4, d_x=6, d_attn=6, d_v=6)
    args = save(tmp_path, **{name: p[name] for name in ("wq", "wk", "wv")})
    np.save(tmp_path / "x.npy", p["x"])
    out = attn.json("self", tmp_path / "x.npy", *args, "--heads", 2, *options)
    d_head = 3
    effective = (1 / math.sqrt(d_head) if scale is None else scale) / temperature
    weights, output = reference(p["x"], p["wq"], p["wk"], p["wv"], heads=2, scale=effective)
    np.testing.assert_allclose(out["weights"], weights, atol=TOL)
    np.testing.assert_allclose(out["output"], output, atol=TOL)
    assert out["scale"] == pytest.approx(1 / math.sqrt(d_head) if scale is None else scale)
    assert out["temperature"] == temperature


def test_cosine_similarity_in_self(attn, tmp_path):
    p = problem(n_x=4, d_x=6, d_attn=6, d_v=6)
    args = save(tmp_path, **{name: p[name] for name in ("wq", "wk", "wv")})
    np.save(tmp_path / "x.npy", p["x"])
    out = attn.json("self", tmp_path / "x.npy", *args, "--similarity", "cosine")
    q, k = p["x"] @ p["wq"], p["x"] @ p["wk"]
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    _, weights = attention_reference(unit(q), unit(k), p["x"] @ p["wv"], scale=1.0)
    assert out["similarity"] == "cosine" and out["scale"] == 1.0
    np.testing.assert_allclose(out["weights"][0], weights, atol=TOL)


def test_seed_001s_sentence_with_a_word_the_vectors_lack(attn):
    """'Zuko' is not in GloVe: an error naming it by default; --unknown skip leaves it out, zero makes it 0."""
    assert attn.fails("self", "Zuko made his uncle tea") == "unknown word 'Zuko' (did you mean 'yuko'?)"
    skipped, notes = attn.json_and_notes("self", "Zuko made his uncle tea", "--unknown", "skip")
    assert skipped["queries"] == ["made", "his", "uncle", "tea"]
    assert notes == [
        "unknown word 'Zuko' left out (not in the bundled GloVe 6B 50d table)",
        RANDOM,
    ]
    zeroed, notes = attn.json_and_notes("self", "Zuko made his uncle tea", "--unknown", "zero")
    assert zeroed["queries"] == ["Zuko", "made", "his", "uncle", "tea"]
    assert zeroed["q"][0] == [0] * 50 and zeroed["weights"][0][0] == [0.2] * 5  # a zero query: uniform weights
    assert notes == [
        "unknown word 'Zuko' given a vector of zeros (not in the bundled GloVe 6B 50d table)",
        RANDOM,
    ]
    assert attn.fails("self", "Zuko", "--unknown", "skip") == (
        "no word of 'Zuko' is in the bundled GloVe 6B 50d table (--unknown skip left them all out)"
    )
