"""Hugging Face's eager attention in bfloat16 and float16, for ``attn check``.

Not part of the test suite: it needs torch and transformers, which attn never
uses. It writes ``tests/data/hf_eager_refs.npz``: for each case the inputs
(Q and K before RoPE, V, and the sinks) and the output of transformers' own
eager attention (each family's ``apply_rotary_pos_emb`` and
``eager_attention_forward``), rounded as Hugging Face rounds it: cos and sin
in the model's dtype, each step of RoPE and of the soft-cap rounded. Some
cases are correct (``attn check`` must pass them); the others carry one of
the bugs kernel writers keep filing (it must fail them by 10× the tolerance
or more). ``tests/test_check_hf.py`` checks the pinned cases always, and runs
the functions here live when torch and transformers are installed.

    PYTHONPATH=. /work/venv-ref/bin/python scripts/make_hf_eager_refs.py           # rewrites the data
    PYTHONPATH=. /work/venv-ref/bin/python scripts/make_hf_eager_refs.py --runs 48 # and measures the margins

The families (transformers 5.x): Gemma 2 (``query_pre_attn_scalar``, soft-cap,
a sliding window, RoPE), Llama (RoPE, causal), gpt-oss (sinks, a sliding
window, RoPE); GQA throughout, as a prompt (n_q = n_k) and as a decode step
over a cache (n_q < n_k: causal bottom-right, queries at n_k − n_q + i).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf_eager_refs.npz"

B, H, H_KV, N_K, D = 1, 4, 2, 32, 16
N_DECODE = 8  # the queries of a decode step
SPREAD = 2.0  # Q and K are N(0, SPREAD²): logits of a few units, as trained models give
QUERY_PRE_ATTN_SCALAR = 256  # Gemma 2's: the scale is 1/16, not 1/√D


@dataclass(frozen=True)
class Family:
    module: str  # transformers.models.<module>.modeling_<module>
    theta: float
    scaling: float | None = None  # None: 1/√D
    softcap: float | None = None
    window: int | None = None  # Hugging Face's sliding_window W: keys i − W < j ≤ i (attn: --window W-1,0)
    sinks: bool = False


FAMILIES = {
    "gemma2": Family("gemma2", 10000.0, QUERY_PRE_ATTN_SCALAR**-0.5, softcap=20.0, window=8),
    "llama": Family("llama", 500000.0),
    "gpt_oss": Family("gpt_oss", 150000.0, window=8, sinks=True),
}
DTYPES = ("bfloat16", "float16")
BUGS = {  # bug -> the family it is planted in, and whether it needs a decode step
    "scale wrong": ("gemma2", False),
    "window off by one": ("gemma2", False),
    "RoPE pairing (gptj for neox)": ("llama", False),
    "causal alignment (top-left)": ("llama", True),
    "positions offset (queries from 0)": ("llama", True),
    "sinks dropped": ("gpt_oss", False),
    "GQA group mis-mapped": ("llama", False),
    "soft-cap order (before the scale)": ("gemma2", False),
}


def inputs(seed: int, n_q: int, family: Family) -> dict[str, np.ndarray]:
    """Q [B, H, n_q, D], K and V [B, H_KV, N_K, D], sinks [H] as float64 (rounded to the dtype later)."""
    rng = np.random.default_rng(seed)
    data = {
        "q": rng.standard_normal((B, H, n_q, D)) * SPREAD,
        "k": rng.standard_normal((B, H_KV, N_K, D)) * SPREAD,
        "v": rng.standard_normal((B, H_KV, N_K, D)),
    }
    if family.sinks:
        data["sinks"] = rng.standard_normal(H) * SPREAD  # a few units, as trained sinks are
    return data


def attn_options(family: Family, n_q: int) -> Any:
    """attn's options for the family: what ``attn check`` is told."""
    from attncli import AttentionOptions
    from attncli.core.options import Rope

    return AttentionOptions(
        scale=family.scaling,
        softcap=family.softcap,
        causal="bottom-right" if n_q < N_K else "top-left",
        window=None if family.window is None else (family.window - 1, 0),
        rope=Rope("neox", family.theta),
    )


def hf_eager(name: str, data: dict[str, np.ndarray], dtype: str, bug: str | None = None) -> np.ndarray:
    """The family's eager attention in ``dtype`` on Q, K before RoPE -> [B, H, n_q, D] float64.

    cos and sin as the families' rotary embeddings make them (float32 angles,
    then the model's dtype); RoPE by ``apply_rotary_pos_emb``; the rest by the
    family's ``eager_attention_forward``, given the additive mask Hugging Face
    builds (the dtype's lowest number where forbidden). ``bug``: one of BUGS."""
    import importlib

    import torch

    family = FAMILIES[name]
    modeling = importlib.import_module(f"transformers.models.{family.module}.modeling_{family.module}")
    t = getattr(torch, dtype)
    q, k, v = (torch.from_numpy(data[x]).to(t) for x in "qkv")
    n_q = q.shape[-2]
    group = H // H_KV

    inv_freq = 1.0 / (family.theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))  # their init

    def cos_sin(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[None, :, None].float() * inv_freq  # [1, n, D / 2], float32 as in their forward
        emb = freqs if name == "gpt_oss" else torch.cat((freqs, freqs), dim=-1)  # gpt-oss keeps the halves
        return emb.cos().to(t), emb.sin().to(t)

    offset = 0 if bug == "positions offset (queries from 0)" else N_K - n_q
    cos_k, sin_k = cos_sin(torch.arange(N_K))
    cos_q, sin_q = cos_sin(torch.arange(n_q) + offset)
    if bug == "RoPE pairing (gptj for neox)":
        q_rot, k_rot = _gptj(q, cos_q, sin_q), _gptj(k, cos_k, sin_k)
    else:
        q_rot, _ = modeling.apply_rotary_pos_emb(q, q, cos_q, sin_q)
        _, k_rot = modeling.apply_rotary_pos_emb(k, k, cos_k, sin_k)

    i, j = torch.arange(n_q)[:, None], torch.arange(N_K)[None, :]
    shift = 0 if bug == "causal alignment (top-left)" else N_K - n_q
    allowed = j <= i + shift
    window = family.window
    if window is not None:
        allowed &= j > i + shift - (window + 1 if bug == "window off by one" else window)
    mask = torch.zeros((n_q, N_K), dtype=t).masked_fill(~allowed, torch.finfo(t).min)[None, None]

    module = SimpleNamespace(num_key_value_groups=group, training=False, head_dim=D)
    if family.sinks and bug != "sinks dropped":
        module.sinks = torch.from_numpy(data["sinks"]).to(t)
    elif family.sinks:
        modeling = importlib.import_module("transformers.models.llama.modeling_llama")  # the same without sinks
    if bug == "GQA group mis-mapped":  # query head h reads K/V head h % H_KV, not h // group
        k_rot, v = torch.cat([k_rot] * group, dim=1), torch.cat([v] * group, dim=1)
        module.num_key_value_groups = 1
    scaling = family.scaling if family.scaling is not None else D**-0.5
    if bug == "scale wrong":
        scaling = D**-0.5  # 1/√head_dim where the model says query_pre_attn_scalar^-0.5
    if bug == "soft-cap order (before the scale)":
        out = _softcap_before_scale(q_rot, k_rot, v, mask, scaling, family.softcap, group)
    else:
        extra = {"softcap": family.softcap} if family.softcap is not None else {}
        out, _ = modeling.eager_attention_forward(module, q_rot, k_rot, v, mask, scaling=scaling, **extra)
        out = out.transpose(1, 2)  # they return [B, n_q, H, D]
    return out.to(torch.float64).numpy()


def _gptj(x: Any, cos: Any, sin: Any) -> Any:
    """GPT-J's rotate_every_two with repeat_interleaved cos and sin (pairs (2i, 2i + 1))."""
    import torch

    half = cos.shape[-1] // 2
    cos, sin = (m[..., :half].repeat_interleave(2, dim=-1)[:, None] for m in (cos, sin))
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    return x * cos + rotated * sin


def _softcap_before_scale(q: Any, k: Any, v: Any, mask: Any, scaling: float, cap: float | None, group: int) -> Any:
    """Gemma 2's eager attention with the soft-cap taken of the unscaled scores."""
    import torch

    assert cap is not None
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    weights = torch.tanh(torch.matmul(q, k.transpose(2, 3)) / cap) * cap * scaling + mask
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(weights, v)


def low(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 -> the dtype (ml_dtypes' bfloat16), as the model's tensors hold it."""
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)


def cases() -> list[tuple[str, str, str, int, str | None]]:
    """(key, family, dtype, seed, bug) of every pinned case."""
    found = []
    for name in FAMILIES:
        for dtype in DTYPES:
            for decode in (False, True):
                key = f"{name}.{dtype}.{'decode' if decode else 'prompt'}"
                found.append((key, name, dtype, 1 + 2 * decode, None))
    for bug, (name, decode) in BUGS.items():
        for dtype in DTYPES:
            found.append((f"{name}.{dtype}.{'decode' if decode else 'prompt'}.bug.{bug}", name, dtype, 7, bug))
    return found


def case_inputs(name: str, key: str, seed: int) -> dict[str, np.ndarray]:
    return inputs(seed, N_DECODE if ".decode" in key else N_K, FAMILIES[name])


def write() -> None:
    arrays: dict[str, np.ndarray] = {}
    for key, name, dtype, seed, bug in cases():
        data = case_inputs(name, key, seed)
        for x, values in data.items():
            stored = low(values, dtype)
            arrays[f"{key}.{x}"] = stored.view(np.uint16)  # bfloat16 and float16 bits, exactly
        low_inputs = {x: low(values, dtype).astype(np.float64) for x, values in data.items()}
        arrays[f"{key}.out"] = low(hf_eager(name, low_inputs, dtype, bug), dtype).view(np.uint16)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KiB, {len(cases())} cases)")


def ratio(name: str, data: dict[str, np.ndarray], out: np.ndarray, dtype: str, fused_only: bool = False) -> float:
    """max |OUT − ref| / tolerance of ``attn check`` (above 1 fails)."""
    from attncli.core import check as check_module

    n_q = data["q"].shape[-2]
    options = attn_options(FAMILIES[name], n_q)
    if "sinks" in data:
        options = options.but(sinks=data["sinks"])
    saved = check_module.rounds_differently
    if fused_only:
        check_module.rounds_differently = lambda options, dtype: False  # type: ignore[assignment]
    try:
        verdict = check_module.check(out, *(low(data[x], dtype) for x in "qkv"), options)
    finally:
        check_module.rounds_differently = saved
    return verdict.max_error / verdict.tolerance


def margins(runs: int) -> None:
    """Over ``runs`` random inputs per family, dtype and shape: the largest ratio of a correct
    output (with the fused baseline alone, as before, and with both), the smallest of a planted bug."""
    print(f"\n{runs} runs each: max |OUT - ref| / tolerance (correct outputs must be ≤ 1, bugs ≥ 10)\n")
    print("| case | dtype | correct, worst (fused baseline only) | correct, worst (both) | failed (fused only) |")
    print("|---|---|---|---|---|")
    for name in FAMILIES:
        for dtype in DTYPES:
            for n_q in (N_K, N_DECODE):
                both, fused, failed = 0.0, 0.0, 0
                for seed in range(100, 100 + runs):
                    data = {x: low(m, dtype).astype(np.float64) for x, m in inputs(seed, n_q, FAMILIES[name]).items()}
                    out = low(hf_eager(name, data, dtype), dtype)
                    r_fused = ratio(name, data, out, dtype, fused_only=True)
                    both, fused = max(both, ratio(name, data, out, dtype)), max(fused, r_fused)
                    failed += r_fused > 1
                shape = "prompt" if n_q == N_K else "decode"
                print(f"| {name} {shape} | {dtype} | {fused:.2f} | {both:.2f} | {failed} of {runs} |")
    print("\n| planted bug | dtype | smallest ratio |")
    print("|---|---|---|")
    for bug, (name, decode) in BUGS.items():
        for dtype in DTYPES:
            smallest = math.inf
            for seed in range(100, 100 + runs):
                n_q = N_DECODE if decode else N_K
                data = {x: low(m, dtype).astype(np.float64) for x, m in inputs(seed, n_q, FAMILIES[name]).items()}
                out = low(hf_eager(name, data, dtype, bug), dtype)
                smallest = min(smallest, ratio(name, data, out, dtype))
            print(f"| {bug} ({name}) | {dtype} | {smallest:.1f} |")


# Gemma 2 27B's heads (d = 128, query_pre_attn_scalar 144: the scale is not 1/√d), 8 of them, 256 tokens
MODEL_SIZED = {"B": 1, "H": 8, "H_KV": 4, "N_K": 256, "D": 128, "N_DECODE": 16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=0, help="also measure the margins over this many random runs")
    parser.add_argument(
        "--model-sized", action="store_true", help="measure at Gemma 2 27B's head sizes (8 heads of 128, 256 tokens)"
    )
    args = parser.parse_args()
    if args.model_sized:
        globals().update(MODEL_SIZED)
        FAMILIES["gemma2"] = Family("gemma2", 10000.0, 144**-0.5, softcap=50.0, window=128)
    else:
        write()
    if args.runs:
        margins(args.runs)


if __name__ == "__main__":
    main()
