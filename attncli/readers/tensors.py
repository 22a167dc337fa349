"""safetensors files: named tensors as PyTorch, JAX and Hugging Face save them.

Read through the ``safetensors`` package (its header checks), bytes only, never
code. bfloat16 tensors become ``ml_dtypes.bfloat16`` arrays (numpy has no
bfloat16 of its own; ``ml_dtypes`` is JAX's). Both come with the ``tensors``
extra. The file's ``__metadata__`` strings are the bundle's settings.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from attncli.errors import AttnError
from attncli.readers.arrays import matrix_from_array
from attncli.readers.base import Bundle, Input, Request, check_distinct

EXTRA_HINT = "pip install 'attncli[tensors]'"

# safetensors dtype names -> numpy dtype names (BF16 through ml_dtypes)
DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
}


def looks_like_safetensors(data: bytes) -> bool:
    """The first 8 bytes are the length (little-endian) of a JSON header that follows."""
    if len(data) < 10 or data[8:10] != b'{"':
        return False
    (length,) = struct.unpack("<Q", data[:8])
    return length <= len(data) - 8


def read_safetensors(source: Input, request: Request) -> Bundle:
    """Every tensor by name (a bundle: q, k, v, ...), or the file's one tensor."""
    data = source.data()
    tensors = load(data, source.name)
    if request.is_bundle(tensors) or len(tensors) > 1:
        if not request.is_bundle(tensors) and not request.bundle:
            names = ", ".join(tensors)
            raise AttnError(
                f"holds several tensors ({names}), expected one",
                source=source.name,
                hint="pass it as the only file to read it as a bundle",
            )
        check_distinct(tensors, source.name)
        bundle = Bundle(
            {name: matrix_from_array(array, source.name, name, request.entry(name)) for name, array in tensors.items()},
            metadata(data),
        )
        return bundle
    ((name, array),) = tensors.items()
    return Bundle.of(matrix_from_array(array, source.name, name, request))


def load(data: bytes, source: str) -> dict[str, Any]:
    """name -> ndarray, through safetensors' own parser (which checks the header and offsets)."""
    import numpy as np

    safetensors = _require("safetensors", source)
    try:
        entries = safetensors.deserialize(data)
    except Exception as e:  # SafetensorError and friends for damaged headers
        detail = (str(e).splitlines() or [""])[0] or type(e).__name__
        raise AttnError(f"is not a readable safetensors file ({detail})", source=source) from None
    tensors = {}
    for name, entry in sorted(entries, key=lambda e: e[0]):  # the package's order varies from run to run
        code = str(entry["dtype"]).upper()
        if code not in DTYPES:
            raise AttnError(
                f"{name}: holds {code} data; attn reads float tensors (F64, F32, F16, BF16)",
                source=source,
                hint="save it as float32 or bfloat16",
            )
        if code == "BF16":
            dtype = np.dtype(_require("ml_dtypes", source).bfloat16)
        else:
            dtype = np.dtype(DTYPES[code]).newbyteorder("<")
        tensors[name] = np.frombuffer(bytes(entry["data"]), dtype=dtype).reshape(entry["shape"])
    if not tensors:
        raise AttnError("the file holds no tensors", source=source)
    return tensors


def metadata(data: bytes) -> dict[str, Any]:
    """The header's ``__metadata__`` (string settings), already checked by ``load``."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    meta = header.get("__metadata__") or {}
    return {name: _scalar(value) for name, value in meta.items()} if isinstance(meta, dict) else {}


def _scalar(text: Any) -> Any:
    """A metadata string as YAML would read the scalar: true/false, a whole number, a number, else the text."""
    if not isinstance(text, str):
        return text
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _require(module: str, source: str) -> Any:
    """An optional dependency, or a one-line error naming the extra that brings it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise AttnError(
            f"reading safetensors needs {module}, from the 'tensors' extra", source=source, hint=EXTRA_HINT
        ) from None
