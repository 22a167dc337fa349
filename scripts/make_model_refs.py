"""Reference numbers for ``--model config.json --layer N``, from Hugging Face transformers, pinned for the tests.

Not part of the test suite: it needs torch and transformers, which attn never uses.
For each family of ``CASES`` (a tiny config.json as the Hub writes them, often
leaving fields to the config class's defaults), a model with random weights in
float64 runs eight random tokens through transformers (eager attention; SDPA for
Falcon, whose eager path adds ALiBi twice), and every layer's attention is
captured where it happens. transformers' softmax is made to keep float64 (it
asks for float32 and rounds the weights to ~6e-8, which would hide a wrong
setting of 1e-12); MPT's rounds its scores to float32 itself, so MPT agrees to
~1e-7 only:

- ``{case}.{layer}.q``, ``.k``: Q and K as they enter RoPE (after any QK-norm),
  [heads, n, d]; ``.qr``, ``.kr``: after RoPE, as the attention product takes them;
  (absent where the layer has no RoPE);
- ``.v``: V; ``.out``: the heads' output [heads, n, d_v], before the output projection;
- ``.sinks`` (gpt-oss, [heads]) and ``.bias`` (T5's position bias, [heads, n, n]):
  what those families add that no config holds.

A ``-decode`` case runs the prompt, then one more token over its KV cache: one
query after eight keys (causal bottom-right, the query at position 8).

It also writes what transformers itself saves for each config
(``save_pretrained``'s config.json: every default written out, RoPE moved into
``rope_parameters``, ``layer_types`` listed), so that the tests derive the same
settings from both spellings of one model.

    PYTHONPATH=. /path/to/venv-with-torch/bin/python scripts/make_model_refs.py

writes ``tests/data/model_refs.npz`` and ``tests/data/model_configs.json``.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
N_TOKENS = 8
VOCAB = 64
BASE = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32,
}

# Each family's tiny config.json, as the Hub writes them: what attn reads from the file alone.
CASES: dict[str, dict[str, Any]] = {
    # the layer's number divides the scale (scale_attn_by_inverse_layer_idx)
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": VOCAB,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 32,
        "scale_attn_by_inverse_layer_idx": True,
    },
    # Llama 3.1's RoPE scaling, its original context shortened to 4 so that 8 tokens pass it
    "llama": {
        **BASE,
        "model_type": "llama",
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 4,
        },
    },
    "mistral": {**BASE, "model_type": "mistral", "sliding_window": 4},
    # θ left to MixtralConfig's default, 10^6
    "mixtral": {
        **BASE,
        "model_type": "mixtral",
        "sliding_window": 3,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
    },
    # layer 1 slides (max_window_layers 1)
    "qwen2": {
        **BASE,
        "model_type": "qwen2",
        "use_sliding_window": True,
        "sliding_window": 3,
        "max_window_layers": 1,
        "rope_theta": 1000000.0,
    },
    # head_dim 16 ≠ 32/4, QK-norm, YaRN
    "qwen3": {
        **BASE,
        "model_type": "qwen3",
        "head_dim": 16,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4},
    },
    "gemma": {**BASE, "model_type": "gemma", "head_dim": 16, "num_key_value_heads": 1},
    # the scale is 1/√query_pre_attn_scalar (24), not 1/√head_dim (16)
    "gemma2": {
        **BASE,
        "model_type": "gemma2",
        "head_dim": 16,
        "query_pre_attn_scalar": 24,
        "sliding_window": 4,
        "attn_logit_softcapping": 5.0,
    },
    # 2 of 3 layers slide with their own θ; Gemma 3 4B's linear scaling on the full ones
    "gemma3_text": {
        **BASE,
        "model_type": "gemma3_text",
        "num_hidden_layers": 3,
        "head_dim": 16,
        "query_pre_attn_scalar": 20,
        "sliding_window": 3,
        "sliding_window_pattern": 3,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    },
    # half the features turn; LongRoPE past an original context of 4
    "phi3": {
        **BASE,
        "model_type": "phi3",
        "pad_token_id": 0,
        "eos_token_id": 2,
        "partial_rotary_factor": 0.5,
        "sliding_window": 5,
        "original_max_position_embeddings": 4,
        "rope_scaling": {
            "type": "longrope",
            "short_factor": [1.0, 1.5],
            "long_factor": [2.0, 3.0],
        },
    },
    # rotary_pct of the head; θ under its own name
    "gpt_neox": {
        **BASE,
        "model_type": "gpt_neox",
        "num_attention_heads": 2,
        "rotary_pct": 0.5,
        "rotary_emb_base": 20000,
    },
    # interleaved pairs, the first rotary_dim features
    "gptj": {
        "model_type": "gptj",
        "vocab_size": VOCAB,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 2,
        "n_positions": 32,
        "rotary_dim": 8,
    },
    # interleaved pairs; θ left to CohereConfig's default, 500000
    "cohere": {**BASE, "model_type": "cohere", "use_qk_norm": True},
    # RoPE on the sliding layers only
    "cohere2": {**BASE, "model_type": "cohere2", "sliding_window": 3, "sliding_window_pattern": 2},
    "olmo2": {**BASE, "model_type": "olmo2"},
    # ALiBi before the scale
    "falcon": {
        "model_type": "falcon",
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "alibi": True,
        "multi_query": False,
        "parallel_attn": True,
        "bias": False,
    },
    # Falcon-7B's kind: RoPE, one K/V head (multi_query, the default)
    "falcon-rope": {
        "model_type": "falcon",
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "alibi": False,
        "rope_theta": 10000.0,
    },
    # ALiBi after the scale; BLOOM's own names
    "bloom": {"model_type": "bloom", "vocab_size": VOCAB, "n_embed": 32, "n_layer": 2, "n_head": 4},
    "mpt": {
        "model_type": "mpt",
        "vocab_size": VOCAB,
        "d_model": 32,
        "n_heads": 4,
        "n_layers": 2,
        "max_seq_len": 16,
        "attn_config": {"alibi": True, "alibi_bias_max": 8},
    },
    # sinks, a window on alternate layers, YaRN without truncation
    "gpt_oss": {
        **BASE,
        "model_type": "gpt_oss",
        "head_dim": 8,
        "sliding_window": 3,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4,
        },
    },
    # MLA: RoPE on the last qk_rope_head_dim features, interleaved; YaRN's mscale² on the scale
    "deepseek_v3": {
        **BASE,
        "model_type": "deepseek_v3",
        "num_key_value_heads": 4,
        "q_lora_rank": 16,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
        "first_k_dense_replace": 2,
        "n_routed_experts": 2,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 4,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "beta_fast": 32,
            "beta_slow": 1,
        },
    },
    # no scale; a relative position bias from layer 0 (given as a file); an encoder
    "t5": {
        "model_type": "t5",
        "vocab_size": VOCAB,
        "d_model": 32,
        "d_kv": 8,
        "d_ff": 48,
        "num_layers": 2,
        "num_heads": 4,
        "relative_attention_num_buckets": 8,
        "relative_attention_max_distance": 16,
    },
    "bert": {
        "model_type": "bert",
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 48,
        "max_position_embeddings": 32,
    },
}
DECODE = {"llama-decode": "llama"}  # one token after the prompt, over its KV cache
ROPE_LAST = {"deepseek_v3"}  # RoPE turns the last features
TRANSPOSED_ROPE = {"gptj"}  # RoPE is applied to [batch, n, heads, d]
SDPA = {"falcon", "falcon-rope"}  # Hugging Face's eager Falcon adds ALiBi twice
FUSED = {"falcon", "falcon-rope", "bloom", "mpt"}  # attention written inline, captured around its projections


def _seed(name: str) -> int:
    return sum(ord(c) * 31**i for i, c in enumerate(name)) % 2**32


# --- transformers (torch) ------------------------------------------------------------------


def build(name: str, dtype: str = "float64") -> Any:
    """The case's model with random weights (torch's seed from the name), in ``dtype``."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, T5EncoderModel

    config_dict = CASES[DECODE.get(name, name)]
    torch.manual_seed(_seed(name))
    config = AutoConfig.for_model(**config_dict)
    implementation = "sdpa" if name in SDPA else "eager"
    if config_dict["model_type"] == "t5":
        model = T5EncoderModel(config)
        model.config._attn_implementation = implementation
    elif config_dict["model_type"] == "bert":
        model = AutoModel.from_config(config, attn_implementation=implementation)
    else:
        model = AutoModelForCausalLM.from_config(
            config, attn_implementation=implementation, experts_implementation="eager"
        )
    model = model.to(getattr(torch, dtype)).eval()
    with torch.no_grad():  # norms start at 1 (or 0 for Gemma's 1 + w) and biases at 0: give them something to do
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return model, config


def attention_modules(model: Any) -> list[Any]:
    """Each layer's self-attention module, in order."""
    found = [
        m
        for m in model.modules()
        if type(m).__name__.endswith("Attention")
        and not type(m).__name__.endswith("SelfAttention")
        and (hasattr(m, "layer_idx") or hasattr(m, "query_key_value") or hasattr(m, "Wqkv"))
    ]
    if not found:  # BERT
        found = [m for m in model.modules() if type(m).__name__.endswith("SelfAttention")]
    return found


def as_numpy(x: Any) -> np.ndarray:
    """A tensor's values as numpy holds them (bfloat16 as ml_dtypes' bfloat16, exactly)."""
    import torch

    x = x.detach()
    if x.dtype == torch.bfloat16:
        import ml_dtypes

        return x.to(torch.float32).numpy().astype(ml_dtypes.bfloat16)
    return x.numpy().copy()


def capture(name: str, dtype: str = "float64", tokens: int | None = None) -> dict[str, np.ndarray]:
    """Every layer's Q, K (before and after RoPE), V, output (and sinks, bias) for the case.

    float64 keeps transformers' softmax in float64; in bfloat16 or float16 the model runs
    as Hugging Face runs it (softmax in float32, then the model's dtype). ``tokens``:
    the seed of the token ids, when not the name's."""
    import torch

    model, config = build(name, dtype)
    modeling = importlib.import_module(type(model).__module__)
    layers = attention_modules(model)
    ids = torch.tensor(np.random.default_rng(_seed(name) if tokens is None else tokens).integers(0, VOCAB, N_TOKENS))[
        None
    ]
    got: dict[str, dict[str, Any]] = {str(i): {} for i in range(len(layers))}
    current = {"layer": 0}
    patched: dict[str, Any] = {}

    def heads(x: Any) -> np.ndarray:
        return as_numpy(x[0])

    def rope_wrapper(original: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            layer = got[str(current["layer"])]
            if name in FUSED:  # Falcon with RoPE: attention takes what RoPE gives
                layer["q_out"], layer["k_out"] = heads(out[0]), heads(out[1])
            if name in TRANSPOSED_ROPE:  # GPT-J: one tensor a call (K, then Q), [b, n, H, r]
                key = "k_in" if "k_in" not in layer else "q_in"
                layer[key] = heads(args[0].transpose(1, 2))
            else:
                layer["q_in"], layer["k_in"] = heads(args[0]), heads(args[1])
            return out

        return wrapped

    for fn in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave"):
        if hasattr(modeling, fn):
            patched[fn] = getattr(modeling, fn)
            setattr(modeling, fn, rope_wrapper(patched[fn]))

    def eager(original: Any) -> Any:
        def wrapped(module: Any, query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(module, query, key, value, *args, **kwargs)
            layer = got[str(current["layer"])]
            layer["qr"], layer["kr"], layer["v"] = heads(query), heads(key), heads(value)
            layer["out"] = heads(out[0].transpose(1, 2))
            if getattr(module, "sinks", None) is not None:
                layer["sinks"] = as_numpy(module.sinks)
            if kwargs.get("position_bias") is not None:
                layer["bias"] = heads(kwargs["position_bias"])
            return out

        return wrapped

    softmax = torch.nn.functional.softmax

    def float64_softmax(x: Any, *args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        """transformers' softmax in float64 (it asks for float32, rounding the weights to ~6e-8)."""
        return softmax(x, *args, dtype=None if x.dtype == torch.float64 else dtype, **kwargs)

    if dtype == "float64":
        torch.nn.functional.softmax = float64_softmax
    if hasattr(modeling, "eager_attention_forward"):
        patched["eager_attention_forward"] = modeling.eager_attention_forward
        modeling.eager_attention_forward = eager(modeling.eager_attention_forward)
    hooks = []
    for i, module in enumerate(layers):
        hooks.append(module.register_forward_pre_hook(lambda m, a, i=i: current.update(layer=i)))
        hooks += fused_hooks(name, module, got[str(i)])
    try:
        with torch.no_grad():
            if name in DECODE:
                out = model(ids[:, :-1], use_cache=True)
                prefix = {i: dict(layer) for i, layer in got.items()}
                model(ids[:, -1:], cache=out.past_key_values, use_cache=True)
                for i, layer in got.items():  # the cached keys as they entered RoPE, then the new one
                    layer["k_in"] = np.concatenate([prefix[i]["k_in"], layer["k_in"]], axis=-2)
            else:
                model(ids)
    finally:
        torch.nn.functional.softmax = softmax
        for fn, original in patched.items():
            setattr(modeling, fn, original)
        for h in hooks:
            h.remove()
    refs: dict[str, np.ndarray] = {}
    for i, layer in got.items():
        qr, kr = layer.get("q_out", layer["qr"]), layer.get("k_out", layer["kr"])
        q, k = before_rope(name, qr, layer.get("q_in")), before_rope(name, kr, layer.get("k_in"))
        for key, value in {"q": q, "k": k, "qr": qr, "kr": kr, "v": layer["v"], "out": layer["out"]}.items():
            if key in ("qr", "kr") and np.array_equal(value, {"qr": q, "kr": k}[key]):
                continue  # no RoPE in this layer: after is before
            refs[f"{name}.{i}.{key}"] = value
        for extra in ("sinks", "bias"):
            if extra in layer:
                refs[f"{name}.{i}.{extra}"] = layer[extra]
    return refs


def before_rope(name: str, after: np.ndarray, rope_in: np.ndarray | None) -> np.ndarray:
    """Q or K as they entered RoPE: the features RoPE was given, the rest as attention took them."""
    if rope_in is None:
        return after
    x = after.copy()
    r = rope_in.shape[-1]
    rope_in = np.broadcast_to(rope_in, x.shape[:-1] + (r,))  # DeepSeek's one rotated K head, shared
    if name in ROPE_LAST:
        x[..., x.shape[-1] - r :] = rope_in
    else:
        x[..., :r] = rope_in
    return x


def fused_hooks(name: str, module: Any, layer: dict[str, Any]) -> list[Any]:
    """Falcon, BLOOM and MPT compute attention inline: Q, K, V from their fused projection, the
    output from the output projection's input (RoPE, for Falcon's, is still captured as it runs)."""
    kind = CASES[DECODE.get(name, name)]["model_type"]
    if kind not in ("falcon", "bloom", "mpt"):
        return []

    def qkv(m: Any, args: Any, fused: Any) -> None:
        b, n, _ = fused.shape
        if kind == "bloom":
            q, k, v = module._reshape(fused)
        elif kind == "mpt":
            q, k, v = (x.reshape(b, n, module.n_heads, module.head_dim).transpose(1, 2) for x in fused.chunk(3, dim=2))
        else:
            q, k, v = (x.transpose(1, 2) for x in module._split_heads(fused))
        layer["q_in"], layer["k_in"] = as_numpy(q[0]), as_numpy(k[0])
        layer["qr"], layer["kr"], layer["v"] = layer["q_in"], layer["k_in"], as_numpy(v[0])

    def out(m: Any, args: Any) -> None:
        x = args[0].detach()[0]  # [n, H · d]
        layer["out"] = as_numpy(x.reshape(x.shape[0], -1, layer["v"].shape[-1]).transpose(0, 1))

    projection = {"bloom": "query_key_value", "falcon": "query_key_value", "mpt": "Wqkv"}[kind]
    output = {"bloom": "dense", "falcon": "dense", "mpt": "out_proj"}[kind]
    hooks = [getattr(module, projection).register_forward_hook(qkv)]
    hooks.append(getattr(module, output).register_forward_pre_hook(out))
    return hooks


def saved_config(name: str) -> dict[str, Any]:
    """The config.json transformers writes for the case (save_pretrained: defaults written out)."""
    import tempfile

    from transformers import AutoConfig

    config = AutoConfig.for_model(**CASES[name])
    with tempfile.TemporaryDirectory() as tmp:
        config.save_pretrained(tmp)
        return json.loads((Path(tmp) / "config.json").read_text())


def main() -> None:
    import transformers

    print(f"transformers {transformers.__version__}")
    refs: dict[str, np.ndarray] = {}
    for name in [*CASES, *DECODE]:
        captured = capture(name)
        refs.update(captured)
        layers = sorted({k.split(".")[1] for k in captured})
        print(f"{name}: {len(layers)} layers, q {captured[f'{name}.0.q'].shape}, out {captured[f'{name}.0.out'].shape}")
    np.savez_compressed(DATA / "model_refs.npz", **refs)
    saved = {name: saved_config(name) for name in CASES}
    (DATA / "model_configs.json").write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
    print("wrote", DATA / "model_refs.npz", DATA / "model_configs.json", file=sys.stderr)


if __name__ == "__main__":
    main()
