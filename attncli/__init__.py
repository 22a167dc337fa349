"""attn: compute attention, softmax(QKᵀ/√d_k)V, on your own matrices.

Python API::

    from attncli import attention, AttentionOptions
    output, weights = attention(q, k, v)             # [n_q, d_v], [n_q, n_k]
    output, weights = attention(q, k, v, AttentionOptions(causal="top-left", temperature=2))
    output, weights = multi_head_attention(x, w_q, w_k, w_v, n_head=2)  # [n_q, d_v], [2, n_q, n_k]
    grads = attention_grad(q, k, v, dout, AttentionOptions(causal="top-left"))  # grads.dq, .dk, .dv
    yarn = RopeScaling("yarn", factor=32, original_max_position_embeddings=4096, truncate=False)  # gpt-oss
    output, weights = attention(q, k, v, rope=Rope("neox", theta=150000, scaling=yarn))

numpy is imported on first use, so ``attn --help`` stays fast. The maths
live in ``attncli.core`` (see its ``__init__`` for the modules).
"""

__version__ = "0.2.0"
__all__ = [
    "AttentionOptions",
    "AttnError",
    "Grads",
    "Rope",
    "RopeScaling",
    "attention",
    "attention_blocked",
    "attention_grad",
    "attention_steps",
    "causal_mask",
    "multi_head_attention",
    "softmax",
]

_LAZY = {
    "attention": "attncli.core.api",
    "attention_steps": "attncli.core.api",
    "attention_blocked": "attncli.core.api",
    "attention_grad": "attncli.core.grad",
    "Grads": "attncli.core.grad",
    "AttentionOptions": "attncli.core.options",
    "Rope": "attncli.core.rope",
    "RopeScaling": "attncli.core.rope",
    "softmax": "attncli.core.reference",
    "causal_mask": "attncli.core.logits",
    "multi_head_attention": "attncli.core.multihead",
    "AttnError": "attncli.errors",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
