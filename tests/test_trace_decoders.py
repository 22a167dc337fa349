"""``attn trace`` on decoders (and what it shares with encoders): the tiny seeded models
of tests/decoder_models.py from the command line. What a decoder trace shows and writes
(forbidden pairs, the header, the next-token prediction, --generate, --hide-special's
beginning-of-sequence token), what it keeps (only the selection), --query's others'
mean, --summary and --aggregate, each checked against numbers worked out here from the
whole weights (the float64 reference of the models is tests/test_decoders.py's)."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attncli.models import Selection, decode, decoder, generate, load_model, trace

import decoder_models as dm

sys.path.insert(0, str(Path(__file__).parent))
from test_trace import write_model  # noqa: E402  (the tiny BERT)

TEXT = "The pink elephant tried to get into the car but it was too"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    tokenizer = dm.refs.train_tokenizer()
    root = tmp_path_factory.mktemp("trace-decoders")
    out = {name: dm.refs.write_folder(root / name, name, tokenizer=tokenizer) for name in ("gpt2", "mistral", "qwen2")}
    out["bos"] = dm.write_gguf(root / "bos.gguf", "gpt2", dm.refs.random_tensors("gpt2"), tokenizer, add_bos=True)
    out["bert"] = write_model(root / "bert")
    return out


@pytest.fixture(scope="module")
def models(folders):
    return {name: load_model(folder) for name, folder in folders.items()}


def weights_of(out) -> np.ndarray:
    """JSON weights with null (a forbidden pair) as NaN."""
    return np.array(out["weights"], dtype=float)


def band(n: int, window: int | None = None) -> np.ndarray:
    """Where query i may attend: keys j ≤ i, and i − j ≤ window."""
    i, j = np.indices((n, n))
    return (j <= i) & (True if window is None else i - j <= window)


# --- what a decoder trace writes ---------------------------------------------------------------


def test_json_holds_the_model_its_attention_and_null_where_a_pair_is_forbidden(attn, folders, models):
    out = attn.json("trace", TEXT, "-m", folders["qwen2"])
    d = decode(models["qwen2"], TEXT)
    n = len(d.ids)
    assert out["model"] == {
        "name": str(folders["qwen2"]),
        "family": "Qwen2",
        "kind": "decoder",
        "layers": 2,
        "heads": 4,
        "kv_heads": 2,
        "d_model": 32,
        "window": [2, 0],  # attn's window: sliding_window 3 sees itself and 2 before
        "window_layers": [1],
        "rope_theta": 1e6,
    }
    assert [group["layers"] for group in out["attention"]] == [[0], [1]]
    assert out["attention"][1]["window"] == [2, 0] and "window" not in out["attention"][0]
    assert out["attention"][0]["causal"] == "bottom-right" and out["attention"][0]["rope"]["theta"] == 1e6
    assert out["tokens"] == d.tokens and " elephant" in out["tokens"] and out["queries"] == list(range(n))
    w = weights_of(out)
    assert w.shape == (2, 4, n, n)
    assert (np.isnan(w[0]) == ~band(n)).all() and (np.isnan(w[1]) == ~band(n, 2)).all()  # null exactly there
    np.testing.assert_allclose(np.nan_to_num(w), d.weights, rtol=1e-6)


def test_the_next_token_at_the_end_and_at_the_query(attn, folders, models):
    out = attn.json("trace", TEXT, "-m", folders["gpt2"], "--query", "elephant", "--top-next", "3")
    d = decode(models["gpt2"], TEXT, top_next=3, predict=(-1, out["queries"][0]))
    n = len(d.ids)
    assert out["tokens"][out["queries"][0]] == " elephant"  # the decoder's token starts with a space
    assert attn.json("trace", TEXT, "-m", folders["gpt2"], "-q", "ELEPHANT", "-l", "0")["queries"] == out["queries"]
    for name, p in (("next", d.next[0]), ("next_at_query", d.next[1])):
        assert out[name]["position"] == p.position and out[name]["tokens"] == p.tokens and out[name]["ids"] == p.ids
        np.testing.assert_allclose(out[name]["probabilities"], p.probabilities, rtol=1e-9)
    assert out["next"]["position"] == n - 1 and len(out["next"]["tokens"]) == 3
    plain = attn.json("trace", TEXT, "-m", folders["gpt2"], "--layer", "0")
    assert len(plain["next"]["tokens"]) == 5 and "next_at_query" not in plain  # 5 by default
    assert "next" not in attn.json("trace", TEXT, "-m", folders["gpt2"], "--layer", "0", "--top-next", "0")


def test_generate_appends_greedy_tokens_and_traces_them(attn, folders, models):
    out = attn.json("trace", "The pink elephant", "-m", folders["mistral"], "--generate", "4", "--layer", "1")
    g = generate(models["mistral"], "The pink elephant", 4, Selection(layers=(1,)))
    assert out["generated"] == [g.tokens[i] for i in range(g.prompt_length, len(g.ids))] and len(out["generated"]) == 4
    assert out["tokens"] == g.tokens and out["tokens"][-4:] == out["generated"]
    np.testing.assert_allclose(np.nan_to_num(weights_of(out)), g.weights, rtol=1e-6)
    assert out["next"]["position"] == len(g.ids) - 1


def test_hide_special_hides_the_beginning_of_sequence_token(attn, folders):
    whole = attn.json("trace", "The car", "-m", folders["bos"])
    assert whole["tokens"][0] == "<|endoftext|>"
    hidden = attn.json("trace", "The car", "-m", folders["bos"], "--hide-special")
    assert hidden["tokens"] == whole["tokens"][1:]
    w, all_w = weights_of(hidden), weights_of(whole)
    np.testing.assert_array_equal(np.nan_to_num(w), np.nan_to_num(all_w[:, :, 1:, 1:]))
    assert (np.nansum(w, axis=-1) < 1).all()  # the weight on the hidden token is not given back
    assert hidden["next"]["position"] == len(hidden["tokens"]) - 1  # positions in the tokens shown


def test_a_decoder_keeps_only_the_row_of_the_query(attn, folders, monkeypatch):
    """Every weight of the text would not fit; the query's row of every layer and head does."""
    text = "The pink elephant tried to get into the car but it was too big"
    n = len(load_model(folders["gpt2"]).tokenizer.encode(text).ids)
    monkeypatch.setattr(decoder, "KEPT_BYTES", 2 * 4 * n * 4 * 2)  # two rows of every head: not all n
    out = attn.json("trace", text, "-m", folders["gpt2"], "--query", "it")
    assert weights_of(out).shape == (2, 4, 1, n)
    assert "summary" in attn.json("trace", text, "-m", folders["gpt2"], "--summary")  # no weights kept at all
    assert attn.fails("trace", text, "-m", folders["gpt2"]) == (
        f"keeping the weights of 2 layers × 4 heads × {n} queries × {n} keys needs 0.0 GiB "
        "(show fewer with --layer L, --head H or --query WORD, or use --summary)"
    )


def test_the_others_mean_is_the_mean_of_the_other_queries_that_may_see_each_key(attn, folders, models):
    out = attn.json("trace", TEXT, "-m", folders["mistral"], "--query", "elephant")
    q = out["queries"][0]
    whole = decode(models["mistral"], TEXT).weights.astype(np.float64)  # [2, 4, n, n]
    n = whole.shape[-1]
    seen = band(n, 3)  # mistral's window 3,0 on both layers
    others = np.full((2, 4, n), np.nan)
    for k in range(n):
        who = [i for i in range(n) if i != q and seen[i, k]]
        if who:
            others[:, :, k] = whole[:, :, who, k].mean(-1)
    np.testing.assert_allclose(np.array(out["others"], dtype=float), others, rtol=1e-5, equal_nan=True)


def test_csv_of_one_decoder_head_writes_the_forbidden_pairs_as_0(attn, folders):
    result = attn("trace", "The car", "-m", folders["gpt2"], "-l", "0", "--head", "1", "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = [line.split(",")[1:] for line in result.stdout.splitlines()[1:]]
    assert [float(x) for x in rows[0][1:]] == [0] * (len(rows) - 1)  # the first query sees only itself


# --- on a terminal: forbidden is not 0 -----------------------------------------------------------


def test_every_view_draws_a_forbidden_pair_as_forbidden(attn, folders):
    def table(*extra):
        result = attn("trace", "The car", "-m", folders["gpt2"], "-f", "table", "-l", "0", "--head", "1", *extra)
        assert result.exit_code == 0, result.output
        return result.stdout

    numbers = table("--view", "numbers")
    first = next(line for line in numbers.splitlines() if line.startswith("The "))
    assert re.fullmatch(r"The\s+│\s+1\.00\s+│\s+–\s*", first), first  # a dash, not 0.00
    assert "0.00" not in first
    result = attn(
        "trace",
        "The car",
        "-m",
        folders["gpt2"],
        "-f",
        "table",
        "-l",
        "0",
        "--head",
        "1",
        "--view",
        "compact",
        env={"NO_COLOR": "1"},
    )
    first = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("The ")][0]
    assert (
        first == "The ███···"
    )  # three characters a cell  # without colour a forbidden cell is a dot, a weight a shade
    top = table("--top", "3")
    first = next(line for line in top.splitlines() if line.startswith("The "))
    assert "The 1.00" in first and "0.00" not in first  # a forbidden key is never ranked
    header = table()
    assert "GPT-2, 2 layers × 4 heads, d_model 32" in header and "a pair causal attention" in header
    assert "every layer: scale 0.353553 · causal (bottom-right)" in header


def test_the_header_says_gqa_the_window_and_rope_theta_with_their_fields(attn, folders):
    result = attn("trace", TEXT, "-m", folders["qwen2"], "-f", "table", "-l", "1", "--head", "0")
    text = " ".join(result.stdout.split())
    assert "Qwen2, 2 layers × 4 heads (GQA: 4 query heads / 2 key-value heads), d_model 32" in text
    assert "layer 0: scale 0.353553 · RoPE neox (θ 1e+06) · causal (bottom-right)" in text
    assert "layer 1: scale 0.353553 · RoPE neox (θ 1e+06) · window 2,0 · causal (bottom-right)" in text
    assert "window from sliding_window 3; layer 1 ≥ max_window_layers 1, use_sliding_window" in text
    assert "next token after ' too' (token" in text


def test_pictures_hold_where_the_pairs_are_forbidden(folders, models):
    from attncli.cli.trace_result import trace_result
    from attncli.cli.trace_run import TraceRequest, run_trace
    from attncli.output.headview import page_data
    from attncli.output.heatmap import ViewStyle

    traced = run_trace(models["mistral"], TEXT, TraceRequest(layers=(1,)))
    maps = trace_result(traced, explicit=True, precision=2, style=ViewStyle()).maps()
    n = len(traced.tokens)
    assert maps.allowed.shape == (1, 4, n, n) and (maps.allowed[0, 2] == band(n, 3)).all()
    import base64

    data = np.frombuffer(base64.b64decode(page_data(maps)["weights"]), dtype="<f4").reshape(1, 4, n, n)
    assert (np.isnan(data) == ~band(n, 3)).all()  # the page's numbers leave them out (test_headview: browser)


# --- summaries and aggregates ---------------------------------------------------------------------


def summaries_of(w: np.ndarray) -> dict[str, np.ndarray]:
    """The four head summaries from whole weights [L, H, n, n], each row after the first."""
    w = w[:, :, 1:].astype(np.float64)
    n = w.shape[-1]
    logs = np.log(np.where(w > 0, w, 1))
    return {
        "entropy": -(w * logs).sum(-1).mean(-1),
        "largest": w.max(-1).mean(-1),
        "first": w[..., 0].mean(-1),
        "previous": np.array([w[..., i - 1, i - 1] for i in range(1, n)]).mean(0),
    }


@pytest.mark.parametrize("name", ["qwen2", "bert"])
def test_summary_of_an_encoder_and_a_decoder(attn, folders, models, name):
    text = "the pink elephant was too big"
    out = attn.json("trace", text, "-m", folders[name], "--summary", "--layer", "1", "--head", "1", "--head", "0")
    whole = trace(models[name], text).weights  # [2, 4 or 2, n, n]
    expected = summaries_of(whole)
    assert out["summary"]["queries"] == whole.shape[-1] - 1 and "weights" not in out
    for key, values in expected.items():
        np.testing.assert_allclose(out["summary"][key], values[np.ix_([1], [1, 0])], atol=1e-5)
    result = attn("trace", text, "-m", folders[name], "--summary", "-f", "table")
    for title in ("entropy of each row", "the largest weight", "the share on the first token", "the token just before"):
        assert title in result.stdout


def test_the_logit_lens_in_json_and_on_the_terminal(attn, folders, models):
    """--lens: per layer shown and token, the three likeliest next tokens of the layer's output
    (decode's lens); the table names each cell's first; with --generate, every token's."""
    out = attn.json("trace", TEXT, "-m", folders["gpt2"], "--lens", "--layer", "-1", "--layer", "0")
    d = decode(models["gpt2"], TEXT, Selection.nothing(), lens=3)
    assert d.lens is not None and "weights" not in out and out["layers"] == [1, 0]
    lens = out["lens"]
    assert np.array_equal(lens["ids"], d.lens.ids[[1, 0]])
    np.testing.assert_allclose(lens["probabilities"], d.lens.probabilities[[1, 0]], rtol=1e-12)
    spell = models["gpt2"].tokenizer.decode
    assert lens["tokens"][0][-1] == [spell([i], skip_special_tokens=False) for i in d.lens.ids[1, -1]]
    assert lens["ids"][0][-1] == out["next"]["ids"][:3]  # the last layer's reading is the model's prediction
    shown = attn("trace", TEXT, "-m", folders["gpt2"], "--lens", "-f", "table", env={"COLUMNS": "400"}).stdout
    assert "the logit lens: the likeliest next token after each token" in shown
    first = spell([int(d.lens.ids[1, 0, 0])], skip_special_tokens=False).replace(" ", "␣")
    assert re.search(r"layer 1 +│ +" + re.escape(first) + " ", shown), shown
    g = attn.json("trace", "The pink elephant", "-m", folders["mistral"], "--lens", "--generate", "3")
    assert len(g["lens"]["ids"][0]) == len(g["tokens"]) and len(g["generated"]) == 3


def rollout_of(w: np.ndarray) -> np.ndarray:
    """Abnar & Zuidema's rollout, written out: [L, H, n, n] -> [L, n, n]."""
    flow, out = np.eye(w.shape[-1]), []
    for layer in w.astype(np.float64):
        a = 0.5 * layer.mean(0) + 0.5 * np.eye(w.shape[-1])
        a = a / a.sum(-1, keepdims=True)
        flow = a @ flow
        out.append(flow)
    return np.array(out)


@pytest.mark.parametrize("name", ["mistral", "bert"])
def test_aggregates_over_heads_and_rollout_through_layers(attn, folders, models, name):
    text = "the pink elephant was too big"
    whole = trace(models[name], text).weights
    for how, expected in (
        ("mean", whole.mean(1)),
        ("max", whole.max(1)),
        ("rollout", rollout_of(whole)),
    ):
        out = attn.json("trace", text, "-m", folders[name], "--aggregate", how)
        assert out["aggregate"] == how and out["heads"] == list(range(whole.shape[1]))
        w = weights_of(out)
        assert w.shape == (2, 1, *whole.shape[-2:])
        np.testing.assert_allclose(np.nan_to_num(w[:, 0]), expected, atol=1e-6)
        if name == "mistral":  # window 3,0 in both layers: rollout reaches 6 back after two
            n = whole.shape[-1]
            reach = band(n, 3) if how != "rollout" else band(n, 6)
            assert (np.isnan(w[1, 0]) == ~reach).all()
    one = attn.json("trace", text, "-m", folders[name], "--aggregate", "rollout", "--layer", "0", "--query", "2")
    np.testing.assert_allclose(np.nan_to_num(weights_of(one))[0, 0, 0], rollout_of(whole[:1])[0, 2], atol=1e-6)


# --- errors --------------------------------------------------------------------------------------


def test_usage_errors_of_decoder_options(attn, folders):
    bert, gpt2 = folders["bert"], folders["gpt2"]
    assert attn.fails("trace", "the car", "-m", bert, "--generate", "2", code=2) == (
        "--generate: BERT is an encoder, which predicts no next token "
        "(generate with a decoder: GPT-2, Llama, Mistral, Qwen2, Gemma, Gemma 2, Gemma 3)"
    )
    assert attn.fails("trace", "the car", "-m", gpt2, "--summary", "--query", "car", code=2) == (
        "--summary summarises every query of every head; --query shows weights (give one of them)"
    )
    assert attn.fails("trace", "The car", "-m", gpt2, "--query", "bus", code=2) == (
        "--query 'bus' is not a token of the text (its tokens: The ' car')"
    )
    assert attn.fails("trace", "The car" * 20, "-m", gpt2, code=1) == (
        "the text is 40 tokens but the model takes at most 32 (shorten it)"
    )
    assert attn.fails("trace", "The car" * 10, "-m", gpt2, "--generate", "13") == (
        "the text is 20 tokens and 13 more to generate but the model takes at most 32 (shorten it or generate fewer)"
    )


def test_a_query_among_the_generated_tokens(attn, folders, models):
    g = generate(models["gpt2"], "The car", 3)
    word = g.tokens[-1]
    if word.strip() and word not in g.tokens[: g.prompt_length]:
        out = attn.json("trace", "The car", "-m", folders["gpt2"], "--generate", "3", "--query", word)
        assert out["queries"] == [g.tokens.index(word)]  # found after the pass, its row kept
    out = attn.json("trace", "The car", "-m", folders["gpt2"], "--generate", "3", "--query", "-1", "--layer", "0")
    assert out["queries"] == [len(g.ids) - 1] and weights_of(out).shape == (1, 4, 1, len(g.ids))


def test_the_others_mean_is_the_same_when_weights_go_in_blocks(attn, folders, monkeypatch):
    """Past WHOLE_BYTES a kept head's weights are made a block of queries at a time (here 2 rows):
    the column sums behind the others' mean add up the same."""
    whole = attn.json("trace", TEXT, "-m", folders["qwen2"], "--query", "car")
    monkeypatch.setattr(decoder, "WHOLE_BYTES", 2 * 4 * 24)
    blocked = attn.json("trace", TEXT, "-m", folders["qwen2"], "--query", "car")
    np.testing.assert_allclose(
        np.array(blocked["others"], dtype=float), np.array(whole["others"], dtype=float), atol=1e-6, equal_nan=True
    )
    np.testing.assert_allclose(weights_of(blocked), weights_of(whole), atol=1e-6, equal_nan=True)
