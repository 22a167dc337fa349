"""A model folder's JSON files (config.json, the shards' index, tokenizer and
pooling settings): parsed once, each mistake one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attncli.errors import AttnError, file_error


def parse_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise AttnError("not valid JSON: nested too deeply", source=str(path)) from None
    except ValueError as e:  # not UTF-8, not JSON, a number of more than 4,300 digits
        problem = "a number has too many digits" if "integer string conversion" in str(e) else str(e).splitlines()[0]
        raise AttnError(f"not valid JSON: {problem}", source=str(path)) from None
    except OSError as e:
        raise file_error(str(path), e) from None


def read_json(path: Path, required: bool = False) -> dict:
    """A JSON object from the model folder ({} for an optional file that is absent)."""
    if not path.is_file():
        if required:
            raise AttnError(
                f"not a model folder: no {path.name}",
                source=str(path.parent),
                hint="a model folder holds config.json, model.safetensors and vocab.txt or tokenizer.json",
            )
        return {}
    data = parse_json(path)
    if not isinstance(data, dict):
        raise AttnError("expected a JSON object", source=str(path))
    return data


def parse_json_object(path: Path) -> dict:
    """A JSON file that must hold an object (a config.json named on its own)."""
    data = parse_json(path)
    if not isinstance(data, dict):
        raise AttnError("expected a JSON object (a model's config.json)", source=str(path))
    return data
