"""``--model config.json --layer N``: each family's attention settings derived from its
config alone, against transformers' own attention.

For every family of scripts/make_model_refs.py, a model with random weights ran in
float64 and its Q, K (before and after RoPE), V and the heads' output were captured
per layer (tests/data/model_refs.npz). attn, given those Q, K, V and
``--model config.json --layer N`` and nothing else (the sinks or the position bias
from a file where the family has them), must give the same output: to 1e-5 before
RoPE (transformers turns Q and K with float32 angles, attn with float64: measured
2e-7 at most) and to 1e-12 after it (with ``--rope none``); GPT-J's and MPT's
attention rounds its scores to float32 in transformers itself, so theirs agree to
1e-6. The config transformers writes for the same model (``save_pretrained``: every
default spelled out, RoPE under ``rope_parameters``) must derive the same.
When torch and transformers are installed, the captures are made again and compared."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from typer.main import get_command

from attncli.cli import app
from attncli.core.api import attention
from attncli.models import Fields, layer_attention

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_model_refs", ROOT / "scripts" / "make_model_refs.py")
assert _spec is not None and _spec.loader is not None
refs: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refs)

REFS = np.load(ROOT / "tests" / "data" / "model_refs.npz")
SAVED = json.loads((ROOT / "tests" / "data" / "model_configs.json").read_text())
COMMAND = get_command(app)
NAMES = [*refs.CASES, *refs.DECODE]
BEFORE, AFTER = 1e-5, 1e-12
SCORES_IN_FLOAT32 = {"gptj": 1e-6, "mpt": 1e-6}  # transformers' own attention rounds the scores


def succeeded(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return result


def config_of(name: str) -> dict[str, Any]:
    return refs.CASES[refs.DECODE.get(name, name)]


def layers(name: str) -> list[int]:
    return sorted({int(key.split(".")[1]) for key in REFS.files if key.startswith(name + ".")})


def captured(name: str, layer: int, key: str) -> np.ndarray | None:
    full = f"{name}.{layer}.{key}"
    return REFS[full] if full in REFS.files else None


def run(*args: Any) -> dict:
    """attn in-process (the command Click builds once), its JSON; notes allowed on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": "100"}), contextlib.redirect_stdout(out):
        with contextlib.redirect_stderr(err):
            code = COMMAND.main(args=[str(a) for a in args], prog_name="attn", standalone_mode=False)
    assert code == 0, err.getvalue()
    assert all(line.startswith("attn: note: ") for line in err.getvalue().splitlines()), err.getvalue()
    return json.loads(out.getvalue())


def files(folder: Path, name: str, layer: int, rotated: bool = False) -> list[Any]:
    """Q, K, V of a layer as [1, heads, n, d] files (before RoPE, or after it), and the
    options a family needs from a file."""
    q, k = ("qr", "kr") if rotated else ("q", "k")
    paths = []
    for key in (q, k, "v"):
        path = folder / f"{name}.{layer}.{key}.npy"
        np.save(path, captured(name, layer, key)[None])
        paths.append(path)
    for key, flag in (("sinks", "--sinks"), ("bias", "--bias")):
        values = captured(name, layer, key)
        if values is not None:
            path = folder / f"{name}.{layer}.{key}.npy"
            np.save(path, values[None] if key == "bias" else values)
            paths += [flag, path]
    return paths


@pytest.mark.parametrize("name", NAMES)
def test_a_family_from_its_config_alone(name, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(config_of(name)))
    after_tolerance = SCORES_IN_FLOAT32.get(name, AFTER)
    for layer in layers(name):
        want = captured(name, layer, "out")
        got = run("run", *files(tmp_path, name, layer), "--model", config, "--layer", layer, "-f", "json")
        assert np.abs(np.array(got["output"])[0] - want).max() < BEFORE, layer
        assert got["model"]["model_type"] == config_of(name)["model_type"] and got["model"]["layer"] == layer
        if captured(name, layer, "qr") is not None:  # Q and K already turned: --rope none
            rotated = files(tmp_path, name, layer, rotated=True)
            got = run("run", *rotated, "--model", config, "--layer", layer, "--rope", "none", "-f", "json")
            assert np.abs(np.array(got["output"])[0] - want).max() < after_tolerance, layer
        else:
            assert np.abs(np.array(got["output"])[0] - want).max() < after_tolerance, layer


@pytest.mark.parametrize("name", list(refs.CASES))
def test_the_config_transformers_writes_derives_the_same(name):
    """save_pretrained's config.json (defaults written out, rope_parameters, layer_types)."""
    for layer in layers(name):
        q, k, v, want = (captured(name, layer, key) for key in ("q", "k", "v", "out"))
        extra = {key: captured(name, layer, key) for key in ("sinks", "bias") if captured(name, layer, key) is not None}
        hub = layer_attention(Fields(refs.CASES[name], "config.json"), layer).options.but(**extra)
        saved = layer_attention(Fields(SAVED[name], "config.json"), layer).options.but(**extra)
        for options in (hub, saved):
            assert np.abs(attention(q, k, v, options)[0] - want).max() < BEFORE, layer


def test_gemma3s_multimodal_config_reads_its_text_config(tmp_path):
    """model_type gemma3 keeps the text model's config under text_config."""
    wrapped = {"model_type": "gemma3", "text_config": refs.CASES["gemma3_text"]}
    for layer in layers("gemma3_text"):
        inner = layer_attention(Fields(refs.CASES["gemma3_text"]), layer)
        outer = layer_attention(Fields(wrapped, "config.json"), layer)
        assert outer.describe().replace("text_config.", "") == inner.describe()  # the same, named by path
        q, k, v, want = (captured("gemma3_text", layer, key) for key in ("q", "k", "v", "out"))
        assert np.abs(attention(q, k, v, outer.options)[0] - want).max() < BEFORE


# The flags a user would guess for each trap (the table): each is wrong by far more than
# the tolerance, which is what --model is for.
GUESSES = {
    "falcon": ["--causal", "--alibi"],  # Falcon adds ALiBi before the scale
    "cohere": ["--causal", "--rope", "neox", "--rope-theta", "500000"],  # Cohere pairs features interleaved
    "gemma2": ["--causal", "--rope", "neox", "--softcap", "5"],  # the scale is query_pre_attn_scalar's
    "deepseek_v3": ["--causal", "--rope", "gptj", "--rope-dim", "4"],  # the last 4 features turn, not the first
    "t5": [],  # T5 does not scale
}


@pytest.mark.parametrize("name", list(GUESSES))
def test_the_flags_a_user_would_guess_are_wrong(name, tmp_path):
    layer = 1 if name == "gemma2" else 0  # gemma2's layer 1 has no window: only the scale is wrong
    got = run("run", *files(tmp_path, name, layer), *GUESSES[name], "-f", "json")
    assert np.abs(np.array(got["output"])[0] - captured(name, layer, "out")).max() > 1e-2


def test_the_header_and_json_say_what_was_derived_and_from_where(tmp_path, attn):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(refs.CASES["gemma2"]))
    args = ["run", *files(tmp_path, "gemma2", 0), "--model", config, "--layer", "0"]
    shown = succeeded(attn(*map(str, args), "-f", "table", "--head", "0", env={"COLUMNS": "300"})).stdout
    assert (
        f"from {config} (gemma2), layer 0: scale 1/√24 (query_pre_attn_scalar), causal, window 3,0 "
        "(sliding_window 4; layer 0 even), soft-cap 5 (attn_logit_softcapping), RoPE neox θ 10000 (default)"
    ) in shown
    model = run(*args, "-f", "json")["model"]
    assert model["family"] == "Gemma 2" and model["layer_type"] == "sliding_attention"
    assert model["derived"][0] == {"setting": "scale", "value": "1/√24", "from": "query_pre_attn_scalar"}
    assert model["replaced"] == []


def test_a_typed_option_replaces_its_part_with_a_note(tmp_path, attn):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(refs.CASES["gemma2"]))
    args = ["run", *map(str, files(tmp_path, "gemma2", 0)), "--model", str(config), "--layer", "0"]
    result = succeeded(attn(*args, "--scale", "0.25", "--rope-theta", "500", "--no-causal", "-f", "json"))
    assert result.stderr.splitlines() == [
        "attn: note: --scale 0.25 replaces the derived scale 1/√24 (query_pre_attn_scalar)",
        "attn: note: --no-causal replaces the derived causal",
        "attn: note: --rope-theta 500 replaces the derived RoPE neox θ 10000 (default)",
    ]
    data = json.loads(result.stdout)
    assert data["scale"] == 0.25 and data["causal"] is False and data["rope"]["theta"] == 500
    assert data["window"] == [3, 0] and data["softcap"] == 5  # the rest as derived
    assert len(data["model"]["replaced"]) == 3
    off = json.loads(succeeded(attn(*args, "--rope", "none", "--window", "-1,-1", "-f", "json")).stdout)
    assert "rope" not in off and off["window"] == [-1, -1]


def test_a_decode_step_is_bottom_right_with_the_query_at_its_position(tmp_path):
    """One query after eight cached keys: causal bottom-right, RoPE at position 8 − 1."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(refs.CASES["llama"]))
    got = run("run", *files(tmp_path, "llama-decode", 0), "--model", config, "--layer", "0", "-f", "json")
    assert got["causal"] == "bottom-right" and got["rope"]["offset"] is None
    assert np.abs(np.array(got["output"])[0] - captured("llama-decode", 0, "out")).max() < BEFORE
    shifted = run(
        "run",
        *files(tmp_path, "llama-decode", 0),
        "--model",
        config,
        "--layer",
        "0",
        "--rope-offset",
        "0",
        "-f",
        "json",
    )
    assert np.abs(np.array(shifted["output"])[0] - captured("llama-decode", 0, "out")).max() > 1e-3


def test_every_attention_command_takes_it(tmp_path):
    """explain, grad and check derive the same settings as run."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(refs.CASES["qwen2"]))
    qkv = files(tmp_path, "qwen2", 1)
    rotated = files(tmp_path, "qwen2", 1, rotated=True)
    model = ["--model", config, "--layer", "1"]
    want = captured("qwen2", 1, "out")
    explained = run("explain", *qkv, *model, "--head", "2", "-f", "json")
    assert np.abs(np.array(explained["output"]) - want[2]).max() < BEFORE
    assert explained["model"]["layer"] == 1 and explained["window"] == [2, 0]
    out = tmp_path / "out.npy"
    np.save(out, want[None])
    assert run("check", out, *rotated, *model, "--rope", "none", "-f", "json")["passed"] is True
    np.save(out, want[None] * 1.001)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        outcome = COMMAND.main(
            args=["check", str(out), *map(str, rotated), *map(str, model), "--rope", "none", "-f", "json"],
            prog_name="attn",
            standalone_mode=False,
        )
    assert outcome == 3
    dout = tmp_path / "dout.npy"
    np.save(dout, np.ones_like(want[None]))
    grads = run("grad", *qkv, *model, "--dout", dout, "-f", "json")
    assert grads["model"]["model_type"] == "qwen2" and grads["window"] == [2, 0]


def test_a_folder_or_a_gguf_names_the_model(tmp_path):
    """A folder holding config.json; a GGUF's metadata, with llama.cpp's pairing (its llama
    Q/K rows are permuted: RoPE by adjacent pairs)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(refs.CASES["mistral"]))
    got = run("run", *files(tmp_path, "mistral", 0), "--model", folder, "--layer", "0", "-f", "json")
    assert np.abs(np.array(got["output"])[0] - captured("mistral", 0, "out")).max() < BEFORE
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(32)
    writer.add_embedding_length(32)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_rope_freq_base(500000.0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    got = run("run", *files(tmp_path, "mistral", 0), "--model", path, "-f", "json")
    assert got["rope"]["style"] == "gptj" and got["rope"]["theta"] == 500000.0
    assert got["model"]["derived"][-1]["from"] == "llama.rope.freq_base"
    assert got["model"]["layer"] == 0 and got["model"]["every_layer_alike"] is True  # no --layer needed


def test_rope_scaling_as_an_option_is_the_cores(tmp_path):
    """--rope-scaling KIND:FIELD=VALUE, the JSON object and a bundle's object are one RopeScaling,
    the one tests/test_rope_scaling.py checks against transformers' RoPE initialisation."""
    from attncli.core.options import AttentionOptions, Rope
    from attncli.core.rope import RopeScaling

    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(12, 8)), rng.normal(size=(12, 8)), rng.normal(size=(12, 8))
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", x)
    qkv = [tmp_path / f"{name}.npy" for name in "qkv"]
    kinds = {
        "linear:factor=2": RopeScaling("linear", factor=2.0),
        "dynamic:factor=2,original_max_position_embeddings=4": RopeScaling(
            "dynamic", factor=2.0, original_max_position_embeddings=4
        ),
        "llama3:factor=8,original_max_position_embeddings=4,low_freq_factor=1,high_freq_factor=4": RopeScaling(
            "llama3", factor=8.0, original_max_position_embeddings=4, low_freq_factor=1.0, high_freq_factor=4.0
        ),
        "yarn:factor=4,original_max_position_embeddings=4,truncate=false,beta_fast=16": RopeScaling(
            "yarn", factor=4.0, original_max_position_embeddings=4, truncate=False, beta_fast=16.0
        ),
        "longrope:short_factor=[1,1.5],long_factor=[2,3],original_max_position_embeddings=4,factor=8": RopeScaling(
            "longrope", short_factor=(1, 1.5), long_factor=(2, 3), original_max_position_embeddings=4, factor=8.0
        ),
    }
    plain = run("run", *qkv, "--rope", "neox", "--rope-dim", "4", "-f", "json")["output"]
    for typed, scaling in kinds.items():
        want = attention(q, k, v, AttentionOptions(rope=Rope("neox", dim=4, scaling=scaling)))[0]
        got = run("run", *qkv, "--rope", "neox", "--rope-dim", "4", "--rope-scaling", typed, "-f", "json")
        assert np.abs(np.array(got["output"]) - want).max() < 1e-12, typed
        assert np.abs(np.array(got["output"]) - np.array(plain)).max() > 1e-6, typed  # it does scale
        assert got["rope"]["scaling"]["kind"] == scaling.kind
        as_json = json.dumps({"rope_type": scaling.kind, **{k: v for k, v in vars(scaling).items() if k != "kind"}})
        again = run("run", *qkv, "--rope", "neox", "--rope-dim", "4", "--rope-scaling", as_json, "-f", "json")
        assert again["output"] == got["output"]
    bundle = tmp_path / "b.json"
    bundle.write_text(
        json.dumps(
            {
                "q": q.tolist(),
                "k": k.tolist(),
                "v": v.tolist(),
                "rope": "neox",
                "rope_dim": 4,
                "rope_scaling": {"type": "linear", "factor": 2},
            }
        )
    )
    assert (
        run("run", bundle, "-f", "json")["output"]
        == run("run", *qkv, "--rope", "neox", "--rope-dim", "4", "--rope-scaling", "linear:factor=2", "-f", "json")[
            "output"
        ]
    )


def test_rope_features_last_turns_the_trailing_features(tmp_path):
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(6, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", x)
    qkv = [tmp_path / f"{name}.npy" for name in "qkv"]
    last = run("run", *qkv, "--rope", "gptj", "--rope-dim", "4", "--rope-features", "last", "-f", "json")
    flipped = [tmp_path / f"{name}-flipped.npy" for name in "qkv"]
    for path, x in zip(flipped, (q, k, v), strict=True):
        np.save(path, np.concatenate([x[:, 4:], x[:, :4]], axis=1))
    first = run("run", *flipped[:2], qkv[2], "--rope", "gptj", "--rope-dim", "4", "-f", "json")
    assert np.abs(np.array(last["output"]) - np.array(first["output"])).max() < 1e-12
    assert last["rope"]["features"] == "last"


def test_explain_shows_the_scaled_frequencies(tmp_path, attn):
    rng = np.random.default_rng(7)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.normal(size=(4, 8)))
    args = [str(tmp_path / f"{n}.npy") for n in "qkv"] + ["--rope", "neox", "--rope-scaling", "linear:factor=4"]
    data = json.loads(succeeded(attn("explain", *args, "-f", "json")).stdout)["rope_frequencies"]
    assert np.allclose(np.array(data["plain"]) / np.array(data["scaled"]), 4) and data["attention_factor"] == 1
    shown = succeeded(attn("explain", *args, "-f", "table", env={"COLUMNS": "120"})).stdout
    assert "frequencies, plain and linear-scaled (sequence length 4)" in shown


def test_live_against_transformers():
    """The captures made again with transformers, as pinned: to 1e-12, and where
    transformers' own steps run in float32 (GPT-J, MPT) to their tolerance, since
    float32 rounds differently on another CPU (GPT-J's outputs by 3.0e-7 on an AMD
    EPYC against pins made on an Intel Xeon)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    for name in NAMES:
        for key, value in refs.capture(name).items():
            np.testing.assert_allclose(value, REFS[key], rtol=0, atol=SCORES_IN_FLOAT32.get(name, 1e-12), err_msg=key)
