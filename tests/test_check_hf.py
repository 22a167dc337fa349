"""``attn check`` on Hugging Face's eager attention (issue 26): correct
bfloat16 and float16 outputs of Gemma 2 (soft-cap, sliding window, RoPE),
Llama (RoPE) and gpt-oss (sinks, sliding window, RoPE), given Q and K before
RoPE, pass; the same with a planted bug fail by 10× the tolerance or more.

Hugging Face rounds cos and sin to the model's dtype and rounds each step of
RoPE and of the soft-cap; the check's baseline covers that kernel as well as
a fused one (``core/baseline.py``). ``tests/data/hf_eager_refs.npz`` pins the
cases of ``scripts/make_hf_eager_refs.py``; with torch and transformers
installed they are also computed live."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from pins import LIVE_UNITS, units_apart

from attncli.core import check as check_module

ml_dtypes = pytest.importorskip("ml_dtypes")

ROOT = Path(__file__).resolve().parent.parent
PINNED = np.load(ROOT / "tests" / "data" / "hf_eager_refs.npz")
BUG_MARGIN = 10.0  # a planted bug fails by at least this many times the tolerance


def _script():
    spec = importlib.util.spec_from_file_location("make_hf_eager_refs", ROOT / "scripts" / "make_hf_eager_refs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # numpy only; torch and transformers are imported by the functions that need them
    return module


REFS = _script()
CASES = {key: (name, dtype, seed, bug) for key, name, dtype, seed, bug in REFS.cases()}


def pinned(key):
    """The case's inputs and Hugging Face's output, in the dtype they were computed in."""
    _, dtype, _, _ = CASES[key]
    low = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    names = [
        name[len(key) + 1 :]
        for name in PINNED.files
        if name.startswith(key + ".") and name.count(".") == key.count(".") + 1
    ]
    return {name: PINNED[f"{key}.{name}"].view(low) for name in names}


def verdict(key, data, out):
    name, _, _, _ = CASES[key]
    options = REFS.attn_options(REFS.FAMILIES[name], data["q"].shape[-2])
    if "sinks" in data:
        options = options.but(sinks=data["sinks"].astype(np.float64))
    return check_module.check(out, data["q"], data["k"], data["v"], options)


@pytest.mark.parametrize("key", [key for key, case in CASES.items() if case[3] is None])
def test_hugging_faces_correct_eager_outputs_pass(key):
    data = pinned(key)
    result = verdict(key, data, data["out"])
    assert result.passed, (result.max_error, result.tolerance)


@pytest.mark.parametrize("key", [key for key, case in CASES.items() if case[3] is not None])
def test_planted_bugs_fail_by_ten_times_the_tolerance(key):
    data = pinned(key)
    result = verdict(key, data, data["out"])
    assert result.max_error >= BUG_MARGIN * result.tolerance, (result.max_error, result.tolerance)


def test_the_step_by_step_baseline_is_what_widens_the_tolerance(monkeypatch):
    """On Gemma 2 in bfloat16 the step-by-step kernel's error is the larger one somewhere."""
    key = "gemma2.bfloat16.prompt"
    data = pinned(key)
    both = verdict(key, data, data["out"])
    monkeypatch.setattr(check_module, "rounds_differently", lambda options, dtype: False)
    fused = verdict(key, data, data["out"])
    assert both.max_baseline_error > fused.max_baseline_error


def test_attn_check_passes_a_gemma2_bfloat16_output_on_the_command_line(attn, tmp_path):
    from safetensors.numpy import save_file

    key = "gemma2.bfloat16.prompt"
    data = pinned(key)
    save_file({x: np.ascontiguousarray(m) for x, m in data.items() if x != "out"}, tmp_path / "case.safetensors")
    save_file({"out": np.ascontiguousarray(data["out"])}, tmp_path / "out.safetensors")
    family = REFS.FAMILIES["gemma2"]
    flags = ["--scale", str(family.scaling), "--softcap", str(family.softcap), "--window", f"{family.window - 1},0"]
    flags += ["--rope", "neox", "--rope-theta", str(family.theta), "--causal"]
    result = attn("check", tmp_path / "out.safetensors", tmp_path / "case.safetensors", *flags, "-f", "json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("key", sorted(CASES))
def test_the_pinned_outputs_are_hugging_faces_live(key):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    name, dtype, seed, bug = CASES[key]
    data = {x: m.astype(np.float64) for x, m in pinned(key).items() if x != "out"}
    live = REFS.low(REFS.hf_eager(name, data, dtype, bug), dtype)
    assert units_apart(live, pinned(key)["out"]) <= LIVE_UNITS


@pytest.mark.parametrize("name", list(REFS.FAMILIES))
@pytest.mark.parametrize("dtype", REFS.DTYPES)
def test_random_eager_outputs_pass_live(name, dtype):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    for seed in range(200, 208):
        for n_q in (REFS.N_K, REFS.N_DECODE):
            data = {
                x: REFS.low(m, dtype).astype(np.float64) for x, m in REFS.inputs(seed, n_q, REFS.FAMILIES[name]).items()
            }
            out = REFS.low(REFS.hf_eager(name, data, dtype), dtype)
            assert REFS.ratio(name, data, out, dtype) <= 1, (seed, n_q)
