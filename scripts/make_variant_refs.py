"""Reference outputs for the attention variants, from the implementations people use.

Not part of the test suite: it needs torch, which attn never uses. It writes
``tests/data/variant_refs.npz``: each case's inputs (float32 values, so that
float64 and float32 runs read the same numbers) and the outputs torch gives
for them in float64 and in float32. ``tests/test_torch_refs.py`` compares
attn with those pinned numbers always, and with torch live when it is
installed (importing ``CASES`` from here; torch is imported only inside the
functions that need it).

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 -e .
    /tmp/ref/bin/python scripts/make_variant_refs.py        # rewrites tests/data/variant_refs.npz

Each case is written the way its source writes it:

* PyTorch ``scaled_dot_product_attention`` (``enable_gqa``, ``is_causal``, masks);
* FlexAttention ``score_mod`` / ``mask_mod`` for soft-cap, ALiBi and windows;
* FlashAttention's ``attention_ref`` (tests/test_util.py): ``construct_local_mask``,
  ``attn_bias_from_alibi_slopes``, soft-cap as ``tanh(scores / softcap) * softcap``;
* Hugging Face's RoPE: LLaMA/GPT-NeoX ``rotate_half`` (partial ``rotary_ndims``)
  and GPT-J ``rotate_every_two`` with ``repeat_interleave``d sin/cos;
* gpt-oss's ``sdpa``: a sink column concatenated to the scores, softmax, dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "variant_refs.npz"


@dataclass
class Case:
    """One reference: input shapes, attn's settings, and torch's way of computing it."""

    shapes: dict[str, tuple[int, ...]]  # q, k, v and any extra input (mask, bias, slopes, sinks)
    attn: dict[str, Any]  # AttentionOptions keywords; a string value names an input ("@sinks")
    torch: Callable[[dict[str, Any]], Any]  # inputs as torch tensors -> output [B, H, n_q, d_v]
    extra: dict[str, Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]] = field(default_factory=dict)


# ---------------------------------------------------------------- the sources' own formulas


def press_slopes(n: int) -> list[float]:
    """ALiBi slopes as Press et al.'s reference code (and Hugging Face's BLOOM) compute them."""

    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + press_slopes(2 * closest)[0::2][: n - closest]


def construct_local_mask(seqlen_q: int, seqlen_k: int, window_size: tuple[int, int]):
    """FlashAttention's tests/test_util.py: True where a pair is masked out."""
    import torch

    row_idx = torch.arange(seqlen_q).unsqueeze(-1)
    col_idx = torch.arange(seqlen_k)
    sk, sq = seqlen_k, seqlen_q
    if window_size[0] < 0:
        return col_idx > row_idx + sk - sq + window_size[1]
    sk_t = torch.full_like(col_idx, seqlen_k)
    return torch.logical_or(
        col_idx > torch.minimum(row_idx + sk - sq + window_size[1], sk_t), col_idx < row_idx + sk - sq - window_size[0]
    )


def attn_bias_from_alibi_slopes(slopes, seqlen_q: int, seqlen_k: int):
    """FlashAttention's tests/test_util.py (not causal): -slope · |i + sk − sq − j|, slopes [b, h]."""
    import torch

    slopes = slopes[:, :, None, None]
    row_idx = torch.arange(seqlen_q).unsqueeze(-1)
    col_idx = torch.arange(seqlen_k)
    relative_pos = torch.abs(row_idx + seqlen_k - seqlen_q - col_idx)
    return -slopes * relative_pos.to(dtype=slopes.dtype)


def attention_ref(q, k, v, window_size=(-1, -1), softcap=0.0, attn_bias=None):
    """FlashAttention's attention_ref, for [B, H, n, d] (it takes [B, n, H, d]); K/V heads repeated for GQA."""
    import torch

    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    d = q.shape[-1]
    scores = torch.einsum("bhtd,bhsd->bhts", q / math.sqrt(d), k)
    if softcap > 0:
        scores = scores / softcap
        scores = scores.tanh()
        scores = scores * softcap
    if window_size[0] >= 0 or window_size[1] >= 0:
        local_mask = construct_local_mask(q.shape[2], k.shape[2], window_size)
        scores = scores.masked_fill(local_mask, float("-inf"))
    if attn_bias is not None:
        scores = scores + attn_bias
    attention = torch.softmax(scores, dim=-1)
    return torch.einsum("bhts,bhsd->bhtd", attention, v)


def rotate_half(x):
    """Hugging Face LLaMA / GPT-NeoX."""
    import torch

    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def neox_rope(x, positions, base: float, rotary_ndims: int):
    """GPT-NeoX's rotary on the first rotary_ndims features (all of them: LLaMA's).

    Hugging Face computes inv_freq and the angles in float32 whatever the
    model's dtype; here they are in x's dtype, so that the float64 case is
    exact (float32 angles differ by up to position · 2^-24 rad)."""
    import torch

    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_ndims, 2, dtype=torch.int64).to(x.dtype) / rotary_ndims))
    freqs = torch.outer(positions.to(x.dtype), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x_rot, x_pass = x[..., :rotary_ndims], x[..., rotary_ndims:]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)


def rotate_every_two(x):
    """Hugging Face GPT-J."""
    import torch

    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def gptj_rope(x, positions, rotary_dim: int, base: float = 10000.0):
    """GPT-J's create_sinusoidal_positions and apply_rotary_pos_emb on the first rotary_dim features
    (frequencies in x's dtype, as in ``neox_rope``)."""
    import torch

    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(x.dtype) / rotary_dim))
    sinusoid_inp = torch.einsum("i , j -> i j", positions.to(x.dtype), inv_freq.to(x.dtype))
    sin = torch.repeat_interleave(sinusoid_inp.sin(), 2, dim=-1)
    cos = torch.repeat_interleave(sinusoid_inp.cos(), 2, dim=-1)
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((x_rot * cos + rotate_every_two(x_rot) * sin, x_pass), dim=-1)


def gpt_oss_sdpa(Q, K, V, S, sm_scale: float, sliding_window: int = 0):  # noqa: N803 - gpt-oss's names
    """gpt-oss's torch sdpa: Q [n_tokens, n_heads, q_mult, d], K, V [n_tokens, n_heads, d], S [n_heads · q_mult]."""
    import torch

    n_tokens, n_heads, q_mult, d_head = Q.shape
    K = K[:, :, None, :].expand(-1, -1, q_mult, -1)
    V = V[:, :, None, :].expand(-1, -1, q_mult, -1)
    S = S.reshape(n_heads, q_mult, 1, 1).expand(-1, -1, n_tokens, -1)
    mask = torch.triu(Q.new_full((n_tokens, n_tokens), -float("inf")), diagonal=1)
    if sliding_window > 0:
        mask += torch.tril(mask.new_full((n_tokens, n_tokens), -float("inf")), diagonal=-sliding_window)
    QK = torch.einsum("qhmd,khmd->hmqk", Q, K)
    QK *= sm_scale
    QK += mask[None, None, :, :]
    QK = torch.cat([QK, S], dim=-1)
    W = torch.softmax(QK, dim=-1)
    W = W[..., :-1]
    attn = torch.einsum("hmqk,khmd->qhmd", W, V)
    return attn  # [n_tokens, n_heads, q_mult, d]


# ---------------------------------------------------------------- the cases


def _sdpa(x, **kw):
    import torch

    return torch.nn.functional.scaled_dot_product_attention(x["q"], x["k"], x["v"], **kw)


def _sdpa_mask_bias(x):
    import torch

    additive = x["bias"] + torch.where(x["mask"] > 0.5, 0.0, float("-inf")).to(x["bias"].dtype)
    return torch.nn.functional.scaled_dot_product_attention(x["q"], x["k"], x["v"], attn_mask=additive, enable_gqa=True)


def _flex(x, score_mod=None, mask_mod=None):
    import warnings

    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = None
    if mask_mod is not None:
        b, h, n_q, _ = x["q"].shape
        block_mask = create_block_mask(mask_mod, b, h, n_q, x["k"].shape[2], device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile": eager is what we want
        return flex_attention(x["q"], x["k"], x["v"], score_mod=score_mod, block_mask=block_mask, enable_gqa=True)


def _flex_alibi(x):
    import torch

    slopes = torch.tensor(press_slopes(x["q"].shape[1]), dtype=x["q"].dtype)

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()

    return _flex(x, score_mod=alibi)


def _flex_window(left: int, right: int):
    def compute(x):
        shift = x["k"].shape[2] - x["q"].shape[2]

        def window(b, h, q_idx, kv_idx):
            return (kv_idx >= q_idx + shift - left) & (kv_idx <= q_idx + shift + right)

        return _flex(x, mask_mod=window)

    return compute


def _flex_softcap(cap: float):
    def compute(x):
        import torch

        def softcap(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)

        return _flex(x, score_mod=softcap)

    return compute


def _fa_ref(x):
    n_q, n_k = x["q"].shape[2], x["k"].shape[2]
    bias = attn_bias_from_alibi_slopes(x["slopes"], n_q, n_k)
    return attention_ref(x["q"], x["k"], x["v"], window_size=(3, 1), softcap=2.0, attn_bias=bias)


def _fa_ref_causal_local(x):
    return attention_ref(x["q"], x["k"], x["v"], window_size=(4, 0))  # FlashAttention's causal=True: right = 0


def _hf_neox(base: float, rotary_ndims: int | None, causal: bool):
    def compute(x):
        import torch

        q, k = x["q"], x["k"]
        n_q, n_k, d = q.shape[2], k.shape[2], q.shape[3]
        ndims = rotary_ndims or d
        q = neox_rope(q, torch.arange(n_k - n_q, n_k), base, ndims)  # queries: the last n_q positions
        k = neox_rope(k, torch.arange(n_k), base, ndims)
        return torch.nn.functional.scaled_dot_product_attention(q, k, x["v"], is_causal=causal, enable_gqa=True)

    return compute


def _hf_gptj(x):
    import torch

    q = gptj_rope(x["q"], torch.arange(x["q"].shape[2]) + 3, rotary_dim=8)  # queries from position 3
    k = gptj_rope(x["k"], torch.arange(x["k"].shape[2]), rotary_dim=8)
    return torch.nn.functional.scaled_dot_product_attention(q, k, x["v"])


def _gpt_oss(sliding_window: int):
    def compute(x):
        q, k, v = x["q"][0], x["k"][0], x["v"][0]  # [H_q, n, d], [H_kv, n, d]
        h_q, n, d = q.shape
        h_kv = k.shape[0]
        Q = q.reshape(h_kv, h_q // h_kv, n, d).permute(2, 0, 1, 3)  # query head h = kv · q_mult + m
        out = gpt_oss_sdpa(Q, k.permute(1, 0, 2), v.permute(1, 0, 2), x["sinks"], 1 / math.sqrt(d), sliding_window)
        return out.permute(1, 2, 0, 3).reshape(1, h_q, n, -1)

    return compute


def _keep_some(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A 0/1 mask with about 70 % ones and at least one per row."""
    keep = rng.random(shape) < 0.7
    keep[..., 0] = True
    return keep.astype(np.float32)


CASES: dict[str, Case] = {
    "sdpa_gqa_causal": Case(
        {"q": (2, 8, 7, 16), "k": (2, 2, 7, 16), "v": (2, 2, 7, 12)},
        {"causal": "top-left"},
        lambda x: _sdpa(x, is_causal=True, enable_gqa=True),
    ),
    "sdpa_mqa_mask_bias": Case(
        {"q": (2, 4, 5, 16), "k": (2, 1, 9, 16), "v": (2, 1, 9, 8), "mask": (2, 1, 5, 9), "bias": (1, 4, 5, 9)},
        {"mask": "@mask", "bias": "@bias"},
        _sdpa_mask_bias,
        {"mask": _keep_some},
    ),
    "flex_softcap": Case(
        {"q": (1, 4, 6, 16), "k": (1, 4, 10, 16), "v": (1, 4, 10, 16)},
        {"softcap": 1.5},
        _flex_softcap(1.5),
        {"q": lambda rng, shape: (4 * rng.standard_normal(shape)).astype(np.float32)},
    ),  # scores past the cap
    "flex_alibi_8_heads": Case(
        {"q": (1, 8, 6, 16), "k": (1, 8, 6, 16), "v": (1, 8, 6, 16)}, {"alibi": True}, _flex_alibi
    ),
    "flex_alibi_6_heads": Case(
        {"q": (1, 6, 6, 16), "k": (1, 2, 6, 16), "v": (1, 2, 6, 16)}, {"alibi": True}, _flex_alibi
    ),
    "flex_window": Case(
        {"q": (1, 2, 5, 8), "k": (1, 2, 11, 8), "v": (1, 2, 11, 8)}, {"window": (2, 1)}, _flex_window(2, 1)
    ),
    "flashattention_window_softcap_alibi": Case(
        {"q": (2, 4, 5, 16), "k": (2, 2, 9, 16), "v": (2, 2, 9, 16), "slopes": (2, 4)},
        {"window": (3, 1), "softcap": 2.0, "alibi_slopes": "@slopes"},
        _fa_ref,
        {"slopes": lambda rng, shape: rng.uniform(0.05, 1.0, shape).astype(np.float32)},
    ),
    "flashattention_causal_local": Case(
        {"q": (1, 2, 3, 8), "k": (1, 2, 8, 8), "v": (1, 2, 8, 8)}, {"window": (4, 0)}, _fa_ref_causal_local
    ),
    "hf_llama_rope": Case(
        {"q": (1, 4, 4, 16), "k": (1, 2, 10, 16), "v": (1, 2, 10, 16)},
        {"rope": ("neox", 10000.0, None, None)},
        _hf_neox(10000.0, None, causal=False),
    ),
    "hf_neox_partial_rope": Case(
        {"q": (1, 2, 6, 16), "k": (1, 2, 6, 16), "v": (1, 2, 6, 16)},
        {"rope": ("neox", 500.0, 8, None), "causal": "top-left"},
        _hf_neox(500.0, 8, causal=True),
    ),
    "hf_gptj_rope": Case(
        {"q": (1, 2, 2, 16), "k": (1, 2, 7, 16), "v": (1, 2, 7, 16)}, {"rope": ("gptj", 10000.0, 8, 3)}, _hf_gptj
    ),
    "gpt_oss_sinks_window": Case(
        {"q": (1, 4, 8, 16), "k": (1, 2, 8, 16), "v": (1, 2, 8, 16), "sinks": (4,)},
        {"sinks": "@sinks", "causal": "top-left", "window": (3, 0)},
        _gpt_oss(4),
    ),
    "gpt_oss_sinks": Case(
        {"q": (1, 4, 8, 16), "k": (1, 2, 8, 16), "v": (1, 2, 8, 16), "sinks": (4,)},
        {"sinks": "@sinks", "causal": "top-left"},
        _gpt_oss(0),
    ),
}


def inputs(name: str, seed: int) -> dict[str, np.ndarray]:
    """A case's inputs, float32 values (standard normal unless the case says otherwise)."""
    rng = np.random.default_rng(seed)
    case = CASES[name]
    return {
        key: (case.extra[key](rng, shape) if key in case.extra else rng.standard_normal(shape).astype(np.float32))
        for key, shape in case.shapes.items()
    }


def torch_output(name: str, arrays: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """Torch's output for a case, computed in float64 or float32."""
    import torch

    torch_dtype = {"float64": torch.float64, "float32": torch.float32}[dtype]
    x = {key: torch.from_numpy(np.asarray(a, dtype=np.float64)).to(torch_dtype) for key, a in arrays.items()}
    with torch.no_grad():
        return CASES[name].torch(x).numpy()


def main() -> None:
    import torch

    pinned: dict[str, np.ndarray] = {}
    for seed, name in enumerate(CASES):
        arrays = inputs(name, seed)
        for key, array in arrays.items():
            pinned[f"{name}.{key}"] = array
        for dtype in ("float64", "float32"):
            pinned[f"{name}.out_{dtype}"] = torch_output(name, arrays, dtype)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, torch_version=np.array(torch.__version__), **pinned)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes): {len(CASES)} cases with torch {torch.__version__}")


if __name__ == "__main__":
    main()
