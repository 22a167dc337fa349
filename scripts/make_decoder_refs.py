"""Reference numbers for attn's decoders, from Hugging Face transformers, pinned for the tests.

Not part of the test suite: it needs torch and transformers (and accelerate,
for a GGUF), which attn never uses. It writes

- ``tests/data/decoder_refs.npz``: for each seeded random model of ``CASES``
  (GPT-2; Llama with and without grouped-query attention and biases, both
  RoPE layouts of config.json, Llama 3.1's RoPE scaling; Mistral with a
  window; Qwen2 with windows from ``max_window_layers`` and from
  ``layer_types``, and with YaRN; Gemma, Gemma 2, Gemma 3 and Gemma 3 with
  linear scaling), the token ids, every
  layer's and head's attention weights and the last three positions' logits
  that transformers' eager attention gives in float32;
- ``tests/data/convention_refs.npz``: Gemma 2 and Gemma 3, and Gemma 3 with
  linear RoPE scaling on its full layers (random weights
  from torch's seed; only the captures are pinned): each layer's Q and K as
  they enter attention before RoPE (after Gemma 3's QK-norm), V, the
  weights and the heads' output, for checking ``conventions`` alone;
- ``tests/data/smollm2_refs.npz``: the real SmolLM2-135M-Instruct (its Q4_1
  GGUF, dequantised by transformers' own GGUF loader) on the seed sentence:
  the tokens, every layer's and head's weights (the causal triangle, as
  uint16 fixed point: ±7.6e-6), the top-5 next tokens and the greedy
  continuation (``generate``, 8 tokens).

The random models are built here with numpy (``random_tensors``) and read
by both transformers and the tests (which import this file), so only their
outputs are stored.

    PYTHONPATH=. /path/to/venv-with-torch/bin/python scripts/make_decoder_refs.py [SmolLM2.gguf]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
SEED_SENTENCE = "The pink elephant tried to get into the car but it was too"
N_TOKENS = 12  # token ids per random case
LOGITS = 3  # the last positions whose logits are pinned
GENERATED = 8  # SmolLM2's greedy continuation of the seed sentence, pinned
VOCAB = 320  # the random models' vocabulary (the trained tokenizer's 300 ids fit)

BASE = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 32,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
}
CASES: dict[str, dict[str, Any]] = {
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": VOCAB,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 32,
        "n_inner": 64,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
    },
    "gpt2-inverse-layer": {
        "model_type": "gpt2",
        "vocab_size": VOCAB,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 2,
        "n_positions": 32,
        "layer_norm_epsilon": 1e-5,
        "scale_attn_by_inverse_layer_idx": True,
    },
    # every head its own K/V, no biases, rope_theta at the top (older config.json), its own output head
    "llama": {
        **BASE,
        "model_type": "llama",
        "num_key_value_heads": 4,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "tie_word_embeddings": False,
    },
    # grouped-query (4 over 2), q/k/v/o biases, head_dim 16 ≠ 32/4, rope_parameters (transformers ≥ 4.56), tied
    "llama-gqa-bias": {
        **BASE,
        "model_type": "llama",
        "num_key_value_heads": 2,
        "head_dim": 16,
        "attention_bias": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "tie_word_embeddings": True,
    },
    "mistral": {
        **BASE,
        "model_type": "mistral",
        "num_key_value_heads": 2,
        "sliding_window": 4,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
    },
    # Qwen2: biases on q/k/v; layer 1 slides (max_window_layers 1)
    "qwen2": {
        **BASE,
        "model_type": "qwen2",
        "num_key_value_heads": 2,
        "use_sliding_window": True,
        "sliding_window": 3,
        "max_window_layers": 1,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
    },
    # Llama 3.1's RoPE scaling, its original context shortened to 8 so that 12 tokens pass it
    "llama-llama3-scaling": {
        **BASE,
        "model_type": "llama",
        "num_key_value_heads": 2,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
        "tie_word_embeddings": False,
    },
    # Qwen2.5's YaRN (factor 4 over an original context of 8: attention factor 0.1 ln 4 + 1)
    "qwen2-yarn": {
        **BASE,
        "model_type": "qwen2",
        "num_key_value_heads": 2,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
        "tie_word_embeddings": True,
    },
    # Qwen2 with layer_types: layer 0 slides
    "qwen2-layer-types": {
        **BASE,
        "model_type": "qwen2",
        "num_key_value_heads": 1,
        "use_sliding_window": True,
        "sliding_window": 5,
        "layer_types": ["sliding_attention", "full_attention"],
        "tie_word_embeddings": False,
    },
}
GEMMA: dict[str, dict[str, Any]] = {
    "gemma2": {
        "model_type": "gemma2",
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "query_pre_attn_scalar": 24,
        "sliding_window": 4,
        "attn_logit_softcapping": 2.0,
        "final_logit_softcapping": 30.0,
        "max_position_embeddings": 32,
        "rope_theta": 10000.0,
    },
    "gemma3_text": {
        "model_type": "gemma3_text",
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "query_pre_attn_scalar": 20,
        "sliding_window": 3,
        "sliding_window_pattern": 3,
        "max_position_embeddings": 32,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
    },
}
# Gemma 3 4B's linear RoPE scaling (factor 8): its full layers only
GEMMA["gemma3-scaled"] = {**GEMMA["gemma3_text"], "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
# The Gemmas whole, for attn trace (numpy's random weights, as the other cases): Gemma 1 (one K/V head,
# GELU, (1 + w) norms, √d-scaled embeddings), Gemma 2 (sandwich norms, both soft-caps, a window on
# even layers) and Gemma 3 (QK-norm, local and global θ, 2 of 3 layers sliding; and linear scaling)
CASES.update(
    {
        "gemma": {
            **BASE,
            "model_type": "gemma",
            "num_key_value_heads": 1,
            "head_dim": 16,
            "hidden_act": "gelu_pytorch_tanh",
            "rope_theta": 10000.0,
        },
        "gemma2": GEMMA["gemma2"],
        "gemma3_text": GEMMA["gemma3_text"],
        "gemma3-scaled": GEMMA["gemma3-scaled"],
    }
)


def case_ids(name: str) -> np.ndarray:
    """The token ids a case runs on: seeded by its name."""
    return np.random.default_rng(_seed(name) + 1).integers(0, VOCAB, N_TOKENS)


def _seed(name: str) -> int:
    return sum(ord(c) * 31**i for i, c in enumerate(name)) % 2**32


def random_tensors(name: str) -> dict[str, np.ndarray]:
    """A case's tensors under Hugging Face's names and layouts (torch Linear [d_out, d_in],
    GPT-2's Conv1D [d_in, d_out]), float32, seeded by the case's name."""
    config = CASES[name]
    rng = np.random.default_rng(_seed(name))

    def r(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    gemma = config["model_type"].startswith("gemma")

    def norm(d: int) -> np.ndarray:  # Gemma's norms hold w of x / rms(x) · (1 + w)
        return r(d, scale=0.1) if gemma else (1 + r(d, scale=0.1)).astype(np.float32)

    t: dict[str, np.ndarray] = {}
    if config["model_type"] == "gpt2":
        d, d_ff = config["n_embd"], config.get("n_inner") or 4 * config["n_embd"]
        t["transformer.wte.weight"], t["transformer.wpe.weight"] = r(VOCAB, d), r(32, d)
        for i in range(config["n_layer"]):
            p = f"transformer.h.{i}"
            for part, d_in, d_out in (
                ("attn.c_attn", d, 3 * d),
                ("attn.c_proj", d, d),
                ("mlp.c_fc", d, d_ff),
                ("mlp.c_proj", d_ff, d),
            ):
                t[f"{p}.{part}.weight"], t[f"{p}.{part}.bias"] = r(d_in, d_out), r(d_out, scale=0.1)
            for ln in ("ln_1", "ln_2"):
                t[f"{p}.{ln}.weight"], t[f"{p}.{ln}.bias"] = norm(d), r(d, scale=0.1)
        t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = norm(d), r(d, scale=0.1)
        return t
    d, d_ff, n_head = config["hidden_size"], config["intermediate_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim") or d // n_head
    n_kv = config.get("num_key_value_heads", n_head)
    bias = (
        {"q": True, "k": True, "v": True, "o": False}
        if config["model_type"] == "qwen2"
        else dict.fromkeys("qkvo", bool(config.get("attention_bias")))
    )
    t["model.embed_tokens.weight"] = r(VOCAB, d)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        for x, d_out, d_in in (
            ("q", n_head * head_dim, d),
            ("k", n_kv * head_dim, d),
            ("v", n_kv * head_dim, d),
            ("o", d, n_head * head_dim),
        ):
            t[f"{p}.self_attn.{x}_proj.weight"] = r(d_out, d_in)
            if bias[x]:
                t[f"{p}.self_attn.{x}_proj.bias"] = r(d_out, scale=0.2)
        for part, d_out, d_in in (("gate", d_ff, d), ("up", d_ff, d), ("down", d, d_ff)):
            t[f"{p}.mlp.{part}_proj.weight"] = r(d_out, d_in)
        t[f"{p}.input_layernorm.weight"], t[f"{p}.post_attention_layernorm.weight"] = norm(d), norm(d)
        if config["model_type"] in ("gemma2", "gemma3_text"):  # sandwich norms
            t[f"{p}.pre_feedforward_layernorm.weight"] = norm(d)
            t[f"{p}.post_feedforward_layernorm.weight"] = norm(d)
        if config["model_type"] == "gemma3_text":  # QK-norm
            t[f"{p}.self_attn.q_norm.weight"], t[f"{p}.self_attn.k_norm.weight"] = norm(head_dim), norm(head_dim)
    t["model.norm.weight"] = norm(d)
    if not config.get("tie_word_embeddings", gemma):  # Gemma's config classes tie by default
        t["lm_head.weight"] = r(VOCAB, d)
    return t


def write_folder(
    folder: Path, name: str, tensors: dict[str, np.ndarray] | None = None, tokenizer: Any = None, **changes: Any
) -> Path:
    """A Hugging Face folder of a case: config.json (with ``changes``), model.safetensors (and tokenizer.json)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = {**CASES[name], **changes}
    architecture = {
        "gpt2": "GPT2LMHeadModel",
        "llama": "LlamaForCausalLM",
        "mistral": "MistralForCausalLM",
        "qwen2": "Qwen2ForCausalLM",
        "gemma": "GemmaForCausalLM",
        "gemma2": "Gemma2ForCausalLM",
        "gemma3_text": "Gemma3ForCausalLM",
    }[config["model_type"]]
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture], **config}, indent=1))
    save_file(random_tensors(name) if tensors is None else tensors, str(folder / "model.safetensors"))
    if tokenizer is not None:
        tokenizer.save(str(folder / "tokenizer.json"))
    return folder


TRAINING_TEXT = [
    SEED_SENTENCE + " big.",
    "Zuko made his uncle tea.",
    "The car was too small for the elephant.",
    "It was 2024 and 42 elephants tried 7 cars.",
    "a sweet yellow fruit, an apple, a banana",
] * 3


def train_tokenizer(vocab_size: int = 300) -> Any:
    """A byte-level BPE tokenizer (GPT-2's kind), trained in-process in well under a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    return tokenizer


# --- transformers (torch) ------------------------------------------------------------------


def transformers_run(folder: Path, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """transformers' eager attention in float32: weights [L, H, n, n] and logits [n, vocab]."""
    import torch
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32, output_loading_info=True
    )
    missing = [k for k in info["missing_keys"] if not k.endswith("lm_head.weight")]
    assert not missing and not info["unexpected_keys"], info
    with torch.no_grad():
        out = model(torch.tensor(ids)[None], output_attentions=True)
    weights = torch.stack([a[0] for a in out.attentions]).numpy()
    return weights, out.logits[0].numpy()


def gemma_captures(name: str, n: int = 10) -> dict[str, np.ndarray]:
    """A random Gemma (torch's seed 0): each layer's Q, K before RoPE, V, weights, heads' output."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(**GEMMA[name])
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32).eval()
    with torch.no_grad():  # the norms' weights start at 0 (1 + w): give them something to do
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    captured: dict[str, Any] = {}
    hooks = []
    for i, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        head_dim = attn.head_dim

        def keep(key: str, heads_first: bool, head_dim: int = head_dim) -> Any:
            def hook(module: Any, args: Any, output: Any) -> None:
                x = output.detach()[0]  # [n, H · d] from a projection; [H, n, d] from Gemma 3's norms
                if not heads_first:
                    x = x.reshape(x.shape[0], -1, head_dim).transpose(0, 1)  # [H, n, d]
                captured[key] = x.numpy().copy()

            return hook

        norms = hasattr(attn, "q_norm")  # Gemma 3 normalises each head's Q and K before RoPE
        q_mod, k_mod = (attn.q_norm, attn.k_norm) if norms else (attn.q_proj, attn.k_proj)
        hooks += [
            q_mod.register_forward_hook(keep(f"{i}.q", norms)),
            k_mod.register_forward_hook(keep(f"{i}.k", norms)),
            attn.v_proj.register_forward_hook(keep(f"{i}.v", False)),
        ]

        def heads_out(module: Any, args: Any, i: int = i, d: int = head_dim) -> None:
            x = args[0].detach()[0]  # [n, H · d]
            captured[f"{i}.output"] = x.reshape(x.shape[0], -1, d).transpose(0, 1).numpy().copy()

        hooks.append(attn.o_proj.register_forward_pre_hook(heads_out))
    ids = torch.tensor(np.random.default_rng(_seed(name)).integers(0, VOCAB, n))[None]
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    for h in hooks:
        h.remove()
    for i, a in enumerate(out.attentions):
        captured[f"{i}.weights"] = a[0].numpy()
    return captured


def smollm2(path: Path) -> dict[str, np.ndarray]:
    """SmolLM2 from its GGUF through transformers: tokens, weights (uint16 triangle), top-5."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    )
    q = model.model.layers[0].self_attn.q_proj
    assert type(q) is torch.nn.Linear and q.weight.dtype == torch.float32, type(q)  # dequantised, not kernels
    enc = tokenizer(SEED_SENTENCE, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    weights = torch.stack([a[0] for a in out.attentions]).numpy()  # [30, 9, n, n]
    n = weights.shape[-1]
    rows, cols = np.tril_indices(n)
    triangle = weights[..., rows, cols]  # [30, 9, n(n+1)/2]
    p = out.logits[0, -1].double().softmax(-1)
    top = p.topk(5)
    generated = model.generate(**enc, max_new_tokens=GENERATED, do_sample=False)[0, enc.input_ids.shape[1] :]
    return {
        "ids": enc.input_ids[0].numpy(),
        "tokens": np.array(tokenizer.convert_ids_to_tokens(enc.input_ids[0])),
        "weights_u16": np.round(triangle * 65535).astype(np.uint16),
        "upper_max": np.array(weights[..., cols, rows].max()),
        "top_ids": top.indices.numpy(),
        "top_probabilities": top.values.numpy(),
        "generated": generated.numpy(),
    }


def main() -> None:
    import tempfile

    import transformers

    print(f"transformers {transformers.__version__}")
    refs: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            ids = case_ids(name)
            weights, logits = transformers_run(write_folder(Path(tmp) / name, name), ids)
            refs[f"{name}.ids"], refs[f"{name}.weights"], refs[f"{name}.logits"] = ids, weights, logits[-LOGITS:]
            print(f"{name}: weights {weights.shape}, logits {logits.shape}")
    np.savez_compressed(DATA / "decoder_refs.npz", **refs)
    conventions: dict[str, np.ndarray] = {}
    for name in GEMMA:
        conventions.update({f"{name}.{k}": v for k, v in gemma_captures(name).items()})
    np.savez_compressed(DATA / "convention_refs.npz", **conventions)
    if len(sys.argv) > 1:
        np.savez_compressed(DATA / "smollm2_refs.npz", **smollm2(Path(sys.argv[1])))
    print("wrote", *(p.name for p in sorted(DATA.glob("*refs.npz"))))


if __name__ == "__main__":
    main()
