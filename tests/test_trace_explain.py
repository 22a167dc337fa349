"""``attn trace --explain``: one token through one head of one layer of a model,
with the model's own numbers. On the tiny seeded models of tests/decoder_models.py
(GPT-2; Llama with grouped-query heads, biases and a head size ≠ d/H; Mistral's and
Qwen2's windows; RoPE scaling; a GGUF with llama.cpp's rows) and the tiny BERT of
tests/test_trace.py, and on the real SmolLM2 and MiniLM when present:

- every step agrees with the trace's own weights for that head (1e-6) and with the
  head's output the family computed (``HeadSteps.attended``, 1e-6);
- every step agrees with the models written once more in float64 (tests/decoder_models.py,
  tests/test_trace.py), float32 against float64 through up to two layers: 1e-4 relative."""

import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attncli.models import explain_head, load_model
from attncli.models.decoding import encode

import decoder_models as dm

sys.path.insert(0, str(Path(__file__).parent))
import test_trace  # noqa: E402  (the tiny BERT and its float64 reference)

TEXT = "The pink elephant tried to get into the car but it was too"
BERT_TEXT = "The pink elephant was too big it was"  # the tiny BERT knows few words and 12 positions
DECODERS = [
    "gpt2",
    "llama",
    "llama-gqa-bias",
    "mistral",
    "qwen2",
    "llama-llama3-scaling",
    "qwen2-yarn",
    "gemma",
    "gemma2",
]
UNSCALED = [name for name in DECODERS if "rope_scaling" not in dm.CASES[name]]  # the float64 reference has none
# (model, layer, head): GQA heads that read K/V head 1, Mistral's window on layer 0, Qwen2's on layer 1,
# Gemma 2's soft-capped scores on its sliding layer 0
CHOICES = {
    "gpt2": (1, 2),
    "llama": (0, 1),
    "llama-gqa-bias": (1, 3),
    "mistral": (0, 1),
    "qwen2": (1, 2),
    "llama-llama3-scaling": (1, 3),
    "qwen2-yarn": (0, 2),
    "gemma": (1, 3),  # one K/V head for all four
    "gemma2": (0, 2),  # the window and the soft-cap
    "llama-gguf": (1, 2),
    "bert": (1, 1),
}
TOL = 1e-6


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    tokenizer = dm.refs.train_tokenizer()
    root = tmp_path_factory.mktemp("trace-explain")
    out = {name: dm.refs.write_folder(root / name, name, tokenizer=tokenizer) for name in DECODERS}
    out["llama-gguf"] = dm.write_gguf(root / "llama.gguf", "llama", dm.refs.random_tensors("llama"), tokenizer)
    out["bert"] = test_trace.write_model(root / "bert")
    return out


@pytest.fixture(scope="module")
def models(folders):
    return {name: load_model(folder) for name, folder in folders.items()}


def text_of(name: str) -> str:
    return BERT_TEXT if name == "bert" else TEXT


def run(attn, folders, name, *more):
    layer, head = CHOICES[name]
    args = ["trace", text_of(name), "-m", folders[name], "--layer", layer, "--head", head, "--query", "it", *more]
    return attn.json(*args, "--explain")


def ids_of(model, name: str) -> list[int]:
    if name == "bert":
        return test_trace.tokenize(model, [BERT_TEXT]).ids[0].tolist()
    return encode(model, TEXT)[0]


@pytest.mark.parametrize("name", list(CHOICES))
def test_the_explained_weights_are_the_traces_row(attn, folders, name):
    out = run(attn, folders, name)
    e = out["explain"]
    row = np.array(out["weights"][0][0][0], dtype=float)  # the trace's row for the query: null where forbidden
    assert (e["layer"], e["head"]) == CHOICES[name] and out["queries"] == [e["position"]]
    assert e["query"].strip() == "it" and e["tokens"] == out["tokens"]
    forbidden = np.isnan(row)
    assert [x is None for x in e["logits"]] == forbidden.tolist()  # the mask: causal, and a window where one is
    np.testing.assert_allclose(e["weights"], np.nan_to_num(row), atol=TOL)
    weights, v = np.array(e["weights"]), np.array(e["v"])
    np.testing.assert_allclose(e["output"], weights @ v, atol=TOL)  # Σ α_j v_j
    q, k = np.array(e["q"]), np.array(e["k"])
    np.testing.assert_allclose(e["scores"], k @ q, rtol=1e-5, atol=1e-5)  # q·k_j, of the rows as used
    scaled = np.array(e["scores"]) * e["scale"]
    cap = next(g for g in out["attention"] if e["layer"] in g["layers"]).get("softcap")  # Gemma 2's
    if cap is not None:
        scaled = cap * np.tanh(scaled / cap)
    np.testing.assert_allclose([x for x in e["logits"] if x is not None], scaled[~forbidden], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e["projected"], np.array(e["output"]) @ np.array(e["w_o"]), rtol=1e-5, atol=1e-6)
    assert len(e["x"]) == len(e["projected"]) == np.array(e["w_o"]).shape[1]  # d_model


def test_a_window_is_the_mask_of_the_querys_row(attn, folders):
    """Mistral's sliding_window 4 (attn's window 3,0): ' it' sees itself and the 3 tokens before."""
    e = run(attn, folders, "mistral")["explain"]
    i = e["position"]
    assert [j for j, x in enumerate(e["logits"]) if x is not None] == list(range(i - 3, i + 1))


@pytest.mark.parametrize("name", [*UNSCALED, "bert"])
def test_every_step_is_the_float64_models(models, folders, name):
    """x after the layer's norm, q and every k (after RoPE), v, the weights, the head's
    output and what it adds through its rows of W_O, against the models written again in float64."""
    model = models[name]
    layer, head = CHOICES[name]
    ids = ids_of(model, name)
    i = ids.index(next(t for t in ids if model.tokenizer.decode([t]).strip() == "it"))
    h = explain_head(model, ids, layer, head, i)
    seen: dict = {}
    if name == "bert":
        _, weights = test_trace.reference_forward(folders["bert"], ids, seen)
    else:
        weights, _ = dm.reference_forward(name, dm.refs.random_tensors(name), np.asarray(ids), seen)
    s = seen[layer]
    g = head // (len(s["q"]) // len(s["k"]))
    assert h.kv_head == g

    def close(got, want):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    close(h.x[i], s["x"][i])
    close(h.q_used, s["q"][head][i])
    close(h.k_used, s["k"][g])
    close(h.v, s["v"][g])
    close(h.steps.weights[0], weights[layer, head, i])
    close(h.attended, s["out"][head][i])
    close(h.projected, s["out"][head][i] @ s["w_o"][head * h.d_v : (head + 1) * h.d_v])


@pytest.mark.parametrize("name", list(CHOICES))
def test_the_output_is_the_heads_own_and_q_is_x_times_its_columns(models, name):
    """Σ α v from the explained row equals the head's output the family's pass computed, and the
    head's columns of W_Q, W_K, W_V (GPT-2's c_attn cut in three) give its q, k, v from x."""
    model = models[name]
    layer, head = CHOICES[name]
    ids = ids_of(model, name)
    for i in (0, len(ids) // 2, len(ids) - 1):
        h = explain_head(model, ids, layer, head, i)
        np.testing.assert_allclose(h.steps.output[0], h.attended, atol=TOL)
        for linear, got in ((h.w_q, h.q), (h.w_k, h.k), (h.w_v, h.v)):
            want = h.x @ linear.w + (0 if linear.b is None else linear.b)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_with_generated_tokens(attn, folders):
    """--generate: the explained token may be one the model wrote; the same numbers as its trace row."""
    out = attn.json(
        "trace",
        "The pink",
        "-m",
        folders["gpt2"],
        "--generate",
        3,
        "--layer",
        0,
        "--head",
        1,
        "--query",
        -1,
        "--explain",
    )
    e = out["explain"]
    assert e["position"] == len(out["tokens"]) - 1 and len(out["generated"]) == 3
    np.testing.assert_allclose(e["weights"], out["weights"][0][0][0], atol=TOL)


def test_the_view_walks_the_token_through_the_head(attn, folders):
    layer, head = CHOICES["llama-gqa-bias"]
    args = ["trace", TEXT, "-m", folders["llama-gqa-bias"], "--layer", layer, "--head", head, "--query", "it"]
    e = attn.json(*args, "--explain")["explain"]
    i, n, token = e["position"], len(e["tokens"]), e["query"]
    result = attn(*args, "--explain", "-f", "table")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    steps = [
        f"trace, step by step: {token!r} (token {i}) through layer {layer} · head {head}",
        "x = the residual stream after RMSNorm (input_layernorm)",
        f"causal (bottom-right) · {n - 1 - i} of {n} pairs masked",
        "grouped-query attention: query head 3 reads K/V head 1 of 2, which heads 2, 3 share",
        "1. The input row",
        "x of it = [",
        "2. Projections: q = x W_Q + b_q",
        "W_Q is 32×64, W_K and W_V 32×32 (2 K/V heads). Head 3 uses columns 48 to 63 of W_Q; the K/V head it "
        "reads, 1 (shared by heads 2, 3), columns 16 to 31 of W_K and W_V.",
        "q_it[0] = ",
        "(bias) = ",
        f"K: a key per token, {n}×16",
        "3. RoPE (neox): Q and K rotated by position",
        "4. Scores: e_ij = q_i · k_j",
        "Each key's score for it, with its 3 biggest terms (the features that made it high or low)",
        f"the 8 highest of the {i + 1} keys it may see:",  # past 16 keys: those it may see, not the future's
        "it · elephant = ",
        "5. Scaled scores",
        "6. Mask",
        f"The mask forbids {n - 1 - i} of {n} query–key pairs",
        "7. Weights: softmax of each row",
        "8. Output: weights · V",
        "9. What the head adds: o W_O",
        "Head 3's 16 numbers meet rows 48 to 63 of it",
        "added_it[0] = ",
        f"next token after {token!r} (token {i}):",
    ]
    positions = [text.index(step) for step in steps]
    assert positions == sorted(positions)
    assert "(masked)" not in text


def test_a_masked_keys_score_is_said_masked(attn, folders):
    result = attn("trace", "The car", "-m", folders["gpt2"], "--layer", 0, "--head", 0, "--query", "The", "--explain")
    e = json.loads(result.stdout)["explain"]
    assert len(e["tokens"]) <= 16 and e["position"] == 0
    view = attn("trace", "The car", "-m", folders["gpt2"], "--layer", 0, "--head", 0, "--query", "The", "--explain",
                "-f", "table")  # fmt: skip
    lines = [line for line in view.stdout.splitlines() if re.match(r"The · \S+ = \S+( \(masked\))?: d", line)]
    assert len(lines) == len(e["tokens"])
    assert (
        [("(masked)" in line) for line in lines]
        == [x is None for x in e["logits"]]
        == [False] + [True] * (len(lines) - 1)
    )


def test_the_view_of_an_encoder(attn, folders):
    result = attn(
        "trace",
        BERT_TEXT,
        "-m",
        folders["bert"],
        "--layer",
        1,
        "--head",
        1,
        "--query",
        "it",
        "--explain",
        "-f",
        "table",
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "x is what layer 1's projections read: the layer's input, already normalised" in text
    assert "W_Q, W_K and W_V are 8×8 each. Head 1 uses their columns 4 to 7." in text
    assert "Mask" not in text and "grouped-query" not in text  # an encoder's one text: every pair allowed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--head", 0, "--query", "it"], "it needs one --layer L"),
        (["--layer", 0, "--head", 0, "--head", 1, "--query", "it"], "it needs one --head H (2 given)"),
        (["--layer", 0, "--head", 0], "it needs --query TOKEN"),
        ([], "it needs one --layer L, one --head H and --query TOKEN"),
    ],
)
def test_explain_needs_one_layer_head_and_query(attn, folders, args, message):
    got = attn.fails("trace", TEXT, "-m", folders["gpt2"], *args, "--explain", code=2)
    assert got == (
        f"--explain walks one token through one head of one layer: {message} "
        "(e.g. --layer 9 --head 4 --query it --explain)"
    )


# --- the real models, when present ------------------------------------------------------------

SMOLLM2 = os.environ.get("ATTN_TEST_GGUF")
MINILM = os.environ.get("ATTN_TEST_MODEL")
SEED = "The pink elephant tried to get into the car but it was too"
REAL = [
    pytest.param(SMOLLM2, 9, 4, marks=pytest.mark.skipif(not SMOLLM2, reason="set ATTN_TEST_GGUF"), id="smollm2"),
    pytest.param(MINILM, 5, 11, marks=pytest.mark.skipif(not MINILM, reason="set ATTN_TEST_MODEL"), id="minilm"),
]


@pytest.mark.parametrize(("path", "layer", "head"), REAL)
def test_real_models_agree_with_their_trace(attn, path, layer, head):
    pytest.importorskip("gguf")
    text = SEED if path == SMOLLM2 else SEED + " big"
    out = attn.json("trace", text, "-m", path, "--layer", layer, "--head", head, "--query", "it", "--explain")
    e = out["explain"]
    np.testing.assert_allclose(e["weights"], np.nan_to_num(np.array(out["weights"][0][0][0], dtype=float)), atol=TOL)
    model = load_model(path)
    ids = encode(model, text)[0] if path == SMOLLM2 else test_trace.tokenize(model, [text]).ids[0].tolist()
    h = explain_head(model, ids, layer, head, e["position"])
    np.testing.assert_allclose(h.steps.output[0], h.attended, atol=TOL)
    np.testing.assert_allclose(e["output"], h.attended, atol=TOL)
    assert math.isclose(e["scale"], 1 / math.sqrt(len(e["q"])))


def test_what_sets_the_heaviest_key_apart(attn, samples):
    """Softmax weighs only differences: the heaviest key's score against the mean of the keys the
    query may see, split by feature, q_d (k_d − mean k_d), the largest three named (explain's score
    step, which trace --explain and self --explain share)."""
    out = attn.json("explain", samples / "colors.yaml", "--window", "5,0")
    i, k = out["query_index"], np.array(out["k"])
    q = np.array(out["q"][i])
    weights = np.array(out["weights"][i])
    seen = np.flatnonzero(np.array(out["allowed"][i]))
    top = seen[np.argmax(weights[seen])]
    scores = k[seen] @ q
    parts = q * (k[top] - k[seen].mean(axis=0))
    assert math.isclose(parts.sum(), k[top] @ q - scores.mean(), abs_tol=1e-12)
    names = ["red", "green", "blue"]  # Q's and K's columns in the sample
    named = ", ".join(f"{names[d]} {parts[d]:+.3f}" for d in np.argsort(-np.abs(parts))[:3])
    result = attn("explain", samples / "colors.yaml", "--window", "5,0", "-f", "table")
    assert result.exit_code == 0, result.output
    assert (
        f"Softmax weighs only how scores differ: {out['keys'][top]}, the heaviest key, scores "
        f"{k[top] @ q - scores.mean():.3f} above the mean of the {len(seen)} keys {out['query']} may see "
        f"({scores.mean():.3f}); the features that set it apart, q_d × (k_d − the keys' mean k_d): {named}."
    ) in " ".join(result.stdout.split())
