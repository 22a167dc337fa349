"""A GGUF file written out as a Hugging Face folder (``attn convert``): config.json,
model.safetensors (float32, dequantised once) and tokenizer.json, so that later
traces read the folder in a fraction of the time (no metadata parse, no
dequantising) and transformers can load it too.

The folder is written whole into a hidden folder beside it and renamed into
place at the end: an interrupted or failed conversion leaves nothing behind,
and never a half-written folder under the name asked for.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.errors import AttnError, file_error


@dataclass(frozen=True)
class Converted:
    """What ``convert_gguf`` wrote."""

    source: Path  # the GGUF file
    folder: Path
    family: str  # "Llama"
    model_type: str
    tensors: int
    parameters: int  # numbers in model.safetensors
    files: dict[str, int]  # file name -> bytes written


def hf_config(fields: Any, family: Any, bos: int | None, eos: tuple[int, ...]) -> dict[str, Any]:
    """config.json from a GGUF's fields (already under config.json's names, ``ggufs.read_fields``)."""
    config: dict[str, Any] = {"architectures": [family.architecture], **fields.raw, "torch_dtype": "float32"}
    if bos is not None:
        config["bos_token_id"] = bos
    if eos:
        config["eos_token_id"] = eos[0] if len(eos) == 1 else list(eos)
    return config


def hf_tensor_names(tensors: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The family's names as a ``*ForCausalLM`` checkpoint holds them: its prefix on every
    tensor but the output head (``lm_head.weight`` sits beside the model)."""
    return {
        (name if name.startswith("lm_head.") else prefix + name): np.ascontiguousarray(t) for name, t in tensors.items()
    }


def convert_gguf(path: Path, folder: Path, cleanup: Callable[[Callable[[], None]], Any] | None = None) -> Converted:
    """Read the GGUF at ``path`` as ``attn trace`` does and write ``folder`` (new, or empty).

    ``cleanup``: given the function that removes the half-written folder, for the
    caller to run if the process is interrupted (``cli.worker.on_interrupt``)."""
    from contextlib import nullcontext

    from safetensors.numpy import save_file

    from attncli.models import ggufs
    from attncli.models.families import FAMILIES

    reader = ggufs.open_gguf(path)
    fields = ggufs.read_fields(reader, path)
    family = FAMILIES[fields.model_type]
    family.config(fields, str(path))  # the same checks as a trace: an unreadable model is refused before writing
    tokenizer = ggufs.read_tokenizer(reader, path)
    tensors = hf_tensor_names(dict(ggufs.read_tensors(reader, fields, family, path).tensors), family.prefix)
    bos = ggufs.Metadata(reader).get("tokenizer.ggml.bos_token_id")
    config = hf_config(fields, family, bos if isinstance(bos, int) else None, ggufs.eos_ids(reader))
    if fields.model_type == "llama":
        _attention_biases(config, tensors)

    parent = folder.resolve().parent
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    except OSError as e:
        raise file_error(str(folder), e, writing=True) from None

    def remove() -> None:
        shutil.rmtree(staging, ignore_errors=True)

    mask = os.umask(0o022)
    os.umask(mask)

    try:
        with cleanup(remove) if cleanup is not None else nullcontext():
            (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
            save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
            tokenizer.save(str(staging / "tokenizer.json"))
            for made in (staging, *staging.iterdir()):  # as a new folder and files are made, not mkdtemp's 0700
                made.chmod((0o777 if made.is_dir() else 0o666) & ~mask)
            sizes = {
                name: (staging / name).stat().st_size for name in ("config.json", "model.safetensors", "tokenizer.json")
            }
            if folder.exists():
                _into_empty(staging, folder)
            else:
                os.replace(staging, folder)
    except OSError as e:
        remove()
        raise file_error(str(folder), e, writing=True) from None
    except BaseException:
        remove()
        raise
    return Converted(
        source=path,
        folder=folder,
        family=family.name,
        model_type=fields.model_type,
        tensors=len(tensors),
        parameters=sum(int(t.size) for t in tensors.values()),
        files=sizes,
    )


def _attention_biases(config: dict[str, Any], tensors: dict[str, np.ndarray]) -> None:
    """transformers' Llama has biases on q, k, v and o together (``attention_bias``) or on none;
    attn uses any the file holds. When some are there, say so in config.json and give the
    missing ones as zeros (which change nothing), so that transformers runs the same model."""
    layers = sorted({name.split(".self_attn.")[0] for name in tensors if ".self_attn." in name})
    wanted = [f"{layer}.self_attn.{x}_proj.bias" for layer in layers for x in "qkvo"]
    if not any(name in tensors for name in wanted):
        return
    config["attention_bias"] = True
    for name in wanted:
        if name not in tensors:
            weight = tensors[name.removesuffix("bias") + "weight"]  # [d_out, d_in]
            tensors[name] = np.zeros(weight.shape[0], dtype=weight.dtype)


def _into_empty(staging: Path, folder: Path) -> None:
    """Rename the staging folder onto an empty one (POSIX replaces an empty folder); refuse
    if it filled meanwhile."""
    if any(folder.iterdir()):
        raise AttnError("the folder is no longer empty", source=str(folder), hint="give a new folder")
    os.replace(staging, folder)
