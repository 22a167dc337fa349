"""Reference RoPE-scaling numbers from Hugging Face transformers, pinned for the tests.

Not part of the test suite: it needs torch and transformers, which attn never
uses. It writes ``tests/data/rope_refs.npz``: for each case and sequence
length below, what transformers' own code gives on the same parameters:

- ``inv_freq32`` and ``attention_factor``: ``ROPE_INIT_FUNCTIONS[rope_type]
  (config, seq_len=L)`` (``modeling_rope_utils``), as it runs, in float32;
- ``inv_freq64``: the same function with torch's float32 turned into float64
  while it runs (``torch.float``, ``torch.float32`` and ``Tensor.float``), so
  that its formula can be compared with attn's float64 to 1e-12;
- ``q_rot32``/``k_rot32`` and ``q_rot64``/``k_rot64``: ``q`` and ``k``
  ([1, 1, 3, head_dim], float64) rotated by the family's rotary module
  (``LlamaRotaryEmbedding`` …, through its ``dynamic_rope_update``, which picks
  dynamic's and longrope's frequencies from ``max(position_ids) + 1``) and
  its ``apply_rotary_pos_emb``: keys at positions 0..2 and queries at
  L − 3..L − 1, in one call, as a forward pass over L tokens computes them;
  as it runs (cos and sin from float32 angles) and in float64 as above.

    PYTHONPATH=. /work/venv-ref/bin/python scripts/make_rope_refs.py   # rewrites tests/data/rope_refs.npz

``tests/test_rope_scaling.py`` compares attn with these, and with what the
installed transformers computes now when it is importable. The configs are
the real ones where a model is named (gpt-oss-20b, DeepSeek-V3, Kimi K2's
equal betas, Llama 3.1, Qwen2.5's YaRN recipe, Phi-3.5-mini-instruct's
factors); the others are made up to reach every branch of the formulas.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "rope_refs.npz"
TOKENS = 3  # keys at 0..2, queries at L − 3..L − 1

# microsoft/Phi-3.5-mini-instruct, config.json's rope_scaling (48 pairs: head_dim 96).
PHI35_LONG = [
    1.0800000429153442,
    1.1100000143051147,
    1.1399999856948853,
    1.340000033378601,
    1.5899999141693115,
    1.600000023841858,
    1.6200000047683716,
    2.620000123977661,
    3.2300000190734863,
    3.2300000190734863,
    4.789999961853027,
    7.400000095367432,
    7.700000286102295,
    9.09000015258789,
    12.199999809265137,
    17.670000076293945,
    24.46000099182129,
    28.57000160217285,
    30.420001983642578,
    30.840002059936523,
    32.590003967285156,
    32.93000411987305,
    42.320003509521484,
    44.96000289916992,
    50.340003967285156,
    50.45000457763672,
    57.55000305175781,
    57.93000411987305,
    58.21000289916992,
    60.1400032043457,
    62.61000442504883,
    62.62000274658203,
    62.71000289916992,
    63.1400032043457,
    63.1400032043457,
    63.77000427246094,
    63.93000411987305,
    63.96000289916992,
    63.970001220703125,
    64.02999877929688,
    64.06999969482422,
    64.08000183105469,
    64.12000274658203,
    64.41000366210938,
    64.4800033569336,
    64.51000213623047,
    64.52999877929688,
    64.83999633789062,
]
PHI35_SHORT = [
    1.0,
    1.0199999809265137,
    1.0299999713897705,
    1.0299999713897705,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0699999332427979,
    1.0999999046325684,
    1.1099998950958252,
    1.1599998474121094,
    1.1599998474121094,
    1.1699998378753662,
    1.2899998426437378,
    1.339999794960022,
    1.679999828338623,
    1.7899998426437378,
    1.8199998140335083,
    1.8499997854232788,
    1.8799997568130493,
    1.9099997282028198,
    1.9399996995925903,
    1.9899996519088745,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0799996852874756,
    2.0899996757507324,
    2.189999580383301,
    2.2199995517730713,
    2.5899994373321533,
    2.729999542236328,
    2.749999523162842,
    2.8399994373321533,
]


@dataclass(frozen=True)
class Case:
    """One RoPE scaling as a model's config gives it, and as attn spells it."""

    family: str  # whose config, rotary module and apply function: llama, gpt_oss, deepseek_v3, phi3
    theta: float
    hf: dict[str, Any]  # config.json's rope_scaling (without rope_theta)
    attn: dict[str, Any]  # attncli's RopeScaling keywords for the same
    head_dim: int  # features of a head (DeepSeek: qk_nope_head_dim + qk_rope_head_dim)
    rope_dim: int  # features rotated
    max_position_embeddings: int
    lengths: tuple[int, ...]  # sequence lengths L (the largest position + 1) to evaluate at
    style: str = "neox"  # attn's Rope style for the family's apply function
    features: str = "first"
    config: dict[str, Any] = field(default_factory=dict)  # more config fields


CASES: dict[str, Case] = {
    "linear": Case("llama", 10000.0, {"rope_type": "linear", "factor": 4.0}, {"factor": 4.0}, 128, 128, 4096, (8192,)),
    "dynamic": Case(
        "llama",
        10000.0,
        {"rope_type": "dynamic", "factor": 2.0},
        {"factor": 2.0, "original_max_position_embeddings": 2048},
        64,
        64,
        2048,
        (1024, 2048, 2049, 5000),
    ),
    "llama3.1": Case(
        "llama",
        500000.0,
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        128,
        128,
        131072,
        (16384,),
    ),
    "gpt-oss": Case(
        "gpt_oss",
        150000.0,
        {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        {
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        64,
        64,
        131072,
        (8192,),
    ),
    "yarn qwen2.5": Case(
        "llama",
        1000000.0,
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
        {"factor": 4.0, "original_max_position_embeddings": 32768},
        128,
        128,
        131072,
        (40000,),
    ),
    "deepseek-v3": Case(
        "deepseek_v3",
        10000.0,
        {
            "type": "yarn",
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        {
            "factor": 40.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        96,
        64,
        163840,
        (8192,),
        style="gptj",
        features="last",
        config={"qk_nope_head_dim": 32, "qk_rope_head_dim": 64},
    ),
    "yarn mscale 0.707 / 1": Case(
        "deepseek_v3",
        10000.0,
        {
            "type": "yarn",
            "factor": 40,
            "mscale": 0.707,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        {"factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096},
        96,
        64,
        163840,
        (6000,),
        style="gptj",
        features="last",
        config={"qk_nope_head_dim": 32, "qk_rope_head_dim": 64},
    ),
    "kimi-k2 equal betas": Case(
        "deepseek_v3",
        50000.0,
        {
            "type": "yarn",
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        {
            "factor": 32.0,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        96,
        64,
        131072,
        (5000,),
        style="gptj",
        features="last",
        config={"qk_nope_head_dim": 32, "qk_rope_head_dim": 64},
    ),
    "yarn attention_factor": Case(
        "llama",
        10000.0,
        {
            "rope_type": "yarn",
            "factor": 8.0,
            "attention_factor": 1.25,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
            "original_max_position_embeddings": 2048,
        },
        {
            "factor": 8.0,
            "attention_factor": 1.25,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
            "original_max_position_embeddings": 2048,
        },
        64,
        64,
        16384,
        (3000,),
    ),
    "phi-3.5 longrope": Case(
        "phi3",
        10000.0,
        {"type": "longrope", "long_factor": PHI35_LONG, "short_factor": PHI35_SHORT},
        {
            "factor": 32.0,
            "long_factor": PHI35_LONG,
            "short_factor": PHI35_SHORT,
            "original_max_position_embeddings": 4096,
        },
        96,
        96,
        131072,
        (4096, 4097),
        config={"original_max_position_embeddings": 4096},
    ),
    "longrope partial": Case(
        "phi3",
        10000.0,
        {
            "type": "longrope",
            "attention_factor": 1.1,
            "short_factor": [1.0 + i / 16 for i in range(8)],
            "long_factor": [2.0 + i for i in range(8)],
        },
        {
            "attention_factor": 1.1,
            "short_factor": [1.0 + i / 16 for i in range(8)],
            "long_factor": [2.0 + i for i in range(8)],
            "original_max_position_embeddings": 64,
        },
        32,
        16,
        1024,
        (64, 65),
        config={"original_max_position_embeddings": 64, "partial_rotary_factor": 0.5},
    ),
}


ROTARY = {
    "llama": "LlamaRotaryEmbedding",
    "gpt_oss": "GptOssRotaryEmbedding",
    "deepseek_v3": "DeepseekV3RotaryEmbedding",
    "phi3": "Phi3RotaryEmbedding",
}


def kind(case: Case) -> str:
    return case.hf.get("rope_type", case.hf.get("type"))


def inputs(case: Case) -> dict[str, np.ndarray]:
    """q and k [1, 1, TOKENS, head_dim] in float64, the same for every length of a case."""
    rng = np.random.default_rng(sum(map(ord, kind(case) + case.family)) + case.head_dim)
    return {
        "q": rng.standard_normal((1, 1, TOKENS, case.head_dim)),
        "k": rng.standard_normal((1, 1, TOKENS, case.head_dim)),
    }


@contextlib.contextmanager
def float64_torch() -> Iterator[None]:
    """transformers' float32 RoPE code run in float64: torch.float, torch.float32 and
    Tensor.float() mean float64 until the block ends, and so does the default dtype
    (dynamic's seq_len arrives as an int64 tensor, and ``factor * seq_len`` takes it)."""
    import torch

    saved = torch.float, torch.float32, torch.Tensor.float, torch.get_default_dtype()
    torch.float = torch.float32 = torch.float64  # type: ignore[misc]
    torch.Tensor.float = lambda self, *args, **kwargs: self.double()  # type: ignore[method-assign]
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.float, torch.float32, torch.Tensor.float = saved[:3]  # type: ignore[misc, method-assign]
        torch.set_default_dtype(saved[3])


def hf_config(case: Case) -> Any:
    import transformers

    heads = 2
    common = dict(
        num_attention_heads=heads,
        num_key_value_heads=heads,
        rope_theta=case.theta,
        max_position_embeddings=case.max_position_embeddings,
        rope_scaling=dict(case.hf),
    )
    if case.family == "deepseek_v3":
        return transformers.DeepseekV3Config(hidden_size=64 * heads, v_head_dim=case.head_dim, **common, **case.config)
    classes = {"llama": transformers.LlamaConfig, "gpt_oss": transformers.GptOssConfig, "phi3": transformers.Phi3Config}
    extra = {} if case.family == "phi3" else {"head_dim": case.head_dim}
    return classes[case.family](hidden_size=case.head_dim * heads, **common, **extra, **case.config)


def frequencies(case: Case, length: int, float64: bool) -> tuple[np.ndarray, float]:
    """transformers' ROPE_INIT_FUNCTIONS[kind](config, seq_len=length): [rope_dim / 2], the attention factor."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    with float64_torch() if float64 else contextlib.nullcontext():
        inv_freq, factor = ROPE_INIT_FUNCTIONS[kind(case)](hf_config(case), None, seq_len=length)
    assert inv_freq.dtype == (_torch().float64 if float64 else _torch().float32)
    return inv_freq.double().numpy(), float(factor)


def rotated(case: Case, length: int, q: np.ndarray, k: np.ndarray, float64: bool) -> tuple[np.ndarray, np.ndarray]:
    """q and k rotated as the family's attention does: its rotary module over the positions
    0..TOKENS − 1 (keys) and L − TOKENS..L − 1 (queries) in one call, then its apply function."""
    import importlib

    torch = _torch()
    module = importlib.import_module(f"transformers.models.{case.family}.modeling_{case.family}")
    rotary_class = getattr(module, ROTARY[case.family])
    positions = torch.cat([torch.arange(TOKENS), torch.arange(length - TOKENS, length)])[None]  # [1, 2 · TOKENS]
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    with float64_torch() if float64 else contextlib.nullcontext():
        rotary = rotary_class(hf_config(case))
        cos, sin = rotary(qt, positions)  # [1, 2 · TOKENS, rope_dim], in q's dtype (float64)
    k_cos, k_sin, q_cos, q_sin = cos[:, :TOKENS], sin[:, :TOKENS], cos[:, TOKENS:], sin[:, TOKENS:]
    if case.family != "deepseek_v3":
        q_rot, _ = module.apply_rotary_pos_emb(qt, qt, q_cos, q_sin)
        _, k_rot = module.apply_rotary_pos_emb(kt, kt, k_cos, k_sin)
        return q_rot.numpy(), k_rot.numpy()
    # DeepSeek (MLA): the last qk_rope_head_dim features, pairs (2i, 2i + 1), returned de-interleaved
    # (rotated evens, then odds); put back in place, attn's gptj layout (q·k is the same either way).
    nope = case.head_dim - case.rope_dim
    q_pe, _ = module.apply_rotary_pos_emb_interleave(qt[..., nope:], qt[..., nope:], q_cos, q_sin)
    _, k_pe = module.apply_rotary_pos_emb_interleave(kt[..., nope:], kt[..., nope:], k_cos, k_sin)
    out = []
    for x, pe in ((q, q_pe.numpy()), (k, k_pe.numpy())):
        y = x.copy()
        y[..., nope::2], y[..., nope + 1 :: 2] = pe[..., : case.rope_dim // 2], pe[..., case.rope_dim // 2 :]
        out.append(y)
    return out[0], out[1]


def _torch() -> Any:
    import torch

    return torch


def main() -> None:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    pinned: dict[str, Any] = {
        "torch_version": np.array(torch.__version__),
        "transformers_version": np.array(transformers.__version__),
    }
    for name, case in CASES.items():
        x = inputs(case)
        pinned[f"{name}.q"], pinned[f"{name}.k"] = x["q"], x["k"]
        for length in case.lengths:
            key = f"{name}@{length}"
            pinned[f"{key}.inv_freq32"], factor32 = frequencies(case, length, float64=False)
            pinned[f"{key}.inv_freq64"], factor64 = frequencies(case, length, float64=True)
            assert factor32 == factor64
            pinned[f"{key}.attention_factor"] = np.array(factor64)
            for bits, float64 in ((32, False), (64, True)):
                pinned[f"{key}.q_rot{bits}"], pinned[f"{key}.k_rot{bits}"] = rotated(
                    case, length, x["q"], x["k"], float64
                )
    np.savez_compressed(OUT, **pinned)
    print(
        f"wrote {OUT} ({OUT.stat().st_size:,} bytes, {len(pinned)} arrays) "
        f"with torch {torch.__version__}, transformers {transformers.__version__}"
    )


if __name__ == "__main__":
    main()
