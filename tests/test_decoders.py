"""Decoders: GPT-2 and the Llama family (Llama, Mistral, Qwen2) on tiny seeded random
models written by the tests (tests/decoder_models.py), against the decoders written
once more in float64 head by head, and against transformers' eager attention (numbers
pinned by scripts/make_decoder_refs.py; compared live when torch and transformers are
installed). Tolerances: float32 through 2 layers, measured ≤ 2.7e-6 on the weights
and ≤ 1.1e-5 on logits of up to 6 (transformers 5.24, torch 2.13; it turns RoPE with
float32 frequencies, attn with float64 ones); asserted at 1e-5 on the weights and 1e-5
of the largest logit on the logits."""

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attncli.errors import AttnError, UsageError
from attncli.models import Selection, decode, decoder, generate, load_model, trace
from attncli.models.decoder import Kept, run
from attncli.models.lens import Lens

import decoder_models as dm

CASES = list(dm.CASES)
UNSCALED = [name for name in CASES if "rope_scaling" not in dm.CASES[name]]  # the float64 reference has no scaling
REFS = np.load(dm.DATA / "decoder_refs.npz")
TOLERANCE = 1e-5


def close_logits(logits: np.ndarray, expected: np.ndarray) -> bool:
    return bool(np.abs(logits - expected).max() < TOLERANCE * max(1.0, np.abs(expected).max()))


@pytest.fixture(scope="module")
def tokenizer():
    return dm.refs.train_tokenizer()


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("decoders")
    return {name: dm.refs.write_folder(root / name, name, tokenizer=tokenizer) for name in CASES}


@pytest.fixture(scope="module")
def models(folders):
    return {name: load_model(folder) for name, folder in folders.items()}


def forward(model, ids, selection=None, predict=None):
    """attn's decoder on ids: the kept weights and the pass (logits at every position by default)."""
    selection = Selection() if selection is None else selection
    kept = Kept.plan(selection, model.config.n_layer, model.config.n_head, len(ids))
    predict = range(len(ids)) if predict is None else predict
    return kept, run(
        model.family.decoder, model.params, model.config, np.asarray(ids), kept=kept, predict=list(predict)
    )


def test_the_tokenizer_trains_in_under_a_second():
    start = time.perf_counter()
    tokenizer = dm.refs.train_tokenizer()
    assert time.perf_counter() - start < 1 and tokenizer.get_vocab_size() == 300


@pytest.mark.parametrize("name", UNSCALED)
def test_each_family_matches_the_float64_reference(models, name):
    ids = dm.refs.case_ids(name)
    kept, p = forward(models[name], ids)
    weights, logits = dm.reference_forward(name, dm.refs.random_tensors(name), ids)
    assert kept.weights.dtype == p.logits.dtype == np.float32
    assert np.abs(kept.weights - weights).max() < TOLERANCE
    assert close_logits(p.logits, logits)


@pytest.mark.parametrize("name", UNSCALED)
def test_the_logit_lens_reads_each_layer_as_the_float64_reference_does(models, name):
    """The lens (decode's lens=3): at every layer and position, the three likeliest next tokens of that
    layer's output through the final norm and output head; the last layer's are the model's own."""
    model = models[name]
    ids = dm.refs.case_ids(name)
    seen: dict = {}
    dm.reference_forward(name, dm.refs.random_tensors(name), ids, seen)
    lens = Lens(model.config.n_layer, len(ids), 3)
    p_final = run(model.family.decoder, model.params, model.config, np.asarray(ids), lens=lens, predict=[-1])
    reading = lens.reading
    assert reading.ids.shape == (len(seen), len(ids), 3)
    for layer, found in seen.items():
        z = found["lens"] - found["lens"].max(axis=-1, keepdims=True)  # [n, vocab] float64
        p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
        got = np.take_along_axis(p, reading.ids[layer], axis=-1)  # the reference's probabilities of attn's picks
        assert np.abs(reading.probabilities[layer] - got).max() < TOLERANCE, layer
        third = np.sort(p, axis=-1)[:, -3]
        assert (got[:, -1] >= third - TOLERANCE).all(), layer  # none likelier left out (up to near-ties)
    assert reading.ids[-1, -1, 0] == np.argmax(p_final.logits[-1])  # the last layer's is the model's prediction


@pytest.mark.parametrize("name", CASES)
def test_each_family_matches_transformers(models, name):
    """transformers' eager attention, float32: every layer's and head's weights, the last logits."""
    ids = REFS[f"{name}.ids"]
    kept, p = forward(models[name], ids)
    assert np.abs(kept.weights - REFS[f"{name}.weights"]).max() < TOLERANCE
    assert close_logits(p.logits[-3:], REFS[f"{name}.logits"])


def torch_available() -> bool:
    return all(importlib.util.find_spec(m) for m in ("torch", "transformers"))


@pytest.mark.skipif(not torch_available(), reason="torch and transformers are not installed")
@pytest.mark.parametrize("name", CASES)
def test_each_family_matches_transformers_live(folders, models, name):
    ids = dm.refs.case_ids(name)
    weights, logits = dm.refs.transformers_run(folders[name], ids)
    kept, p = forward(models[name], ids)
    assert np.abs(kept.weights - weights).max() < TOLERANCE
    assert close_logits(p.logits, logits)


def test_the_options_and_where_they_came_from(models):
    """Each layer's options are derived once (conventions) and say which field gave them."""
    describe = {name: [a.describe() for a in models[name].config.attention] for name in CASES}
    assert describe["gpt2-inverse-layer"] == [
        "scale 1/√16/1 (n_embd/n_head, scale_attn_by_inverse_layer_idx), causal",
        "scale 1/√16/2 (n_embd/n_head, scale_attn_by_inverse_layer_idx), causal",
    ]
    assert (
        describe["llama-gqa-bias"][0]
        == "scale 1/√16 (head_dim), causal, RoPE neox θ 500000 (rope_parameters.rope_theta)"
    )
    assert (
        describe["mistral"][1]
        == "scale 1/√8 (hidden_size/num_attention_heads), causal, window 3,0 (sliding_window 4), RoPE neox θ 10000 "
        "(rope_theta)"
    )
    assert describe["qwen2"] == [
        "scale 1/√8 (hidden_size/num_attention_heads), causal, RoPE neox θ 1000000 (rope_theta)",
        "scale 1/√8 (hidden_size/num_attention_heads), causal, window 2,0 (sliding_window 3; layer 1 ≥ "
        "max_window_layers 1, use_sliding_window), RoPE neox θ 1000000 (rope_theta)",
    ]
    assert describe["qwen2-layer-types"][0].endswith(
        "window 4,0 (sliding_window 5; layer_types[0] sliding, use_sliding_window), RoPE neox θ 10000 (default)"
    )
    assert describe["llama-llama3-scaling"][0].endswith(
        "RoPE neox θ 10000 (rope_theta), RoPE scaling llama3 ×8 (rope_scaling)"
    )
    assert describe["qwen2-yarn"][0].endswith("RoPE neox θ 10000 (rope_theta), RoPE scaling yarn ×4 (rope_scaling)")
    options = models["mistral"].config.attention[0].options
    assert (options.causal, options.window, options.rope.style, options.rope.theta) == (
        "bottom-right",
        (3, 0),
        "neox",
        10000.0,
    )


def test_decode_keeps_the_selection_and_says_where_queries_may_look(models):
    model = models["mistral"]
    text = "The pink elephant tried to get into the car"
    whole = decode(model, text)
    n = len(whole.ids)
    assert whole.weights.shape == (2, 4, n, n) and whole.tokens[5] == " elephant" and whole.pieces[5] == "Ġelephant"
    assert "".join(whole.tokens) == text and whole.prompt_length == n and whole.generated == []
    some = decode(model, text, Selection(layers=(1,), heads=(3, 0), queries=(-1, 2)))
    assert (some.layers, some.heads, some.queries) == ([1], [3, 0], [n - 1, 2])
    np.testing.assert_array_equal(some.weights, whole.weights[np.ix_([1], [3, 0], [n - 1, 2])])
    i, j = np.indices((n, n))
    np.testing.assert_array_equal(whole.allowed[0], (j <= i) & (i - j <= 3))  # window 3,0: itself and 3 before
    assert (whole.weights[:, :, ~whole.allowed[0]] == 0).all()
    np.testing.assert_allclose(whole.weights.sum(-1), 1, atol=1e-6)
    assert decode(model, text, Selection.nothing()).weights.shape == (0, 0, 0, n)


def test_the_next_token_is_the_softmax_of_the_last_logits(models):
    model = models["llama"]
    d = decode(model, "The pink elephant", top_next=3, predict=(-1, 1))
    _, p = forward(model, d.ids, Selection.nothing(), predict=[len(d.ids) - 1, 1])
    for prediction, logits in zip(d.next, p.logits, strict=True):
        probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        best = np.argsort(-probabilities)[:3]
        assert prediction.ids == list(best)
        np.testing.assert_allclose(prediction.probabilities, probabilities[best], rtol=1e-5)
        assert prediction.tokens == [model.tokenizer.decode([int(i)]) for i in best]
    assert [prediction.position for prediction in d.next] == [len(d.ids) - 1, 1]


def test_long_prompts_go_in_blocks_with_the_same_numbers(models, monkeypatch):
    """Past WHOLE_BYTES a kept layer goes through the kernel, and its weights a head and a block
    of queries at a time (here 2 rows): the same weights, summaries and logits."""
    model = models["qwen2"]  # grouped-query heads, a window on layer 1, biases
    ids = list(dm.refs.case_ids("qwen2")) + list(dm.refs.case_ids("llama"))[:7]
    selection = Selection(layers=(1, 0), heads=(3,), queries=(-1, 0, 9), summaries=True)
    kept, p = forward(model, ids, selection)
    monkeypatch.setattr(decoder, "WHOLE_BYTES", 2 * 4 * len(ids))
    blocked, q = forward(model, ids, selection)
    np.testing.assert_allclose(blocked.weights, kept.weights, atol=1e-6)
    for a, b in zip(vars(blocked.summaries).values(), vars(kept.summaries).values(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(q.logits, p.logits, atol=1e-5)


def test_blocks_see_the_whole_length_under_length_dependent_rope_scaling(tmp_path, tokenizer, monkeypatch):
    """LongRoPE's factors (and dynamic's θ) depend on the sequence's length: a block of early
    queries must still be turned with the whole text's frequencies, as the pass is."""
    longrope = {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.5, 2.0, 3.0],
        "long_factor": [2.0, 3.0, 5.0, 9.0],
        "original_max_position_embeddings": 8,
    }
    model = load_model(dm.refs.write_folder(tmp_path / "longrope", "llama", tokenizer=tokenizer, rope_scaling=longrope))
    ids = dm.refs.case_ids("llama")  # 12 tokens: past 8, the long factors
    selection = Selection(layers=(1,), queries=(0, 3, 11), summaries=True)
    kept, _ = forward(model, ids, selection)
    monkeypatch.setattr(decoder, "WHOLE_BYTES", 2 * 4 * len(ids))  # blocks of 2 queries
    blocked, _ = forward(model, ids, selection)
    np.testing.assert_allclose(blocked.weights, kept.weights, atol=1e-6)
    np.testing.assert_allclose(blocked.summaries.entropy, kept.summaries.entropy, atol=1e-5)


def test_head_summaries_are_the_weights_summed(models):
    model = models["gpt2"]
    ids = dm.refs.case_ids("gpt2")
    kept, _ = forward(model, ids, Selection(summaries=True))
    w = kept.weights[:, :, 1:].astype(np.float64)  # the queries after the first
    s = kept.summaries
    entropy = -(np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0)).sum(-1).mean(-1)
    np.testing.assert_allclose(s.entropy, entropy, atol=1e-5)
    np.testing.assert_allclose(s.largest, w.max(-1).mean(-1), atol=1e-6)
    np.testing.assert_allclose(s.first, w[..., 0].mean(-1), atol=1e-6)
    previous = np.array([w[..., i, i] for i in range(w.shape[2])]).mean(0)  # row i is query i + 1
    np.testing.assert_allclose(s.previous, previous, atol=1e-6)
    assert s.entropy.shape == (2, 4)


def test_a_selection_too_big_to_hold_is_refused_with_its_size(models, monkeypatch):
    monkeypatch.setattr(decoder, "KEPT_BYTES", 1000)
    with pytest.raises(AttnError) as e:
        decode(models["gpt2"], "The pink elephant tried to get into the car")
    assert str(e.value) == (
        "keeping the weights of 2 layers × 4 heads × 17 queries × 17 keys needs 0.0 GiB "
        "(select fewer layers, heads or queries)"
    )
    assert decode(models["gpt2"], "The pink", Selection(layers=(0,), heads=(1,))).weights.shape == (1, 1, 5, 5)
    with pytest.raises(UsageError) as e:
        decode(models["gpt2"], "The pink", Selection(heads=(4,)))
    assert str(e.value) == "head 4 is out of range: there are 4 heads (0 to 3)"


def test_a_cache_gives_the_same_logits_as_the_whole_text(models):
    for name in ("gpt2", "llama-gqa-bias", "mistral"):
        model = models[name]
        ids = dm.refs.case_ids(name)
        _, whole = forward(model, ids, Selection.nothing())
        cache = decoder.Cache(model.config.n_layer, len(ids))
        steps = [run(model.family.decoder, model.params, model.config, ids[:5], cache=cache, predict=range(5))]
        steps += [
            run(model.family.decoder, model.params, model.config, ids[i : i + 1], cache=cache, predict=[0])
            for i in range(5, len(ids))
        ]
        np.testing.assert_allclose(np.concatenate([s.logits for s in steps]), whole.logits, atol=1e-5)


def test_generation_is_greedy_and_traces_prompt_and_new_tokens(models):
    model = models["llama-gqa-bias"]
    g = generate(model, "The pink elephant", 6, Selection(layers=(1,)))
    prompt = len(model.tokenizer.encode("The pink elephant").ids)
    assert g.prompt_length == prompt and len(g.ids) == prompt + 6 and len(g.generated) == 6
    ids = list(g.ids[:prompt])
    for _ in range(6):  # without a cache: the whole text again for every token
        _, p = forward(model, ids, Selection.nothing(), predict=[-1])
        ids.append(int(np.argmax(p.logits[0])))
    assert g.ids == ids
    kept, _ = forward(model, ids, Selection(layers=(1,)))
    np.testing.assert_allclose(g.weights, kept.weights, atol=1e-6)
    assert g.weights.shape == (1, 4, len(ids), len(ids)) and len(g.tokens) == len(ids)
    assert generate(model, "The pink elephant", 0).ids == g.ids[:prompt]


def test_generation_stops_after_the_end_of_sequence_token(models, monkeypatch):
    model = models["gpt2"]
    first = generate(model, "The car", 1).generated[0]
    monkeypatch.setattr(model, "eos", (first,))
    assert generate(model, "The car", 5).generated == [first]
    assert len(generate(model, "The car", 5, stop_at_eos=False).generated) == 5


def test_the_encoder_api_runs_a_decoder_too(models):
    """``trace`` (what `attn trace` calls today) gets every layer and head of a decoder."""
    text = "The pink elephant"
    t = trace(models["qwen2"], text)
    np.testing.assert_allclose(t.weights, decode(models["qwen2"], text).weights, atol=1e-6)


def test_a_sharded_bfloat16_and_float16_folder(tmp_path, tokenizer, models):
    """model.safetensors.index.json and two shards, as Hugging Face saves a big model: one
    bfloat16, one float16 (each computed in float32)."""
    import ml_dtypes
    from safetensors.numpy import save_file

    name = "llama-gqa-bias"
    tensors = dm.refs.random_tensors(name)
    folder = dm.refs.write_folder(tmp_path / "sharded", name, tokenizer=tokenizer)
    (folder / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    dtypes = {k: ml_dtypes.bfloat16 if k in names[::2] else np.float16 for k in names}
    for shard, held in shards.items():
        save_file({k: tensors[k].astype(dtypes[k]) for k in held}, str(folder / shard))
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {k: shard for shard, held in shards.items() for k in held}})
    )
    ids = dm.refs.case_ids(name)
    kept, p = forward(load_model(folder), ids)
    rounded = {k: v.astype(dtypes[k]).astype(np.float32) for k, v in tensors.items()}
    weights, logits = dm.reference_forward(name, rounded, ids)
    assert np.abs(kept.weights - weights).max() < TOLERANCE and close_logits(p.logits, logits)
    _, unrounded = forward(models[name], ids)
    assert np.abs(p.logits - unrounded.logits).max() > 1e-3  # the rounding did change the numbers


# --- bad input, one line each --------------------------------------------------------------


def broken(folder: Path, tmp_path: Path, change) -> Path:
    """A copy of a model folder with one thing changed."""
    import shutil

    copy = tmp_path / f"{folder.name}-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(folder, copy)
    change(copy)
    return copy


def config_change(**changes):
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **changes}))

    return change


def test_loading_errors_name_the_problem(attn, folders, tmp_path, monkeypatch):
    from attncli.models import bert, families

    llama, gpt2 = folders["llama"], folders["gpt2"]
    monkeypatch.setattr(
        families,
        "FAMILIES",
        {"bert": bert.FAMILY, "gpt2": families.FAMILIES["gpt2"], "qwen2": families.FAMILIES["qwen2"]},
    )  # the hint lists them
    cases = [
        (
            broken(llama, tmp_path, config_change(model_type="falcon", architectures=["FalconForCausalLM"])),
            "config.json: unsupported architecture 'FalconForCausalLM' (model_type 'falcon') (attn runs BERT "
            "encoders: model_type 'bert'; GPT-2 decoders: model_type 'gpt2'; Qwen2 decoders: model_type 'qwen2')",
        ),
        (
            broken(gpt2, tmp_path, lambda f: (f / "tokenizer.json").unlink()),
            ": no tokenizer: no tokenizer.json (a decoder's folder holds the tokenizer.json Hugging Face saves "
            "with it)",
        ),
        (
            broken(gpt2, tmp_path, config_change(n_inner=48)),
            "model.safetensors: tensor 'h.0.mlp.c_fc.weight' is 32×64 but config.json implies 32×48",
        ),
        (
            broken(folders["qwen2"], tmp_path, config_change(num_key_value_heads=3)),
            "config.json: num_attention_heads 4 is not a multiple of num_key_value_heads 3 "
            "(each key/value head serves the same number of query heads)",
        ),
    ]
    for model, expected in cases:
        message = attn.fails("trace", "the car", "-m", model)
        assert message.endswith(expected) and message.startswith(str(tmp_path)), (message, expected)


def test_sharded_folder_errors(attn, folders, tmp_path):
    from safetensors.numpy import save_file

    tensors = dm.refs.random_tensors("gpt2")

    def shard(missing: bool):
        def change(folder: Path) -> None:
            (folder / "model.safetensors").unlink()
            half = dict(list(tensors.items())[:5])
            save_file(half, str(folder / "a.safetensors"))
            weight_map = {k: "a.safetensors" for k in half} | {k: "b.safetensors" for k in list(tensors)[5:]}
            if not missing:
                save_file(dict(list(tensors.items())[5:-1]), str(folder / "b.safetensors"))
            (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))

        return change

    folder = broken(folders["gpt2"], tmp_path, shard(missing=True))
    assert (
        attn.fails("trace", "the car", "-m", folder)
        == f"{folder}/model.safetensors.index.json: names the shard b.safetensors, which is not in the folder "
        "(every shard the index lists is needed)"
    )
    folder = broken(folders["gpt2"], tmp_path, shard(missing=False))
    assert (
        attn.fails("trace", "the car", "-m", folder)
        == f"{folder}/b.safetensors: holds no tensor 'transformer.ln_f.bias', which model.safetensors.index.json "
        "puts there"
    )


def test_rope_scaling_errors_in_one_line(attn, folders, tmp_path):
    cases = [
        (
            config_change(rope_scaling={"type": "mrope", "mrope_section": [2, 2]}),
            "config.json: rope_scaling type 'mrope' is not yet supported "
            "(attn applies linear, dynamic, llama3, yarn, longrope RoPE scaling)",
        ),
        (
            config_change(rope_parameters={"rope_type": "linear", "rope_theta": 1e4}),
            "config.json: rope_parameters: linear rope scaling needs factor (how many times the context is "
            "stretched, e.g. 8 for Llama 3.1, 32 for gpt-oss)",
        ),
    ]
    for change, expected in cases:
        message = attn.fails("trace", "the car", "-m", broken(folders["llama"], tmp_path, change))
        assert message.endswith(expected), message


def test_prompt_and_generation_errors(attn, models, folders):
    assert (
        attn.fails("trace", "the car " * 20, "-m", folders["gpt2"])
        == "the text is 42 tokens but the model takes at most 32 (shorten it)"
    )
    with pytest.raises(AttnError) as e:
        decode(models["gpt2"], "the car " * 20)
    assert str(e.value) == "the text is 42 tokens but the model takes at most 32 (shorten it)"
    with pytest.raises(AttnError) as e:
        generate(models["gpt2"], "the car " * 10, 13)
    assert (
        str(e.value) == "the text is 22 tokens and 13 more to generate but the model takes at most 32 "
        "(shorten it or generate fewer)"
    )
    with pytest.raises(AttnError) as e:
        decode(models["gpt2"], "")
    assert str(e.value) == "the text gives no tokens (give some text)"


def test_generate_on_an_encoder_says_it_is_one(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_trace import write_model

    bert = load_model(write_model(tmp_path / "bert"))
    with pytest.raises(UsageError) as e:
        generate(bert, "the car", 3)
    assert (
        str(e.value) == "BERT is an encoder: it predicts no next token and generates nothing "
        "(decoders: GPT-2, Llama, Mistral, Qwen2, Gemma, Gemma 2, Gemma 3)"
    )
