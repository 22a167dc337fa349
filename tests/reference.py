"""The one test reference: attention written out one query at a time in
float64, as seed 000 does it, sharing no code with ``attncli.core``.

Every maths test compares with these (the reference of ``attncli.core`` and
its blocked kernel alike), so each equation has one independent check.
"""

import math

import numpy as np


def attention(q, k, v, scale=None, allowed=None, bias=None, causal=None, temperature=1.0):
    """softmax(q·k · scale / temperature + bias) v, query by query, over the keys allowed.

    [n_q, d_k], [n_k, d_k], [n_k, d_v] -> output [n_q, d_v], weights [n_q, n_k].
    ``allowed`` [n_q, n_k] bool; ``bias`` [n_q, n_k] added after scaling;
    ``causal`` None, "top-left" (key j ≤ i) or "bottom-right" (j ≤ i + n_k − n_q).
    """
    q, k, v = (np.asarray(m, dtype=np.float64) for m in (q, k, v))
    n_q, n_k = len(q), len(k)
    scale = 1 / math.sqrt(k.shape[1]) if scale is None else scale
    offset = {None: None, "top-left": 0, "bottom-right": n_k - n_q}[causal]
    out = np.zeros((n_q, v.shape[1]))
    weights = np.zeros((n_q, n_k))
    for i in range(n_q):
        keep = [j for j in range(n_k)
                if (allowed is None or allowed[i][j]) and (offset is None or j <= i + offset)]
        if not keep:
            continue  # a query that may see nothing: zero weights, zero output
        x = np.array([float(q[i] @ k[j]) * scale / temperature + (0.0 if bias is None else bias[i][j])
                      for j in keep])
        e = np.exp(x - x.max())
        for w, j in zip(e / e.sum(), keep, strict=True):
            weights[i, j] = w
            out[i] += w * v[j]
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


def multi_head(x, wq, wk, wv, *, z=None, wo=None, bq=None, bk=None, bv=None, bo=None, heads=1,
               causal=False, scale=None):
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
        out, weights = attention(q[:, h * d_head:(h + 1) * d_head], k[:, h * d_head:(h + 1) * d_head],
                                 v[:, h * d_v_head:(h + 1) * d_v_head], scale=scale,
                                 causal="top-left" if causal else None)
        all_weights.append(weights)
        outputs.append(out)
    merged = np.hstack(outputs)
    output = merged if wo is None else merged @ wo + (0 if bo is None else bo)
    return np.array(all_weights), output
