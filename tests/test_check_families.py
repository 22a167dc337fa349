"""``attn check --model config.json --layer N`` on every family's attention as Hugging
Face runs it in bfloat16 and float16 (issue 26).

For each family of scripts/make_model_refs.py, the model with random weights was
cast to the dtype and run as people run it (eager attention; SDPA for Falcon),
and every layer's Q and K (before and after RoPE), V and output were captured
bit for bit (tests/data/family_check_refs.npz, by
scripts/make_family_check_refs.py). Given the config and the layer and no
other flag (gpt-oss's sinks and T5's position bias from the capture), the
check must pass the model's own output, before RoPE and after it
(``--rope none``); and the flags a user would guess for the family's trap
(issue 26's table) must fail it. With torch and transformers installed, the
captures are made again and must do the same."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pins import LIVE_UNITS, units_apart

ml_dtypes = pytest.importorskip("ml_dtypes")

ROOT = Path(__file__).resolve().parent.parent
PINNED = np.load(ROOT / "tests" / "data" / "family_check_refs.npz")


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_family_check_refs", ROOT / "scripts" / "make_family_check_refs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # numpy only; torch is imported by the functions that need it
    return module


REFS = _script()
# A trap fails by at least this many times the tolerance here. bfloat16 keeps 8 bits: at
# these heads (d 8–16, 8 tokens) Gemma 2's scale (1/√16 for 1/√24) moved the output by 2–4×
# its tolerance over 13 token draws, Falcon's ALiBi order by 4–7×, the other traps by 12× or
# more; in float16 every trap by 21× or more (scripts/make_family_check_refs.py --runs 12).
# Correct outputs stayed at 0.50 of the tolerance or less in both dtypes.
TRAP_MARGIN = {"bfloat16": 3.0, "float16": 10.0}


def low(dtype: str) -> Any:
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16


def pinned(name: str, dtype: str) -> dict[int, dict[str, np.ndarray]]:
    """{layer: {"q": …, "k": …, "qr": …, "kr": …, "v": …, "out": …}} in the dtype."""
    layers: dict[int, dict[str, np.ndarray]] = {}
    prefix = f"{name}.{dtype}."
    for key in PINNED.files:
        if key.startswith(prefix):
            layer, what = key[len(prefix) :].split(".")
            layers.setdefault(int(layer), {})[what] = PINNED[key].view(low(dtype))
    assert layers, f"no capture of {name} in {dtype}"
    return layers


@pytest.mark.parametrize("dtype", REFS.DTYPES)
@pytest.mark.parametrize("name", REFS.NAMES)
def test_every_familys_own_output_passes_before_and_after_rope(name, dtype):
    _own_output_passes(name, pinned(name, dtype))


@pytest.mark.parametrize("dtype", REFS.DTYPES)
@pytest.mark.parametrize("name", list(REFS.TRAPS))
def test_the_flags_a_user_would_guess_fail(name, dtype):
    _trap_fails(name, dtype, pinned(name, dtype))


def _own_output_passes(name: str, layers: dict[int, dict[str, np.ndarray]]) -> None:
    for layer, captured in layers.items():
        assert REFS.ratio(name, layer, captured, rotated=False) <= 1, (name, layer)
        if "qr" in captured:
            assert REFS.ratio(name, layer, captured, rotated=True) <= 1, (name, layer)


def _trap_fails(name: str, dtype: str, layers: dict[int, dict[str, np.ndarray]]) -> None:
    layer, _ = REFS.TRAPS[name]
    assert REFS.ratio(name, layer, layers[layer], rotated=False, trap=True) >= TRAP_MARGIN[dtype], name


def _save(path: Path, values: np.ndarray) -> Path:
    from safetensors.numpy import save_file

    save_file({"x": np.ascontiguousarray(values)}, path)
    return path


def test_attn_check_with_the_model_alone_on_the_command_line(attn, tmp_path):
    """gpt-oss in bfloat16 (sinks from a file, a window on layer 0, YaRN) passes; Cohere's
    output checked with the half-split pairs a user would guess fails (exit 3)."""
    pytest.importorskip("safetensors")
    for name, layer, guess, code in (("gpt_oss", 0, [], 0), ("cohere", 0, ["--rope", "neox"], 3)):
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps(REFS.MODEL_REFS.CASES[name]))
        captured = pinned(name, "bfloat16")[layer]
        paths = [_save(tmp_path / f"{name}.{x}.safetensors", captured[x][None]) for x in ("out", "q", "k", "v")]
        extra = (
            ["--sinks", str(_save(tmp_path / "sinks.safetensors", captured["sinks"]))] if "sinks" in captured else []
        )
        result = attn("check", *map(str, paths), "--model", str(config), "--layer", str(layer), *extra, *guess)
        assert result.exit_code == code, result.output


@pytest.mark.parametrize("dtype", REFS.DTYPES)
def test_live_captures_pass_and_traps_fail(dtype):
    """The captures made again here with transformers in the dtype: every family's own
    output passes and every trap fails, as the pinned ones do. Not bit for bit: torch's
    float16 and bfloat16 arithmetic differs between CPUs, and a whole model amplifies
    it layer by layer (made again on an AMD EPYC against pins made on an Intel Xeon:
    the first layer's Q, K and V to one unit in the last place, but the second layer of
    Gemma and MPT in float16 differs in up to 114 of 512 numbers). The first layer's
    inputs, before the model has amplified anything, must still be the pinned ones
    (``pins``: to one unit)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    for name in REFS.NAMES:
        layers: dict[int, dict[str, np.ndarray]] = {}
        for key, values in REFS.MODEL_REFS.capture(name, dtype).items():
            _, layer, what = key.split(".")
            layers.setdefault(int(layer), {})[what] = values
        pins = pinned(name, dtype)
        first = min(pins)
        for what in ("q", "k", "v", "qr", "kr"):
            if what in pins[first]:
                assert units_apart(layers[first][what], pins[first][what]) <= LIVE_UNITS, (name, what)
        _own_output_passes(name, layers)
        if name in REFS.TRAPS:
            _trap_fails(name, dtype, layers)
