"""Loading a model: find its folder (a path, a name in the Hugging Face cache,
or $ATTN_MODEL) or its GGUF file, read config.json into its family's typed
config, its params from model.safetensors (or its shards) by name, its
tokenizer, and how sentence-transformers pools it. A GGUF file holds all of
these (``ggufs``). Nothing is ever downloaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attncli.errors import AttnError, UsageError
from attncli.models.base import Family, ModelConfig, Tensors, whole_number
from attncli.models.checkpoints import checkpoint_files, read_checkpoint
from attncli.models.families import FAMILIES, family_for
from attncli.models.fields import Fields
from attncli.models.jsonfiles import parse_json, parse_json_object, read_json
from attncli.models.pooling import POOLINGS

MODEL_ENV = "ATTN_MODEL"  # the default for --model
EXTRA_HINT = "pip install '.[models]' in attn's source folder"


@dataclass
class Model:
    """A loaded model: its family, sizes, params, tokenizer, and how it pools."""

    name: str  # as the user named it (folder, cache name or GGUF file)
    path: Path  # the folder the files came from, or the GGUF file
    family: Family[Any, Any]  # from config.json's model_type (or the GGUF's architecture)
    config: ModelConfig  # the family's typed config (BertConfig for BERT)
    params: Any  # the family's typed params (BertParams for BERT)
    tokenizer: Any  # a tokenizers.Tokenizer, without padding or truncation
    max_tokens: int  # longest input, special tokens included
    pooling: str  # one of pooling.POOLINGS
    normalise: bool  # L2-normalise sentence embeddings (sentence-transformers' Normalize)
    fields: Fields | None = None  # config.json's fields (or the GGUF's, by config.json's names)
    eos: tuple[int, ...] = ()  # end-of-sequence token ids, where the files name them (generation stops there)


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
    if path.is_dir() or (path.suffix.lower() == ".gguf" and path.exists()):
        return path
    if path.exists():
        raise AttnError(
            "is a file, not a model folder",
            source=name,
            hint="give the folder that holds config.json and model.safetensors, or a .gguf file",
        )
    snapshot = cached_snapshot(name)
    if snapshot is None:
        raise AttnError(
            f"no model folder, and no model of that name in {hf_cache()}",
            source=name,
            hint="attn never downloads: give a folder with config.json, model.safetensors and vocab.txt",
        )
    return snapshot


def read_model_fields(name: str) -> Fields:
    """A model's config for ``--model`` on the attention commands (its attention settings
    only): a config.json (any JSON file), a folder holding one, a ``.gguf`` file's
    metadata, or the name of a model in the Hugging Face cache."""
    path = Path(name).expanduser()
    if path.is_file():
        with open(path, "rb") as f:
            gguf = f.read(4) == b"GGUF"
        if gguf or path.suffix.lower() == ".gguf":
            from attncli.models import ggufs

            require_extra("reading a GGUF", ("gguf",))
            return ggufs.read_fields(ggufs.open_gguf(path), path)
        return Fields(parse_json_object(path), str(path))
    if not path.exists() and cached_snapshot(name) is None:
        raise AttnError(
            "no such file or folder",
            source=name,
            hint="give a model's config.json, the folder that holds it, or a .gguf file",
        )
    folder = find_model(name)
    return Fields(read_json(folder / "config.json", required=True), str(folder / "config.json"))


# --- reading it ---------------------------------------------------------------


MODEL_MODULES = ("safetensors", "tokenizers")  # what running a model folder needs; a GGUF needs gguf too


def require_extra(doing: str, modules: tuple[str, ...]) -> None:
    """Say which extra to install when one of ``modules`` is missing for ``doing``
    ("running a model", "converting a GGUF")."""
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            raise AttnError(f"{doing} needs {module}, from the 'models' extra", hint=EXTRA_HINT) from None


def read_config(folder: Path) -> tuple[Family[Any, Any], ModelConfig, Fields]:
    """config.json: the family its model_type names, and that family's typed config."""
    source = str(folder / "config.json")
    fields = Fields(read_json(folder / "config.json", required=True), source)
    family = family_for(fields, source)
    return family, family.config(fields, source), fields


def read_params(folder: Path, family: Family[Any, Any], config: ModelConfig) -> Any:
    """model.safetensors or its shards (``checkpoints``), picked by name into the family's typed params."""
    tensors, source = read_checkpoint(folder)
    return family.params(Tensors(tensors, family, source), config)


def read_tokenizer(folder: Path, decoder: bool = False) -> Any:
    """tokenizer.json if there is one, else (for an encoder) WordPiece from vocab.txt,
    with padding and truncation off (attn pads and checks lengths itself)."""
    from tokenizers import Tokenizer

    try:
        if (folder / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        elif decoder:
            raise AttnError(
                "no tokenizer: no tokenizer.json",
                source=str(folder),
                hint="a decoder's folder holds the tokenizer.json Hugging Face saves with it",
            )
        elif (folder / "vocab.txt").is_file():
            from tokenizers.implementations import BertWordPieceTokenizer

            settings = read_json(folder / "tokenizer_config.json")
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
    settings = read_json(folder / pooling_dir / "config.json")
    keys = {"cls": "pooling_mode_cls_token"}
    mode = next((m for m in POOLINGS if settings.get(keys.get(m, f"pooling_mode_{m}_tokens"))), "mean")
    return mode, "Normalize" in kinds


def _read_modules(folder: Path) -> list:
    """sentence-transformers' modules.json: a list of {type, path}; [] if absent."""
    path = folder / "modules.json"
    data = parse_json(path) if path.is_file() else []
    return data if isinstance(data, list) else []


def read_files(folder: Path) -> list[Path]:
    """Every file of a model folder (or the GGUF file) that ``load_model`` may read."""
    if folder.is_file():
        return [folder]
    names = [
        "config.json",
        "sentence_bert_config.json",
        "modules.json",
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
    ]
    pooling = [str(m.get("path") or "") for m in _read_modules(folder) if isinstance(m, dict)]
    return (
        [folder / name for name in names]
        + checkpoint_files(folder)
        + [folder / path / "config.json" for path in ["1_Pooling", *pooling] if path]
    )


def load_gguf(path: Path, name: str) -> Model:
    """A GGUF file: its family by architecture, params dequantised, its tokenizer rebuilt (``ggufs``)."""
    from attncli.models import ggufs

    reader = ggufs.open_gguf(path)
    fields = ggufs.read_fields(reader, path)
    tokenizer = ggufs.read_tokenizer(reader, path)
    family = FAMILIES[fields.model_type]
    config = family.config(fields, str(path))
    params = family.params(ggufs.read_tensors(reader, fields, family, path), config)
    return Model(
        name=name,
        path=path,
        family=family,
        config=config,
        params=params,
        tokenizer=tokenizer,
        max_tokens=config.n_positions,
        pooling="mean",
        normalise=False,
        fields=fields,
        eos=ggufs.eos_ids(reader),
    )


def _eos(fields: Fields, folder: Path) -> tuple[int, ...]:
    """config.json's (or generation_config.json's) eos_token_id: one id or a list."""
    value = fields.get("eos_token_id")
    if value is None:
        value = read_json(folder / "generation_config.json").get("eos_token_id")
    ids = value if isinstance(value, list) else [value]
    return tuple(i for i in ids if isinstance(i, int) and not isinstance(i, bool))


def load_model(name: str | os.PathLike[str] | None = None) -> Model:
    """Find and read a model of a registered family: a folder, a GGUF file, a cached name, or $ATTN_MODEL."""
    path = find_model(None if name is None else str(name))
    require_extra("running a model", (*MODEL_MODULES, *(("gguf",) if path.is_file() else ())))
    if path.is_file():
        return load_gguf(path, str(name or path))
    folder = path
    family, config, fields = read_config(folder)
    st_config = read_json(folder / "sentence_bert_config.json")
    max_tokens = config.n_positions
    if st_config.get("max_seq_length") is not None:
        longest = whole_number(st_config, "max_seq_length", str(folder / "sentence_bert_config.json"))
        max_tokens = min(longest, max_tokens)
    pooling, normalise = read_pooling(folder)
    decoder = family.kind == "decoder"
    tokenizer = read_tokenizer(folder, decoder)  # before the params: a missing tokenizer is found at once
    return Model(
        name=str(name or folder),
        path=folder,
        family=family,
        config=config,
        params=read_params(folder, family, config),
        tokenizer=tokenizer,
        max_tokens=max_tokens,
        pooling=pooling,
        normalise=normalise,
        fields=fields,
        eos=_eos(fields, folder) if decoder else (),
    )
