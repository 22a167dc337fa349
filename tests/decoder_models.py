"""Tiny decoders for the tests: the seeded random models of scripts/make_decoder_refs.py
(shared with the script that pins transformers' numbers for them), written as
Hugging Face folders or GGUF files; a byte-level BPE tokenizer trained in-process;
and the decoders written once more in float64, head by head, sharing no code with
attncli (the independent reference)."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_decoder_refs", ROOT / "scripts" / "make_decoder_refs.py")
assert _spec is not None and _spec.loader is not None
refs: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refs)

CASES: dict[str, dict[str, Any]] = refs.CASES
DATA = ROOT / "tests" / "data"


# --- the float64 reference --------------------------------------------------------------------


def _window(config: dict, layer: int) -> int | None:
    """Hugging Face's sliding window of this layer (keys j with i − j < W), or None."""
    kind = config["model_type"]
    if kind == "mistral":
        return config.get("sliding_window")
    if kind == "qwen2" and config.get("use_sliding_window"):
        types = config.get("layer_types") or [
            "sliding_attention" if i >= config.get("max_window_layers", 28) else "full_attention"
            for i in range(config["num_hidden_layers"])
        ]
        return config["sliding_window"] if types[layer] == "sliding_attention" else None
    return None


def _heads(x: np.ndarray, h: int) -> list[np.ndarray]:
    d = x.shape[1] // h
    return [x[:, i * d : (i + 1) * d] for i in range(h)]


def _attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, window: int | None, softcap: float | None = None
) -> tuple:
    """One head, one query at a time: softmax over the keys it may see (Gemma 2: scores soft-capped)."""
    n = q.shape[0]
    weights, out = np.zeros((n, n)), np.zeros((n, v.shape[1]))
    for i in range(n):
        seen = [j for j in range(i + 1) if window is None or i - j < window]
        logits = np.array([q[i] @ k[j] * scale for j in seen])
        if softcap is not None:
            logits = np.tanh(logits / softcap) * softcap
        e = np.exp(logits - logits.max())
        weights[i, seen] = e / e.sum()
        out[i] = weights[i] @ v
    return weights, out


def _rope(x: np.ndarray, theta: float) -> np.ndarray:
    """Hugging Face's rotate_half RoPE on [n, d], positions 0 .. n − 1, in float64."""
    n, d = x.shape
    angles = np.arange(n)[:, None] * theta ** (-np.arange(0, d, 2) / d)[None, :]  # [n, d / 2]
    cos, sin = np.cos(np.concatenate([angles, angles], 1)), np.sin(np.concatenate([angles, angles], 1))
    rotated = np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], 1)
    return x * cos + rotated * sin


def reference_forward(
    name: str, tensors: dict[str, np.ndarray], ids: np.ndarray, seen: dict[int, dict[str, Any]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A case's decoder in float64 -> weights [L, H, n, n], logits [n, vocab]. ``seen`` receives each
    layer's attention as it went: the rows the projections read ("x"), each query head's q and each
    K/V head's k (after RoPE) and v, each query head's output, and W_O [d_in, d_out]; and the logit
    lens ("lens"): the layer's output through the final norm and the output head, [n, vocab]."""
    seen = {} if seen is None else seen
    config = CASES[name]
    t = {k: v.astype(np.float64) for k, v in tensors.items()}
    all_weights = []
    if config["model_type"] == "gpt2":
        h, eps = config["n_head"], config["layer_norm_epsilon"]

        def ln(x: np.ndarray, p: str) -> np.ndarray:
            return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps) * t[p + ".weight"] + t[
                p + ".bias"
            ]

        def conv(x: np.ndarray, p: str) -> np.ndarray:
            return x @ t[p + ".weight"] + t[p + ".bias"]

        x = t["transformer.wte.weight"][ids] + t["transformer.wpe.weight"][: len(ids)]
        for i in range(config["n_layer"]):
            p = f"transformer.h.{i}"
            q, k, v = np.split(conv(ln(x, f"{p}.ln_1"), f"{p}.attn.c_attn"), 3, axis=1)
            d = q.shape[1] // h
            scale = 1 / math.sqrt(d) / (i + 1 if config.get("scale_attn_by_inverse_layer_idx") else 1)
            heads = zip(_heads(q, h), _heads(k, h), _heads(v, h), strict=True)
            pairs = [_attend(qh, kh, vh, scale, None) for qh, kh, vh in heads]
            all_weights.append([w for w, _ in pairs])
            seen[i] = {
                "x": ln(x, f"{p}.ln_1"),
                "q": _heads(q, h),
                "k": _heads(k, h),
                "v": _heads(v, h),
                "out": [o for _, o in pairs],
                "w_o": t[f"{p}.attn.c_proj.weight"],
            }
            x = x + conv(np.concatenate([o for _, o in pairs], 1), f"{p}.attn.c_proj")
            a = conv(ln(x, f"{p}.ln_2"), f"{p}.mlp.c_fc")
            a = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))
            x = x + conv(a, f"{p}.mlp.c_proj")
            seen[i]["lens"] = ln(x, "transformer.ln_f") @ t["transformer.wte.weight"].T
        logits = ln(x, "transformer.ln_f") @ t["transformer.wte.weight"].T
        return np.array(all_weights), logits

    if config["model_type"].startswith("gemma"):
        return _gemma_forward(config, t, ids, seen)
    h, eps = config["num_attention_heads"], config["rms_norm_eps"]
    h_kv = config.get("num_key_value_heads", h)
    theta = (config.get("rope_parameters") or {}).get("rope_theta") or config.get("rope_theta") or 10000.0

    def rms(x: np.ndarray, p: str) -> np.ndarray:
        return x / np.sqrt((x * x).mean(1, keepdims=True) + eps) * t[p + ".weight"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ t[p + ".weight"].T + t.get(p + ".bias", 0.0)

    head = t["lm_head.weight"] if "lm_head.weight" in t else t["model.embed_tokens.weight"]
    x = t["model.embed_tokens.weight"][ids]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        a = rms(x, f"{p}.input_layernorm")
        q, k, v = (lin(a, f"{p}.self_attn.{m}_proj") for m in "qkv")
        qs, ks, vs = _heads(q, h), _heads(k, h_kv), _heads(v, h_kv)
        d = qs[0].shape[1]
        pairs = [
            _attend(
                _rope(qs[j], theta),
                _rope(ks[j * h_kv // h], theta),
                vs[j * h_kv // h],
                1 / math.sqrt(d),
                _window(config, i),
            )
            for j in range(h)
        ]
        all_weights.append([w for w, _ in pairs])
        seen[i] = {
            "x": a,
            "q": [_rope(qh, theta) for qh in qs],
            "k": [_rope(kh, theta) for kh in ks],
            "v": vs,
            "out": [o for _, o in pairs],
            "w_o": t[f"{p}.self_attn.o_proj.weight"].T,
        }
        x = x + lin(np.concatenate([o for _, o in pairs], 1), f"{p}.self_attn.o_proj")
        a = rms(x, f"{p}.post_attention_layernorm")
        gate = lin(a, f"{p}.mlp.gate_proj")
        x = x + lin(gate / (1 + np.exp(-gate)) * lin(a, f"{p}.mlp.up_proj"), f"{p}.mlp.down_proj")
        seen[i]["lens"] = rms(x, "model.norm") @ head.T
    return np.array(all_weights), rms(x, "model.norm") @ head.T


def _gemma_forward(
    config: dict[str, Any], t: dict[str, np.ndarray], ids: np.ndarray, seen: dict[int, dict[str, Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """Gemma, Gemma 2 and Gemma 3 in float64, written out from their papers' and transformers' terms:
    embeddings × √d; norms x / rms(x) · (1 + w); Gemma 2 and 3's norms after attention and after the
    MLP too; Gemma 3's per-head QK-norm before RoPE; the scale 1/√query_pre_attn_scalar (Gemma 2, 3);
    a window on the sliding layers (Gemma 2: even layers; Gemma 3: all but every third), Gemma 3's
    local θ there; Gemma 2's soft-caps on the scores and the logits; GELU (tanh) gating."""
    kind = config["model_type"]
    h, eps = config["num_attention_heads"], config.get("rms_norm_eps", 1e-6)
    h_kv, d = config.get("num_key_value_heads", h), config["head_dim"]
    sandwich, n_layer = kind != "gemma", config["num_hidden_layers"]

    def norm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 + w)

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ t[p + ".weight"].T

    def gelu(x: np.ndarray) -> np.ndarray:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    def head(y: np.ndarray) -> np.ndarray:
        z = norm(y, t["model.norm.weight"]) @ t["model.embed_tokens.weight"].T  # tied
        cap = config.get("final_logit_softcapping", 30.0 if kind == "gemma2" else None)
        return z if cap is None else np.tanh(z / cap) * cap

    pattern = {"gemma": None, "gemma2": 2, "gemma3_text": config.get("sliding_window_pattern", 6)}[kind]
    scale = config["query_pre_attn_scalar"] ** -0.5 if kind != "gemma" else d**-0.5
    x = t["model.embed_tokens.weight"][ids] * math.sqrt(config["hidden_size"])
    for i in range(n_layer):
        p = f"model.layers.{i}"
        sliding = pattern is not None and (i + 1) % pattern != 0
        theta = config.get("rope_local_base_freq", 10000.0) if sliding and kind == "gemma3_text" else None
        theta = theta or config.get("rope_theta", 10000.0)
        a = norm(x, t[f"{p}.input_layernorm.weight"])
        qs, ks, vs = (
            _heads(lin(a, f"{p}.self_attn.q_proj"), h),
            _heads(lin(a, f"{p}.self_attn.k_proj"), h_kv),
            _heads(lin(a, f"{p}.self_attn.v_proj"), h_kv),
        )
        if kind == "gemma3_text":
            qs = [norm(q, t[f"{p}.self_attn.q_norm.weight"]) for q in qs]
            ks = [norm(k, t[f"{p}.self_attn.k_norm.weight"]) for k in ks]
        qs, ks = [_rope(q, theta) for q in qs], [_rope(k, theta) for k in ks]
        window = config["sliding_window"] if sliding else None
        pairs = [
            _attend(qs[j], ks[j * h_kv // h], vs[j * h_kv // h], scale, window, config.get("attn_logit_softcapping"))
            for j in range(h)
        ]
        seen[i] = {
            "x": a,
            "q": qs,
            "k": ks,
            "v": vs,
            "out": [o for _, o in pairs],
            "w_o": t[f"{p}.self_attn.o_proj.weight"].T,
        }
        o = lin(np.concatenate([o for _, o in pairs], 1), f"{p}.self_attn.o_proj")
        x = x + (norm(o, t[f"{p}.post_attention_layernorm.weight"]) if sandwich else o)
        before = "pre_feedforward_layernorm" if sandwich else "post_attention_layernorm"
        m = norm(x, t[f"{p}.{before}.weight"])
        m = lin(gelu(lin(m, f"{p}.mlp.gate_proj")) * lin(m, f"{p}.mlp.up_proj"), f"{p}.mlp.down_proj")
        x = x + (norm(m, t[f"{p}.post_feedforward_layernorm.weight"]) if sandwich else m)
        seen[i]["weights"] = [w for w, _ in pairs]
        seen[i]["lens"] = head(x)

    weights = np.array([seen[i].pop("weights") for i in range(n_layer)])
    return weights, head(x)


# --- GGUF files, as llama.cpp's convert_hf_to_gguf.py writes them ------------------------------


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's ``LlamaModel.permute`` of Q/K rows (and biases)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


LLAMA_NAMES = {
    "model.embed_tokens": "token_embd",
    "model.norm": "output_norm",
    "lm_head": "output",
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
GPT2_NAMES = {
    "transformer.wte": "token_embd",
    "transformer.wpe": "position_embd",
    "transformer.ln_f": "output_norm",
    "ln_1": "attn_norm",
    "attn.c_attn": "attn_qkv",
    "attn.c_proj": "attn_output",
    "ln_2": "ffn_norm",
    "mlp.c_fc": "ffn_up",
    "mlp.c_proj": "ffn_down",
}


LAYER = re.compile(r"(?:model\.layers|transformer\.h)\.(\d+)\.(.+)\.(weight|bias)")


def gguf_tensors(name: str, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A case's Hugging Face tensors under llama.cpp's names and layouts (float32)."""
    config = CASES[name]
    gpt2 = config["model_type"] == "gpt2"
    names = GPT2_NAMES if gpt2 else LLAMA_NAMES
    out = {}
    for hf, w in tensors.items():
        layer = LAYER.fullmatch(hf)
        if layer:
            gg = f"blk.{layer[1]}.{names[layer[2]]}.{layer[3]}"
        else:
            base, suffix = hf.rsplit(".", 1)
            gg = f"{names[base]}.{suffix}"
        if gpt2 and layer and w.ndim == 2:
            w = w.T  # GPT-2's Conv1D weights, written [d_out, d_in]
        if (
            config["model_type"] in ("llama", "mistral")
            and layer
            and layer[2] in ("self_attn.q_proj", "self_attn.k_proj")
        ):
            heads = config["num_attention_heads"]
            if layer[2] == "self_attn.k_proj":
                heads = config.get("num_key_value_heads", heads)
            w = llama_cpp_permute(w, heads)
        out[gg] = np.ascontiguousarray(w)
    if gpt2:
        out["output.weight"] = out["token_embd.weight"]  # convert_hf_to_gguf.py writes GPT-2's tied head out
    return out


def tokenizer_vocab(tokenizer: Any) -> tuple[list[str], list[str], list[int]]:
    """A trained tokenizer's tokens (by id), merges ("a b") and llama.cpp token types (1 normal,
    3 control), padded to the embeddings' rows with [PAD…] tokens of type 5 (unused), as
    convert_hf_to_gguf.py pads them."""
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    types = [3 if t.startswith("<|") else 1 for t in tokens]
    padding = range(len(tokens), refs.VOCAB)
    return tokens + [f"[PAD{i}]" for i in padding], merges, types + [5 for _ in padding]


def write_gguf(
    path: Path,
    name: str,
    tensors: dict[str, np.ndarray],
    tokenizer: Any,
    *,
    qtype: str | None = None,
    pre: str = "gpt2",
    add_bos: bool | None = None,
    arch: str | None = None,
    extra: dict[str, Any] | None = None,
    tokenizer_model: str = "gpt2",
    raw: dict[str, tuple[np.ndarray, str]] | None = None,
) -> Path:
    """A GGUF of a case as llama.cpp writes one: metadata, the tokenizer, tensors
    (quantised as ``qtype`` where llama.cpp would: 2-D weights; norms stay F32)."""
    import gguf

    config = CASES[name]
    gpt2 = config["model_type"] == "gpt2"
    arch = arch or ("gpt2" if gpt2 else "qwen2" if config["model_type"] == "qwen2" else "llama")
    w = gguf.GGUFWriter(str(path), arch)
    if gpt2:
        meta = {
            "block_count": config["n_layer"],
            "context_length": config["n_positions"],
            "embedding_length": config["n_embd"],
            "feed_forward_length": config["n_inner"],
            "attention.head_count": config["n_head"],
        }
        w.add_float32(f"{arch}.attention.layer_norm_epsilon", config["layer_norm_epsilon"])
    else:
        meta = {
            "block_count": config["num_hidden_layers"],
            "context_length": config["max_position_embeddings"],
            "embedding_length": config["hidden_size"],
            "feed_forward_length": config["intermediate_size"],
            "attention.head_count": config["num_attention_heads"],
            "attention.head_count_kv": config.get("num_key_value_heads", config["num_attention_heads"]),
        }
        if config.get("head_dim"):
            meta["attention.key_length"] = meta["attention.value_length"] = config["head_dim"]
        w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", config["rms_norm_eps"])
        theta = (config.get("rope_parameters") or {}).get("rope_theta") or config.get("rope_theta") or 10000.0
        w.add_float32(f"{arch}.rope.freq_base", theta)
    for key, value in meta.items():
        w.add_uint32(f"{arch}.{key}", value)
    for key, value in (extra or {}).items():
        (w.add_string if isinstance(value, str) else w.add_uint32)(key, value)
    if tokenizer is not None:
        _write_tokenizer(w, tokenizer, tokenizer_model, pre, add_bos)
    for gg, array in gguf_tensors(name, tensors).items():
        if qtype and array.ndim == 2:
            kind = gguf.GGMLQuantizationType[qtype]
            w.add_tensor(gg, gguf.quants.quantize(array, kind), raw_dtype=kind)
        else:
            w.add_tensor(gg, array)
    for gg, (data, kind_name) in (raw or {}).items():
        w.add_tensor(gg, data, raw_dtype=gguf.GGMLQuantizationType[kind_name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _write_tokenizer(w: Any, tokenizer: Any, model: str, pre: str, add_bos: bool | None) -> None:
    tokens, merges, types = tokenizer_vocab(tokenizer)
    w.add_string("tokenizer.ggml.model", model)
    w.add_string("tokenizer.ggml.pre", pre)
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.merges", merges)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.bos_token_id", 0)
    w.add_uint32("tokenizer.ggml.eos_token_id", 0)
    if add_bos is not None:
        w.add_bool("tokenizer.ggml.add_bos_token", add_bos)


def round_trip(name: str, tensors: dict[str, np.ndarray], qtype: str) -> dict[str, np.ndarray]:
    """The Hugging Face tensors as a ``qtype`` GGUF holds them: each 2-D weight quantised
    along llama.cpp's rows (GPT-2's Conv1D: along its columns) and dequantised."""
    import gguf

    kind = gguf.GGMLQuantizationType[qtype]
    gpt2 = CASES[name]["model_type"] == "gpt2"

    def q(w: np.ndarray) -> np.ndarray:
        w = np.ascontiguousarray(w)  # quantize reads memory in order
        return gguf.quants.dequantize(gguf.quants.quantize(w, kind), kind).reshape(w.shape)

    return {
        k: np.ascontiguousarray(q(v.T).T if gpt2 and LAYER.fullmatch(k) else q(v)) if v.ndim == 2 else v
        for k, v in tensors.items()
    }  # contiguous: safetensors' numpy writer saves the memory as it lies
