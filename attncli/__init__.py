"""attn: compute attention, softmax(QKᵀ/√d_k)V, on your own matrices.

Python API::

    from attncli import attention
    output, weights = attention(q, k, v)             # [n_q, d_v], [n_q, n_k]
    output, weights = multi_head_attention(x, w_q, w_k, w_v, n_head=2)  # [n_q, d_v], [2, n_q, n_k]

numpy is imported on first use, so ``attn --help`` stays fast. The maths
live in ``attncli.core.kernel`` (not ``attncli.attention``, which would shadow the
function of that name) and ``attncli.core.multihead``.
"""

__version__ = "0.1.0"
__all__ = ["attention", "attention_steps", "softmax", "causal_mask", "multi_head_attention", "AttnError"]


def __getattr__(name: str):
    if name in ("attention", "attention_steps", "softmax", "causal_mask"):
        from attncli.core import kernel as maths

        return getattr(maths, name)
    if name == "multi_head_attention":
        from attncli.core.multihead import multi_head_attention

        return multi_head_attention
    if name == "AttnError":
        from attncli.errors import AttnError

        return AttnError
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
