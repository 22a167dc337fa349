"""attn against the implementations people use, with pinned numbers.

``tests/data/variant_refs.npz`` holds, for each case of
``scripts/make_variant_refs.py``, the inputs and the outputs of PyTorch's
SDPA (``enable_gqa``), FlexAttention's score_mod/mask_mod, FlashAttention's
``attention_ref`` formulas, Hugging Face's RoPE functions and gpt-oss's
sinks, computed by torch in float64 and float32. Tolerances: float64 to
1e-12 absolute; float32 to torch.testing's float32 defaults (rtol 1.3e-6,
atol 1e-5). When torch is installed, the same cases are also computed live.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from attncli import AttentionOptions, attention
from attncli.core.options import Rope

ROOT = Path(__file__).resolve().parent.parent
PINNED = np.load(ROOT / "tests" / "data" / "variant_refs.npz")


def _script():
    spec = importlib.util.spec_from_file_location("make_variant_refs", ROOT / "scripts" / "make_variant_refs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # imports numpy only; torch is imported by the functions that need it
    return module


REFS = _script()
NAMES = list(REFS.CASES)


def arrays(name):
    return {key: PINNED[f"{name}.{key}"] for key in REFS.CASES[name].shapes}


def options(name, x):
    """The case's AttentionOptions: '@name' values are its inputs; a rope tuple is a Rope."""
    settings = {}
    for key, value in REFS.CASES[name].attn.items():
        if isinstance(value, str) and value.startswith("@"):
            value = x[value[1:]]
            value = value.astype(bool) if key == "mask" else value
        elif key == "rope":
            value = Rope(*value)
        settings[key] = value
    return AttentionOptions(**settings)


def test_every_case_is_pinned():
    assert {key.split(".")[0] for key in PINNED.files if "." in key} == set(NAMES)
    assert str(PINNED["torch_version"]).startswith("2.")


@pytest.mark.parametrize("implementation", ["reference", "blocked"])
@pytest.mark.parametrize("name", NAMES)
def test_float64_agrees_to_1e_12(name, implementation):
    x = arrays(name)
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    out, _ = attention(q, k, v, options(name, x), implementation=implementation)
    expected = PINNED[f"{name}.out_float64"]
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_float32_agrees_within_pytorch_tolerance(name):
    x = arrays(name)
    out, _ = attention(x["q"], x["k"], x["v"], options(name, x))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, PINNED[f"{name}.out_float32"], rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_the_pins_are_what_torch_computes_now(name):
    pytest.importorskip("torch")
    x = arrays(name)
    np.testing.assert_allclose(REFS.torch_output(name, x, "float64"), PINNED[f"{name}.out_float64"], rtol=0, atol=1e-14)
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    out, _ = attention(q, k, v, options(name, x))
    np.testing.assert_allclose(out, REFS.torch_output(name, x, "float64"), rtol=0, atol=1e-12)
