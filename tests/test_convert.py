"""``attn convert MODEL.gguf DIR``: a GGUF written out as a Hugging Face folder that
traces read as they read the GGUF, giving the same numbers; a folder that holds
anything is never written into, and a failed conversion leaves nothing behind."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

from attncli.models import decode, load_model

import decoder_models as dm

TEXT = "The pink elephant tried to get into the car but it was too"


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory) -> dict[str, Path]:
    tokenizer = dm.refs.train_tokenizer()
    root = tmp_path_factory.mktemp("convert")
    return {
        name: dm.write_gguf(root / f"{name}.gguf", name, dm.refs.random_tensors(name), tokenizer, qtype=qtype)
        for name, qtype in (("gpt2", None), ("llama-gqa-bias", "Q8_0"))
    }


def same_trace(a, b) -> None:
    """Two loaded models give the same tokens, weights and predictions, bit for bit."""
    da, db = decode(a, TEXT), decode(b, TEXT)
    assert da.ids == db.ids and da.tokens == db.tokens
    assert np.array_equal(da.weights, db.weights)
    assert da.next[0].ids == db.next[0].ids and da.next[0].probabilities == db.next[0].probabilities


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa-bias"])
def test_the_folder_traces_as_the_gguf_does(attn, ggufs, tmp_path, name):
    folder = tmp_path / "hf"
    out = attn.json("convert", ggufs[name], folder)
    assert out["folder"] == str(folder) and out["model_type"] == dm.CASES[name]["model_type"]
    assert sorted(out["files"]) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert {p.name: p.stat().st_size for p in folder.iterdir()} == out["files"]  # nothing else, no staging left
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] and config["model_type"] == dm.CASES[name]["model_type"]
    assert config.get("attention_bias", False) == (name == "llama-gqa-bias")  # transformers' switch for the biases
    same_trace(load_model(ggufs[name]), load_model(folder))
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~mask  # a folder as any other, not a temporary's 0700
    assert stat.S_IMODE((folder / "model.safetensors").stat().st_mode) == 0o666 & ~mask


def test_an_empty_folder_is_filled_and_one_that_holds_anything_is_left_alone(attn, ggufs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert attn("convert", ggufs["gpt2"], empty, "-f", "json").exit_code == 0
    assert (empty / "model.safetensors").is_file()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    assert attn.fails("convert", ggufs["gpt2"], kept, code=2).startswith(f"{kept}: DIR is a folder that is not empty")
    assert [p.name for p in kept.iterdir()] == ["notes.txt"] and (kept / "notes.txt").read_text() == "mine"


def test_a_failed_conversion_leaves_nothing_behind(attn, ggufs, tmp_path, monkeypatch):
    import safetensors.numpy

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.numpy, "save_file", full_disk)
    message = attn.fails("convert", ggufs["gpt2"], tmp_path / "hf", code=1)
    assert "No space left on device" in message or "no space" in message.lower()
    assert list(tmp_path.iterdir()) == []


def test_without_the_models_extra_it_says_what_to_install(attn, ggufs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)  # import safetensors -> ImportError
    assert attn.fails("convert", ggufs["gpt2"], tmp_path / "hf", code=1) == (
        "converting a GGUF needs safetensors, from the 'models' extra (pip install '.[models]' in attn's source folder)"
    )
    assert list(tmp_path.iterdir()) == []


def test_it_names_the_two_formats_it_writes_and_refuses_the_others(attn, ggufs, tmp_path):
    shown = attn("convert", "--help", env={"COLUMNS": "120"}).stdout
    assert "--format table|json " in shown and "csv" not in shown
    for fmt in ("csv", "npy", "safetensors"):
        assert attn.fails("convert", ggufs["gpt2"], tmp_path / "hf", "-f", fmt, code=2) == (
            f"--format {fmt}: this command writes table or json"
        )
    assert list(tmp_path.iterdir()) == []


def test_the_folder_and_the_input_are_never_the_same(attn, ggufs, tmp_path):
    link = tmp_path / "link.gguf"
    link.symlink_to(ggufs["gpt2"])
    before = ggufs["gpt2"].read_bytes()
    for target in (ggufs["gpt2"], link):
        assert "names" in attn.fails("convert", ggufs["gpt2"], target, code=2)
    assert ggufs["gpt2"].read_bytes() == before


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa-bias"])
def test_transformers_runs_the_random_folders_live(attn, ggufs, tmp_path, name):
    """transformers on the folder: attn's weights within 1e-5, its probabilities within 1e-6 (measured:
    1.3e-6 and 1.8e-7; without attention_bias, transformers dropped Llama's biases, off by 0.76)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / name
    assert attn("convert", ggufs[name], folder, "-f", "json").exit_code == 0
    d = decode(load_model(folder), TEXT)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():
        out = model(torch.tensor(d.ids)[None], output_attentions=True)
    assert np.abs(d.weights - torch.stack([a[0] for a in out.attentions]).numpy()).max() < 1e-5
    p = out.logits[0, -1].double().softmax(-1).numpy()
    np.testing.assert_allclose(p[d.next[0].ids], d.next[0].probabilities, atol=1e-6)


SMOLLM2 = Path(os.environ["ATTN_TEST_GGUF"]) if os.environ.get("ATTN_TEST_GGUF") else None


@pytest.mark.skipif(SMOLLM2 is None, reason="SmolLM2's GGUF not found (set ATTN_TEST_GGUF; .ci/run does)")
def test_smollm2_converted_traces_the_same(attn, tmp_path):
    """The real model: the folder (float32, 513 MiB) gives the GGUF's weights and " big" bit for bit."""
    assert SMOLLM2 is not None
    folder = tmp_path / "smollm2"
    assert attn("convert", SMOLLM2, folder, "-f", "json").exit_code == 0
    converted, original = load_model(folder), load_model(SMOLLM2)
    assert converted.family.name == "Llama" and converted.eos == original.eos
    same_trace(original, converted)


@pytest.mark.skipif(SMOLLM2 is None, reason="SmolLM2's GGUF not found (set ATTN_TEST_GGUF; .ci/run does)")
def test_transformers_loads_the_folder_live(attn, tmp_path):
    """transformers' own loader on the folder: the same tokens, weights within 1e-4, the same prediction."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    assert SMOLLM2 is not None
    folder = tmp_path / "smollm2"
    assert attn("convert", SMOLLM2, folder, "-f", "json").exit_code == 0
    d = decode(load_model(folder), TEXT)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    assert transformers.AutoTokenizer.from_pretrained(folder)(TEXT).input_ids == d.ids
    with torch.no_grad():
        out = model(torch.tensor(d.ids)[None], output_attentions=True)
    assert np.abs(d.weights - torch.stack([a[0] for a in out.attentions]).numpy()).max() < 1e-4
    p = out.logits[0, -1].double().softmax(-1).numpy()
    np.testing.assert_allclose(p[d.next[0].ids], d.next[0].probabilities, atol=1e-5)
