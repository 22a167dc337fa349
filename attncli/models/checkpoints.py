"""A Hugging Face folder's tensors: ``model.safetensors``, or the shards that
``model.safetensors.index.json`` names, each read through attn's one
safetensors reader (``readers.tensors.load``: float32, float16, bfloat16
through ml_dtypes), the reader ``attn run`` uses on a safetensors file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attncli.errors import AttnError, file_error
from attncli.models.jsonfiles import read_json

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def checkpoint_files(folder: Path) -> list[Path]:
    """The files ``read_checkpoint`` may read: the single file, or the index and its shards."""
    if (folder / SINGLE).is_file() or not (folder / INDEX).is_file():
        return [folder / SINGLE]
    try:
        return [folder / INDEX, *(folder / shard for shard in sorted(set(_weight_map(folder).values())))]
    except AttnError:
        return [folder / INDEX]


def read_checkpoint(folder: Path) -> tuple[dict[str, Any], str]:
    """Every tensor by its Hugging Face name, and the file to name in errors about them."""
    if (folder / SINGLE).is_file():
        return _read(folder / SINGLE), str(folder / SINGLE)
    if (folder / INDEX).is_file():
        return _read_shards(folder), str(folder / INDEX)
    other = next((f.name for f in sorted(folder.glob("*.bin")) if f.is_file()), None)
    raise AttnError(
        f"no {SINGLE}",
        source=str(folder),
        hint=f"{other} is a PyTorch pickle, which attn does not read; convert it to safetensors" if other else None,
    )


def _read(path: Path) -> dict[str, Any]:
    from attncli.readers.tensors import load

    try:
        data = path.read_bytes()
    except OSError as e:
        raise file_error(str(path), e) from None
    return load(data, str(path))


def _weight_map(folder: Path) -> dict[str, str]:
    """The index's ``weight_map``: tensor name -> shard file, each a file of this folder."""
    index = read_json(folder / INDEX)
    weight_map = index.get("weight_map")
    source = str(folder / INDEX)
    if not isinstance(weight_map, dict) or not weight_map:
        raise AttnError("weight_map must be an object naming each tensor's shard", source=source)
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", ".."):
            raise AttnError(
                f"weight_map puts {name!r} in {shard!r}, which is not a file name",
                source=source,
                hint="shards are files next to the index",
            )
    return weight_map


def _read_shards(folder: Path) -> dict[str, Any]:
    weight_map = _weight_map(folder)
    tensors: dict[str, Any] = {}
    for shard in sorted(set(weight_map.values())):
        path = folder / shard
        if not path.is_file():
            raise AttnError(
                f"names the shard {shard}, which is not in the folder",
                source=str(folder / INDEX),
                hint="every shard the index lists is needed",
            )
        held = _read(path)
        missing = sorted(name for name, where in weight_map.items() if where == shard and name not in held)
        if missing:
            raise AttnError(f"holds no tensor {missing[0]!r}, which {INDEX} puts there", source=str(path))
        tensors.update(held)
    return tensors
