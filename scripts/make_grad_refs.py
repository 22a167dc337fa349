"""Reference gradients of attention from PyTorch autograd, pinned for the tests.

Not part of the test suite: it needs torch, which attn never uses. It writes
``tests/data/grad_refs.npz``: for each case its inputs (float64), attn's
settings as JSON, and the gradients torch's autograd gives in float64 for
the output gradient dO. ``tests/test_grad.py`` compares ``attention_grad``
with them to 1e-10.

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 -e .
    /tmp/ref/bin/python scripts/make_grad_refs.py        # rewrites tests/data/grad_refs.npz

Plain, causal, masked and grouped-query cases go through
``scaled_dot_product_attention`` (``enable_gqa``); soft-cap, ALiBi, windows,
RoPE (Hugging Face's ``rotate_half`` and GPT-J's ``rotate_every_two``),
biases and sinks (gpt-oss: a sink column joins the softmax, then is dropped)
through an explicit implementation written here, sharing no code with attn.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "grad_refs.npz"


def alibi_slopes(n: int) -> list[float]:
    """Press et al.'s slopes for a power of two heads: start · start^h, start = 2^(−8/n)."""
    start = 2 ** (-(2 ** -(math.log2(n) - 3)))
    return [start * start**h for h in range(n)]


def rotate_half(x: Any) -> Any:
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_every_two(x: Any) -> Any:
    import torch

    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def rope(x: Any, positions: Any, style: str, theta: float, dim: int) -> Any:
    """Hugging Face's RoPE on the first ``dim`` features (neox: LLaMA/GPT-NeoX; gptj: GPT-J)."""
    import torch

    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # [n, dim / 2]
    if style == "neox":
        emb = torch.cat((angles, angles), dim=-1)
        turn = rotate_half
    else:
        emb = angles.repeat_interleave(2, dim=-1)
        turn = rotate_every_two
    head, tail = x[..., :dim], x[..., dim:]
    return torch.cat((head * emb.cos() + turn(head) * emb.sin(), tail), dim=-1)


def explicit(q: Any, k: Any, v: Any, s: dict[str, Any], arrays: dict[str, Any]) -> Any:
    """Attention written out in torch, every variant in the order of its source."""
    import torch

    h_q, n_q, d_k = q.shape[-3:]
    n_k = k.shape[-2]
    if "rope" in s:
        style, theta, dim, offset = s["rope"]
        dim = dim or d_k
        start = n_k - n_q if offset is None else offset
        q = rope(q, torch.arange(n_q) + start, style, theta, dim)
        k = rope(k, torch.arange(n_k), style, theta, dim)
    group = h_q // k.shape[-3]
    k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scores = q @ k.transpose(-1, -2) * (s.get("scale") or 1 / math.sqrt(d_k)) / s.get("temperature", 1.0)
    if "softcap" in s:
        scores = torch.tanh(scores / s["softcap"]) * s["softcap"]
    if "bias" in arrays:
        scores = scores + arrays["bias"]
    i, j = torch.arange(n_q)[:, None] + n_k - n_q, torch.arange(n_k)[None, :]
    if s.get("alibi"):
        slopes = torch.tensor(alibi_slopes(h_q), dtype=torch.float64)[:, None, None]
        scores = scores - slopes * (i - j).abs()
    allowed = torch.ones(n_q, n_k, dtype=torch.bool)
    if s.get("causal") == "bottom-right":
        allowed &= j <= i
    if "window" in s:
        left, right = s["window"]
        if left >= 0:
            allowed &= j >= i - left
        if right >= 0:
            allowed &= j <= i + right
    scores = scores.masked_fill(~allowed, -math.inf)
    if "sinks" in arrays:
        sink = arrays["sinks"][:, None, None].expand(*scores.shape[:-1], 1)
        weights = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    return weights @ v


def sdpa(q: Any, k: Any, v: Any, s: dict[str, Any], arrays: dict[str, Any]) -> Any:
    import torch

    return torch.nn.functional.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=arrays.get("mask"),
        is_causal=s.get("causal") == "top-left",
        scale=s.get("scale"),
        enable_gqa=q.shape[-3] != k.shape[-3],
    )


# name: (implementation, heads (H_q, H_kv), attn's settings, extra arrays to draw)
CASES: dict[str, tuple[Any, tuple[int, int], dict[str, Any], tuple[str, ...]]] = {
    "sdpa_plain": (sdpa, (2, 2), {}, ()),
    "sdpa_scale": (sdpa, (2, 2), {"scale": 0.3}, ()),
    "sdpa_causal": (sdpa, (2, 2), {"causal": "top-left"}, ()),
    "sdpa_mask": (sdpa, (2, 2), {}, ("mask",)),
    "sdpa_gqa": (sdpa, (4, 2), {}, ()),
    "sdpa_gqa_causal": (sdpa, (6, 2), {"causal": "top-left"}, ()),
    "softcap": (explicit, (2, 2), {"softcap": 0.7, "temperature": 1.3}, ()),
    "alibi": (explicit, (4, 4), {"alibi": True}, ()),
    "window": (explicit, (2, 2), {"window": [1, 1], "causal": "bottom-right"}, ()),
    "bias": (explicit, (2, 2), {}, ("bias",)),
    "rope_neox": (explicit, (2, 2), {"rope": ["neox", 10000.0, None, None]}, ()),
    "rope_gptj_partial": (explicit, (2, 2), {"rope": ["gptj", 500.0, 4, 2]}, ()),
    "sinks": (explicit, (4, 2), {}, ("sinks",)),
    "everything_gqa": (
        explicit,
        (4, 2),
        {
            "softcap": 2.0,
            "alibi": True,
            "rope": ["neox", 10000.0, None, None],
            "window": [3, -1],
            "causal": "bottom-right",
        },
        ("sinks", "bias"),
    ),
    "gptj_softcap_sinks_window": (
        explicit,
        (6, 3),
        {"rope": ["gptj", 10000.0, None, 1], "softcap": 1.0, "window": [1, 2], "scale": 0.5},
        ("sinks",),
    ),
}


def torch_grads(name: str, inputs: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """PyTorch autograd's dq, dk, dv (and dsinks, dbias) of one case, in float64."""
    import torch

    implementation, _, settings, _ = CASES[name]
    q, k, v = (torch.tensor(inputs[x], requires_grad=True) for x in "qkv")
    tensors = {key: torch.tensor(a, requires_grad=key != "mask") for key, a in arrays.items()}
    out = implementation(q, k, v, settings, tensors)
    out.backward(torch.tensor(inputs["dout"]))
    grads = {"dq": q.grad, "dk": k.grad, "dv": v.grad}
    grads.update({f"d{key}": t.grad for key, t in tensors.items() if key != "mask"})
    return {key: value.numpy() for key, value in grads.items()}


def main() -> None:
    rng = np.random.default_rng(15)
    n_q, n_k, d_k, d_v = 5, 7, 6, 4
    pinned: dict[str, np.ndarray] = {}
    for name, (_, (h_q, h_kv), settings, extra) in CASES.items():
        inputs = {
            "q": rng.normal(size=(1, h_q, n_q, d_k)),
            "k": rng.normal(size=(1, h_kv, n_k, d_k)),
            "v": rng.normal(size=(1, h_kv, n_k, d_v)),
            "dout": rng.normal(size=(1, h_q, n_q, d_v)),
        }
        arrays: dict[str, np.ndarray] = {}
        if "mask" in extra:
            arrays["mask"] = rng.random(size=(n_q, n_k)) < 0.7
            arrays["mask"][:, 0] = True  # every query sees a key (SDPA gives NaN otherwise)
        if "bias" in extra:
            arrays["bias"] = rng.normal(size=(n_q, n_k))
        if "sinks" in extra:
            arrays["sinks"] = rng.normal(size=h_q)
        for key, value in {**inputs, **arrays, **torch_grads(name, inputs, arrays)}.items():
            pinned[f"{name}.{key}"] = value
        pinned[f"{name}.options"] = np.array(json.dumps(settings))
    np.savez_compressed(OUT, **pinned)  # type: ignore[arg-type]
    print(f"wrote {len(CASES)} cases to {OUT}")


if __name__ == "__main__":
    main()
