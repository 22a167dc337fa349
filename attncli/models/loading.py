"""Loading a model: find its folder (a path, a name in the Hugging Face cache,
or $ATTN_MODEL), read config.json into its family's typed config, its params
from model.safetensors by name, its tokenizer, and how sentence-transformers
pools it. Nothing is ever downloaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attncli.errors import AttnError, UsageError, file_error
from attncli.models.base import Family, ModelConfig, Tensors, whole_number
from attncli.models.families import family_for
from attncli.models.pooling import POOLINGS

MODEL_ENV = "ATTN_MODEL"  # the default for --model
EXTRA_HINT = "pip install '.[models]' in attn's source folder"


@dataclass
class Model:
    """A loaded encoder: its family, sizes, params, tokenizer, and how it pools."""

    name: str  # as the user named it (folder or cache name)
    path: Path  # the folder the files came from
    family: Family[Any, Any]  # from config.json's model_type
    config: ModelConfig  # the family's typed config (BertConfig for BERT)
    params: Any  # the family's typed params (BertParams for BERT)
    tokenizer: Any  # a tokenizers.Tokenizer, without padding or truncation
    max_tokens: int  # longest input, special tokens included
    pooling: str  # one of pooling.POOLINGS
    normalise: bool  # L2-normalise sentence embeddings (sentence-transformers' Normalize)


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
    snapshots = sorted((s for s in (repo / "snapshots").iterdir() if s.is_dir()), key=lambda s: s.stat().st_mtime)
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
        raise AttnError(
            "is a file, not a model folder",
            source=name,
            hint="give the folder that holds config.json and model.safetensors",
        )
    snapshot = cached_snapshot(name)
    if snapshot is None:
        raise AttnError(
            f"no model folder, and no model of that name in {hf_cache()}",
            source=name,
            hint="attn never downloads: give a folder with config.json, model.safetensors and vocab.txt",
        )
    return snapshot


# --- reading it ---------------------------------------------------------------


def _require_extra() -> None:
    """Say which extra to install when safetensors or tokenizers is missing."""
    for module in ("safetensors", "tokenizers"):
        try:
            __import__(module)
        except ImportError:
            raise AttnError(f"running a model needs {module}, from the 'models' extra", hint=EXTRA_HINT) from None


def _parse_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise AttnError("not valid JSON: nested too deeply", source=str(path)) from None
    except ValueError as e:  # not UTF-8, not JSON, a number of more than 4,300 digits
        problem = "a number has too many digits" if "integer string conversion" in str(e) else str(e).splitlines()[0]
        raise AttnError(f"not valid JSON: {problem}", source=str(path)) from None
    except OSError as e:
        raise file_error(str(path), e) from None


def _read_json(path: Path, required: bool = False) -> dict:
    """A JSON object from the model folder ({} for an optional file that is absent)."""
    if not path.is_file():
        if required:
            raise AttnError(
                f"not a model folder: no {path.name}",
                source=str(path.parent),
                hint="a model folder holds config.json, model.safetensors and vocab.txt or tokenizer.json",
            )
        return {}
    data = _parse_json(path)
    if not isinstance(data, dict):
        raise AttnError("expected a JSON object", source=str(path))
    return data


def read_config(folder: Path) -> tuple[Family[Any, Any], ModelConfig]:
    """config.json: the family its model_type names, and that family's typed config."""
    source = str(folder / "config.json")
    config = _read_json(folder / "config.json", required=True)
    family = family_for(config, source)
    return family, family.config(config, source)


def read_params(folder: Path, family: Family[Any, Any], config: ModelConfig) -> Any:
    """model.safetensors, through safetensors' numpy loader, picked by name into
    the family's typed params."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = folder / "model.safetensors"
    if not path.is_file():
        other = next((f.name for f in sorted(folder.glob("*.bin")) if f.is_file()), None)
        raise AttnError(
            "no model.safetensors",
            source=str(folder),
            hint=f"{other} is a PyTorch pickle, which attn does not read; convert it to safetensors" if other else None,
        )
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise AttnError(f"cannot read the parameters: {str(e).splitlines()[0]}", source=str(path)) from None
    return family.params(Tensors(tensors, family, str(path)), config)


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
            lowercase = settings.get("do_lower_case", True)
            if not isinstance(lowercase, bool):
                raise AttnError(
                    f"do_lower_case must be true or false, got {lowercase!r}",
                    source=str(folder / "tokenizer_config.json"),
                )
            tokenizer = BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=lowercase)._tokenizer
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
    L2-normalises (a Normalize module in modules.json). A plain model folder,
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


def read_files(folder: Path) -> list[Path]:
    """Every file of a model folder that ``load_model`` may read."""
    names = [
        "config.json",
        "sentence_bert_config.json",
        "modules.json",
        "model.safetensors",
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
    ]
    pooling = [str(m.get("path") or "") for m in _read_modules(folder) if isinstance(m, dict)]
    return [folder / name for name in names] + [
        folder / path / "config.json" for path in ["1_Pooling", *pooling] if path
    ]


def load_model(name: str | os.PathLike[str] | None = None) -> Model:
    """Find and read a model of a registered family: a folder, a cached name, or $ATTN_MODEL."""
    _require_extra()
    folder = find_model(None if name is None else str(name))
    family, config = read_config(folder)
    st_config = _read_json(folder / "sentence_bert_config.json")
    max_tokens = config.n_positions
    if st_config.get("max_seq_length") is not None:
        longest = whole_number(st_config, "max_seq_length", str(folder / "sentence_bert_config.json"))
        max_tokens = min(longest, max_tokens)
    pooling, normalise = read_pooling(folder)
    return Model(
        name=str(name or folder),
        path=folder,
        family=family,
        config=config,
        params=read_params(folder, family, config),
        tokenizer=read_tokenizer(folder),
        max_tokens=max_tokens,
        pooling=pooling,
        normalise=normalise,
    )
