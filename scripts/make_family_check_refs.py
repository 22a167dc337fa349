"""Every family's attention as Hugging Face runs it in bfloat16 and float16, for ``attn check --model``.

Not part of the test suite: it needs torch and transformers, which attn never
uses. For each family of ``make_model_refs.py`` (the same tiny configs, the
same random weights, the model cast to the dtype as people run it: eager
attention, its softmax in float32, everything else in the model's dtype;
SDPA for Falcon, whose eager path adds ALiBi twice), every layer's Q and K
before and after RoPE, V, the heads' output (and gpt-oss's sinks, T5's
position bias) are captured and written, bit for bit, to
``tests/data/family_check_refs.npz``. ``tests/test_check_families.py`` runs
``attn check`` on them with ``--model config.json --layer N`` and no other
flag: each must pass, before RoPE and after it (``--rope none``), and the
flags a user would guess for the family's trap must fail by 10× the
tolerance or more. It recomputes the captures live when torch is installed.

    PYTHONPATH=. /work/venv-ref/bin/python scripts/make_family_check_refs.py            # rewrites the data
    PYTHONPATH=. /work/venv-ref/bin/python scripts/make_family_check_refs.py --runs 16  # and measures the margins

``--runs N`` runs every family N more times on other tokens and prints, per
family and dtype, the largest ratio of a correct output's error to the
tolerance (≤ 1 passes) and the smallest of each trap (≥ 10 wanted).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "family_check_refs.npz"
DTYPES = ("bfloat16", "float16")


def _model_refs() -> Any:
    spec = importlib.util.spec_from_file_location("make_model_refs", ROOT / "scripts" / "make_model_refs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


MODEL_REFS = _model_refs()
NAMES = [*MODEL_REFS.CASES, *MODEL_REFS.DECODE]

# The flags a user would guess for each family's trap (issue 26's table), as changes to the
# derived options: each must fail by 10× the tolerance or more. ``layer``: where the trap shows.
TRAPS: dict[str, tuple[int, str]] = {
    "falcon": (0, "ALiBi after the scale (--alibi), where Falcon adds it before"),
    "cohere": (0, "RoPE pairs half-split (--rope neox), where Cohere pairs neighbours"),
    "gemma2": (1, "the scale 1/√head_dim, where Gemma 2 takes query_pre_attn_scalar's"),
    "deepseek_v3": (0, "RoPE on the first features (--rope-dim), where DeepSeek turns the last"),
    "t5": (0, "the scale 1/√d, where T5 does not scale"),
    "gptj": (0, "RoPE pairs half-split (--rope neox), where GPT-J pairs neighbours"),
    "gpt_oss": (0, "the sinks dropped"),
    "mistral": (0, "no window, where Mistral slides"),
    "llama": (0, "no RoPE scaling, where Llama 3.1 scales by llama3"),
}


def bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 or float16 values as their 16 bits."""
    return np.ascontiguousarray(x).view(np.uint16)


def write() -> None:
    arrays: dict[str, np.ndarray] = {}
    for dtype in DTYPES:
        for name in NAMES:
            for key, values in MODEL_REFS.capture(name, dtype).items():
                case, layer, what = key.split(".")
                arrays[f"{case}.{dtype}.{layer}.{what}"] = bits(values)
            print(f"{name} {dtype}", file=sys.stderr)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KiB, {len(arrays)} arrays)")


def layer_options(name: str, layer: int, captured: dict[str, np.ndarray], rotated: bool, trap: bool = False) -> Any:
    """attn's options for the layer from the config alone (the sinks or bias from the capture);
    after RoPE, without it (``--rope none``); ``trap``: the family's trap instead."""
    from dataclasses import replace

    from attncli.models import Fields, layer_attention

    config = MODEL_REFS.CASES[MODEL_REFS.DECODE.get(name, name)]
    options = layer_attention(Fields(config, "config.json"), layer).options
    extra = {key: captured[key].astype(np.float64) for key in ("sinks", "bias") if key in captured}
    options = options.but(**extra)
    if rotated:
        options = options.but(rope=None)
    if not trap:
        return options
    if name == "falcon":
        return options.but(alibi=True, alibi_slopes=None)
    if name in ("cohere", "gptj"):
        return options.but(rope=replace(options.rope, style="neox"))
    if name == "gemma2":
        return options.but(scale=None)
    if name == "deepseek_v3":
        return options.but(rope=replace(options.rope, features="first"))
    if name == "t5":
        return options.but(scale=None)
    if name == "gpt_oss":
        return options.but(sinks=None)
    if name == "mistral":
        return options.but(window=None)
    if name == "llama":
        return options.but(rope=replace(options.rope, scaling=None))
    raise KeyError(name)


def ratio(name: str, layer: int, captured: dict[str, np.ndarray], rotated: bool, trap: bool = False) -> float:
    """max |OUT − ref| / tolerance of ``attn check`` on the layer (above 1 fails)."""
    from attncli.core.check import check

    q, k = (captured["qr"], captured["kr"]) if rotated and "qr" in captured else (captured["q"], captured["k"])
    options = layer_options(name, layer, captured, rotated, trap)
    verdict = check(captured["out"][None], q[None], k[None], captured["v"][None], options)
    return verdict.max_error / verdict.tolerance


def by_layer(refs: dict[str, np.ndarray], name: str) -> dict[int, dict[str, np.ndarray]]:
    """{layer: {"q": …, "k": …, …}} of a capture keyed ``name.layer.what``."""
    layers: dict[int, dict[str, np.ndarray]] = {}
    for key, values in refs.items():
        case, layer, what = key.split(".")
        if case == name:
            layers.setdefault(int(layer), {})[what] = values
    return layers


def margins(runs: int) -> None:
    print(f"\n{runs} runs each on other tokens: max |OUT - ref| / tolerance (correct ≤ 1; traps ≥ 10)\n")
    print("| family | dtype | correct, before RoPE | correct, after RoPE | trap (smallest) |")
    print("|---|---|---|---|---|")
    for name in NAMES:
        for dtype in DTYPES:
            before = after = 0.0
            trap = math.inf
            for run in range(runs):
                layers = by_layer(MODEL_REFS.capture(name, dtype, tokens=1000 + run), name)
                for layer, captured in layers.items():
                    before = max(before, ratio(name, layer, captured, rotated=False))
                    if "qr" in captured:
                        after = max(after, ratio(name, layer, captured, rotated=True))
                    if name in TRAPS and TRAPS[name][0] == layer:
                        trap = min(trap, ratio(name, layer, captured, rotated=False, trap=True))
            shown_after = f"{after:.2f}" if after else "no RoPE"
            shown_trap = f"{trap:.0f}" if trap < math.inf else "–"
            print(f"| {name} | {dtype} | {before:.2f} | {shown_after} | {shown_trap} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=0, help="also measure the margins over this many token draws")
    parser.add_argument("--no-write", action="store_true", help="measure only")
    args = parser.parse_args()
    if not args.no_write:
        write()
    if args.runs:
        margins(args.runs)


if __name__ == "__main__":
    main()
