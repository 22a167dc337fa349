"""The one test reference: attention written out one query at a time in
float64, as seed 000 does it, sharing no code with ``attncli.core``.

Every maths test compares with these (the reference of ``attncli.core`` and
its blocked kernel alike), so each equation has one independent check.
"""

import math

import numpy as np


def attention(
    q,
    k,
    v,
    scale=None,
    allowed=None,
    bias=None,
    causal=None,
    temperature=1.0,
    softcap=None,
    window=None,
    slope=None,
    rope=None,
    sink=None,
):
    """softmax(q·k · scale / temperature + bias) v, query by query, over the keys allowed.

    [n_q, d_k], [n_k, d_k], [n_k, d_v] -> output [n_q, d_v], weights [n_q, n_k].
    ``allowed`` [n_q, n_k] bool; ``bias`` [n_q, n_k] added after scaling;
    ``causal`` None, "top-left" (key j ≤ i) or "bottom-right" (j ≤ i + n_k − n_q).
    The variants: ``softcap`` C (C·tanh(x/C) of the scaled score, before the
    bias); ``window`` (left, right) with −1 unbounded, around key i + n_k − n_q;
    ``slope`` m: ALiBi adds −m·|i + n_k − n_q − j|; ``rope`` (style, theta,
    dim, offset) rotates q and k first; ``sink`` s joins each denominator.
    """
    q, k, v = (np.asarray(m, dtype=np.float64) for m in (q, k, v))
    n_q, n_k = len(q), len(k)
    scale = 1 / math.sqrt(k.shape[1]) if scale is None else scale
    if rope is not None:
        style, theta, dim, offset = rope
        start = n_k - n_q if offset is None else offset
        q = np.array([rotate(row, start + i, style, theta, dim) for i, row in enumerate(q)]).reshape(q.shape)
        k = np.array([rotate(row, j, style, theta, dim) for j, row in enumerate(k)]).reshape(k.shape)
    shift = n_k - n_q  # the key in line with query i is i + shift (bottom-right)
    offset = {None: None, "top-left": 0, "bottom-right": shift}[causal]
    out = np.zeros((n_q, v.shape[1]))
    weights = np.zeros((n_q, n_k))
    for i in range(n_q):
        keep = [
            j
            for j in range(n_k)
            if (allowed is None or allowed[i][j])
            and (offset is None or j <= i + offset)
            and (window is None or window[0] == -1 or j >= i + shift - window[0])
            and (window is None or window[1] == -1 or j <= i + shift + window[1])
        ]
        if not keep:
            continue  # a query that may see nothing: zero weights, zero output
        x = []
        for j in keep:
            logit = float(q[i] @ k[j]) * scale / temperature
            if softcap is not None:
                logit = softcap * math.tanh(logit / softcap)
            logit += 0.0 if bias is None else bias[i][j]
            logit -= 0.0 if slope is None else slope * abs(i + shift - j)
            x.append(logit)
        x = np.array(x)
        top = x.max() if sink is None else max(x.max(), sink)
        e = np.exp(x - top)
        total = e.sum() + (0.0 if sink is None else math.exp(sink - top))
        for w, j in zip(e / total, keep, strict=True):
            weights[i, j] = w
            out[i] += w * v[j]
    return out, weights


def rotate(x, position, style, theta=10000.0, dim=None):
    """One row x [d] rotated by RoPE at ``position``.

    neox: Hugging Face's x·cos + rotate_half(x)·sin, cos and sin repeated over
    both halves; gptj: the pairs (x[2i], x[2i+1]) as complex numbers times
    e^(i·angle) (Meta's ``apply_rotary_emb``). Only the first ``dim`` features turn.
    """
    dim = len(x) if dim is None else dim
    angles = position / theta ** (np.arange(0, dim, 2) / dim)  # [dim / 2]
    head, tail = x[:dim], x[dim:]
    if style == "neox":
        cos, sin = np.cos(np.concatenate([angles, angles])), np.sin(np.concatenate([angles, angles]))
        rotate_half = np.concatenate([-head[dim // 2 :], head[: dim // 2]])
        turned = head * cos + rotate_half * sin
    else:
        pairs = (head[0::2] + 1j * head[1::2]) * np.exp(1j * angles)
        turned = np.stack([pairs.real, pairs.imag], axis=-1).reshape(-1)
    return np.concatenate([turned, tail])


def alibi_slopes(n):
    """Press et al.'s slopes, as their reference code writes them (get_slopes)."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n - closest]


def heads_attention(q, k, v, *, slopes=None, sinks=None, allowed=None, bias=None, **settings):
    """``attention`` on [B, H_q, n_q, d_k], [B, H_kv, n_k, d_k], [B, H_kv, n_k, d_v]
    one (batch, head) at a time: query head h reads K/V head h // (H_q / H_kv).
    ``slopes`` and ``sinks`` [H_q]; ``allowed`` and ``bias`` [B, H_q, n_q, n_k] (or None)."""
    q, k, v = (np.asarray(m, dtype=np.float64) for m in (q, k, v))
    n_batch, h_q, n_q, _ = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    out = np.zeros((n_batch, h_q, n_q, v.shape[-1]))
    weights = np.zeros((n_batch, h_q, n_q, n_k))
    for b in range(n_batch):
        for h in range(h_q):
            kv = h // (h_q // h_kv)
            out[b, h], weights[b, h] = attention(
                q[b, h],
                k[b, kv],
                v[b, kv],
                slope=None if slopes is None else slopes[h],
                sink=None if sinks is None else sinks[h],
                allowed=None if allowed is None else allowed[b, h],
                bias=None if bias is None else bias[b, h],
                **settings,
            )
    return out, weights


def split_mask(mask):
    """A Python-API mask as (allowed, bias): booleans or 0/1 say where a query
    may attend; other floats are added, −inf forbidding the pair."""
    if mask is None:
        return None, None
    mask = np.asarray(mask)
    if mask.dtype == bool or np.isin(mask, (0, 1)).all():
        return mask.astype(bool), None
    return np.isfinite(mask), np.where(np.isfinite(mask), mask, 0.0)


def multi_head(
    x, wq, wk, wv, *, z=None, wo=None, bq=None, bk=None, bv=None, bo=None, heads=1, causal=False, scale=None
):
    """Multi-head attention written out plainly: one head at a time, in the row
    convention (Q = X W_Q + b_q). -> (weights [heads, n_q, n_k], output [n_q, d_out])."""
    x = np.asarray(x, dtype=np.float64)
    z = x if z is None else np.asarray(z, dtype=np.float64)
    q = x @ wq + (0 if bq is None else bq)
    k = z @ wk + (0 if bk is None else bk)
    v = z @ wv + (0 if bv is None else bv)
    d_head, d_v_head = q.shape[1] // heads, v.shape[1] // heads
    all_weights, outputs = [], []
    for h in range(heads):
        out, weights = attention(
            q[:, h * d_head : (h + 1) * d_head],
            k[:, h * d_head : (h + 1) * d_head],
            v[:, h * d_v_head : (h + 1) * d_v_head],
            scale=scale,
            causal="top-left" if causal else None,
        )
        all_weights.append(weights)
        outputs.append(out)
    merged = np.hstack(outputs)
    output = merged if wo is None else merged @ wo + (0 if bo is None else bo)
    return np.array(all_weights), output
