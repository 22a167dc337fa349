"""``attn self --explain`` (one token through one head, every step with the
real numbers) and ``self``'s unscaled scores (seed 001's e_ij), against the
maths written out here and the plain reference of tests/reference.py."""

import io
import math

import numpy as np
import pytest
from test_self import problem, save

from reference import multi_head as reference
from reference import rotate

TOL = 1e-9


def explained(attn, tmp_path, p, *args, random=False):
    np.save(tmp_path / "x.npy", p["x"])
    return attn.json("self", tmp_path / "x.npy", *save(tmp_path, **p), "--explain", *args, random=random)


@pytest.mark.parametrize(("heads", "head", "query"), [(1, 0, 0), (3, 2, 1), (3, 1, 3)])
def test_every_step_of_one_token_in_one_head(attn, tmp_path, heads, head, query):
    p = problem(d_attn=6, d_v=9, d_out=4, biases=True)
    out = explained(attn, tmp_path, p, "--heads", heads, "--head", head, "--query", query)
    e = out["explain"]
    qk, vc = slice(head * 6 // heads, (head + 1) * 6 // heads), slice(head * 9 // heads, (head + 1) * 9 // heads)
    q = (p["x"] @ p["wq"] + p["bq"])[:, qk]
    k = (p["x"] @ p["wk"] + p["bk"])[:, qk]
    v = (p["x"] @ p["wv"] + p["bv"])[:, vc]
    scores = q[query] @ k.T  # unscaled e_ij
    scale = 1 / math.sqrt(q.shape[1])
    weights = np.exp(scores * scale - (scores * scale).max())
    weights /= weights.sum()
    assert (e["query_index"], e["head"], e["query"]) == (query, head, f"x{query}")
    np.testing.assert_allclose(e["x"], p["x"][query], atol=TOL)
    np.testing.assert_allclose(e["q"], q[query], atol=TOL)
    np.testing.assert_allclose(e["k"], k, atol=TOL)
    np.testing.assert_allclose(e["v"], v, atol=TOL)
    np.testing.assert_allclose(e["scores"], scores, atol=TOL)
    assert e["scale"] == pytest.approx(scale)
    np.testing.assert_allclose(e["logits"], scores * scale, atol=TOL)
    np.testing.assert_allclose(e["weights"], weights, atol=TOL)
    np.testing.assert_allclose(e["output"], weights @ v, atol=TOL)
    all_weights, output = reference(**{n: p[n] for n in p if n != "x"}, x=p["x"], heads=heads)
    np.testing.assert_allclose(e["weights"], all_weights[head, query], atol=TOL)  # and the reference agrees
    np.testing.assert_allclose(e["projected"], output[query], atol=TOL)
    np.testing.assert_allclose(e["w_o"], p["wo"], atol=TOL)
    np.testing.assert_allclose(e["merged"] @ p["wo"] + p["bo"], output[query], atol=TOL)
    np.testing.assert_allclose(out["weights"], all_weights, atol=TOL)  # the rest of the JSON as without --explain


def test_rope_rotates_q_and_k_before_the_scores(attn, tmp_path):
    p = problem(d_attn=8, d_v=4)
    e = explained(attn, tmp_path, p, "--heads", 2, "--head", 1, "--query", 2, "--rope", "neox")["explain"]
    q = (p["x"] @ p["wq"])[:, 4:]
    k = (p["x"] @ p["wk"])[:, 4:]
    q_rot = rotate(q[2], 2, "neox")
    k_rot = np.array([rotate(row, j, "neox") for j, row in enumerate(k)])
    np.testing.assert_allclose(e["q"], q_rot, atol=TOL)  # rows as used: after RoPE
    np.testing.assert_allclose(e["k"], k_rot, atol=TOL)
    np.testing.assert_allclose(e["scores"], k_rot @ q_rot, atol=TOL)


def test_masked_keys_are_null_logits_and_zero_weights(attn, tmp_path):
    e = explained(attn, tmp_path, problem(), "--causal", "--query", 1)["explain"]
    assert e["logits"][2:] == [None, None] and e["weights"][2:] == [0, 0]


def test_the_view_walks_one_token_through_the_head(attn, samples):
    result = attn("self", samples / "three_spaces.yaml", "--explain", "--query", "like", "-f", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    steps = [
        "self-attention, step by step, for like in one head",
        "Seed 004's three spaces, with made-up weights",
        "1. The input rows",
        "2. Projections: q = x W_Q + b_q, k = z W_K + b_k, v = z W_V + b_v",
        "q_like[0] = 0.100 × 2.000 + 0.900 × 0.000 + 0.300 × 1.000 + 0.100 (bias) = 0.600",
        "k_I[0] = 1.000 × 1.000 + 0.200 × 2.000 + (-0.500) × 0.000 + 0.000 (bias) = 1.400",
        "3. Scores: e_ij = q_i · k_j",
        "like · apples = 2.670: d1 1.500 × 1.700 = 2.550, d0 0.600 × 0.200 = 0.120",  # what made it high
        "4. Scaled scores",
        "5. Weights: softmax of each row",
        "6. Output: weights · V",
        "7. The output",
        "The head's output is the output: there is no W_O.",
    ]
    positions = [text.index(step) for step in steps]
    assert positions == sorted(positions)
    assert "random" not in text  # every weight is given


def test_random_projections_are_said_in_the_walk_and_the_output_projection_written(attn, tmp_path):
    p = problem(d_attn=6, d_v=6, d_out=2, biases=True)
    del p["wq"], p["wk"], p["wv"]
    np.save(tmp_path / "x.npy", p["x"])
    result = attn("self", tmp_path / "x.npy", *save(tmp_path, **p), "--explain", "--heads", 2, "-f", "table")
    assert result.exit_code == 0, result.output
    assert "W_Q, W_K, W_V are random (seed 0): these numbers show the steps, the pattern means nothing" in (
        result.stdout.replace("\n", " ")
    )
    assert "Output projection: concat(heads) W_O + b_o" in result.stdout
    assert "output_x0[0] = " in result.stdout


def test_query_needs_explain_and_names_a_token(attn, samples):
    assert attn.fails("self", samples / "three_spaces.yaml", "--query", "like", code=2) == (
        "--query picks the token --explain walks through (add --explain)"
    )
    assert attn.fails("self", samples / "three_spaces.yaml", "--explain", "--query", "pears", code=2) == (
        "--query pears: no such query (X has rows 0 to 2; give a number or a label)"
    )


def test_seed_001s_unscaled_scores_in_one_command(attn, tmp_path):
    """e_ij = q_iᵀ k_j: --emit scores, and scores in the JSON, before the scale."""
    p = problem(d_attn=4, d_v=4)
    np.save(tmp_path / "x.npy", p["x"])
    args = ("self", tmp_path / "x.npy", *save(tmp_path, **p), "--heads", 2)
    q, k = p["x"] @ p["wq"], p["x"] @ p["wk"]
    want = np.stack([q[:, :2] @ k[:, :2].T, q[:, 2:] @ k[:, 2:].T])
    np.testing.assert_allclose(attn.json(*args)["scores"], want, atol=TOL)
    result = attn(*args, "-f", "npy", "--emit", "scores")
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(io.BytesIO(result.stdout_bytes)), want, atol=TOL)
    one = attn(*args, "--head", 1, "-f", "csv", "--emit", "scores").stdout.splitlines()
    assert len(one) == 4 and [float(x) for x in one[0].split(",")] == pytest.approx(want[1, 0])
