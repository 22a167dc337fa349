"""The maths of attention in numpy: no files, no Typer, no Rich.

options.py    AttentionOptions: every setting of one call (Rope and RopeScaling among them)
positions.py  where tokens sit: RoPE and its scalings' frequencies, ALiBi, causal and windows
logits.py     inputs checked once; scores; ``combine``, the one place options act
reference.py  softmax and attention written as the equation, keeping every step
kernel.py     the blocked online-softmax kernel (an implementation choice) and its tuned paths
blocking.py   how the kernel cuts its work: block sizes, window stacks, costliest first
parallel.py   the thread pool over blocks; BLAS held to attn's threads
grad.py       the backward pass: attention_grad() -> Grads (dQ, dK, dV, dsinks, dbias)
grad_blocks.py  the backward in blocks, as FlashAttention-2 does it
check.py      attn check's rule, part by part and block by block (parts.py, baseline.py, sample.py);
              check_grads.py the same for gradients
api.py        attention(), attention_steps(), attention_blocked()
multihead.py  projections, heads, multi-head attention
arrays.py     small shared helpers (shapes as text, dtypes, unit rows, sums back to a shape)
"""
