"""llama.cpp's GGUF files, through the ``gguf`` package (llama.cpp's own reader;
the ``models`` extra): the metadata as config.json's fields of its family
(``conventions.gguf_fields``), every tensor dequantised to float32 under its
Hugging Face name, and the tokenizer rebuilt with ``tokenizers``.

What a GGUF does differently from the Hugging Face checkpoint it came from,
and is undone here:

- names: ``blk.3.attn_q.weight`` is ``layers.3.self_attn.q_proj.weight``
  (each family's ``GgufNames``);
- for the llama architecture, llama.cpp permutes each head's rows of
  ``attn_q`` and ``attn_k`` (``convert_hf_to_gguf.py``'s ``permute``:
  ``w.reshape(h, 2, d/h/2, …).swapaxes(1, 2)``) so that its RoPE can pair
  adjacent features; ``unpermute`` puts them back, so Hugging Face's RoPE
  by halves applies (``conventions``: ``layout="hf"``);
- GPT-2's Conv1D weights are stored transposed;
- the tokenizer is a vocabulary and merges in the metadata; its split rule
  (``tokenizer.ggml.pre``) is llama.cpp's, one of ``PRE_TOKENIZERS``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attncli.errors import AttnError, file_error
from attncli.models.base import Family, GgufNames, Tensors
from attncli.models.conventions import CONVENTIONS, gguf_fields
from attncli.models.fields import Fields

# The tensor types attn dequantises (through gguf's quants.dequantize): floats,
# llama.cpp's block quantisations, K-quants, I-quants and ternary ones.
DEQUANTISED = (
    "F32",
    "F16",
    "BF16",
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "IQ1_S",
    "IQ1_M",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ2_S",
    "IQ3_XXS",
    "IQ3_S",
    "IQ4_NL",
    "IQ4_XS",
    "TQ1_0",
    "TQ2_0",
)
LAYER = re.compile(r"blk\.(\d+)\.(.+)")


class Metadata(Mapping[str, Any]):
    """A GGUF's key/value metadata as Python values, each read when first asked
    (the vocabulary's 50,000 strings only when the tokenizer is built)."""

    def __init__(self, reader: Any) -> None:
        self.fields = reader.fields
        self.cache: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self.cache:
            self.cache[key] = _value(self.fields[key])
        return self.cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


def _value(field: Any) -> Any:
    """A ReaderField's value: a string, number, bool, or a list of them (gguf ≥ 0.10's parts and data)."""
    from gguf import GGUFValueType

    kind = GGUFValueType(field.types[0])
    if kind == GGUFValueType.ARRAY:
        inner = GGUFValueType(field.types[-1])
        return [_scalar(inner, field.parts[i]) for i in field.data]
    return _scalar(kind, field.parts[field.data[0]])


def _scalar(kind: Any, part: np.ndarray) -> Any:
    from gguf import GGUFValueType

    if kind == GGUFValueType.STRING:
        return bytes(part).decode("utf-8", errors="replace")
    if kind == GGUFValueType.BOOL:
        return bool(part[0])
    if kind in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return float(part[0])
    return int(part[0])


def open_gguf(path: Path) -> Any:
    """gguf's reader over the file (memory-mapped), or one line saying why not."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise file_error(str(path), e) from None
    if magic != b"GGUF":
        raise AttnError("is not a GGUF file (it does not start with GGUF)", source=str(path))
    try:
        return _reader(path)
    except Exception as e:  # gguf raises ValueError, struct.error, IndexError … on damaged files
        detail = (str(e).splitlines() or [""])[0] or type(e).__name__
        raise AttnError(f"is not a readable GGUF file ({detail})", source=str(path)) from None


class _PlainMaps:
    """numpy as gguf's reader module sees it, except that ``memmap`` gives a plain ndarray
    over the same mapping. The reader slices its file a few times per metadata value
    (about 250,000 times for SmolLM2's 49,152-token vocabulary), and every slice of an
    ``np.memmap`` runs numpy's Python ``__array_finalize__``: SmolLM2's metadata took
    2.2 s to read, and 1.0 s so (the same fields and tensors, tested)."""

    def __init__(self, numpy: Any) -> None:
        self._numpy = numpy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._numpy, name)

    def memmap(self, *args: Any, **kwargs: Any) -> Any:
        return self._numpy.memmap(*args, **kwargs).view(self._numpy.ndarray)


_READING = threading.Lock()  # one reader at a time sees the module's numpy changed


def _reader(path: Path) -> Any:
    """gguf's ``GGUFReader`` over the file, its numpy's memmap a plain array while it reads."""
    import gguf.gguf_reader as module

    if not hasattr(module, "np"):  # a gguf that reads otherwise: as it is
        return module.GGUFReader(path)
    with _READING:
        numpy = module.np
        module.np = _PlainMaps(numpy)  # type: ignore[assignment]  # numpy, but for memmap
        try:
            return module.GGUFReader(path)
        finally:
            module.np = numpy


def read_fields(reader: Any, path: Path) -> Fields:
    """The metadata as config.json's fields of its family; the vocabulary size from the
    vocabulary when the metadata does not say, and tied when there is no output head."""
    metadata = Metadata(reader)
    fields = gguf_fields(metadata, str(path))
    if "vocab_size" not in fields and "tokenizer.ggml.tokens" in metadata:
        fields.raw["vocab_size"] = len(metadata.fields["tokenizer.ggml.tokens"].data)
        fields.names["vocab_size"] = "tokenizer.ggml.tokens"
    fields.raw["tie_word_embeddings"] = not any(t.name == "output.weight" for t in reader.tensors)
    fields.names["tie_word_embeddings"] = "output.weight"
    return fields


def read_tensors(reader: Any, fields: Fields, family: Family[Any, Any], path: Path) -> Tensors:
    """Every tensor dequantised to float32, under its Hugging Face name, as the family reads them."""
    from gguf import quants

    names = family.gguf
    assert names is not None  # FAMILIES' GGUF architectures all have names
    convention = CONVENTIONS[fields.model_type]
    permute = convention.rope is not None and convention.rope.gguf_style == "gptj"
    tensors: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        pattern, hf_name = _hf_name(t.name, names, str(path))
        kind = t.tensor_type.name
        if kind not in DEQUANTISED:
            raise AttnError(
                f"tensor {t.name!r} is quantised as {kind}, which attn does not dequantise",
                source=str(path),
                hint="attn reads F32, F16, BF16 and llama.cpp's Q4–Q8, K- and "
                "I-quants; re-quantise it with llama-quantize",
            )
        try:
            w = quants.dequantize(t.data, t.tensor_type)
        except NotImplementedError:
            raise AttnError(
                f"tensor {t.name!r} is quantised as {kind}, which this gguf cannot dequantise",
                source=str(path),
                hint="pip install --upgrade gguf",
            ) from None
        w = np.asarray(w, dtype=np.float32).reshape(tuple(int(n) for n in reversed(t.shape)))
        if permute and pattern in names.permuted:
            heads = fields.whole(names.permuted[pattern], fields.whole("num_attention_heads"))  # K: kv heads
            w = unpermute(w, heads, t.name, str(path))
        if pattern in names.transposed:
            w = w.T
        tensors[hf_name] = w
    return Tensors(tensors, family, str(path), implied_by="the GGUF's metadata")


def _hf_name(name: str, names: GgufNames, source: str) -> tuple[str, str]:
    """'blk.3.attn_q.weight' -> ('blk.{i}.attn_q', 'layers.3.self_attn.q_proj.weight')."""
    base, dot, suffix = name.rpartition(".")
    if suffix not in ("weight", "bias") or not dot:
        base, suffix = name, ""
    match = LAYER.fullmatch(base)
    pattern = f"blk.{{i}}.{match[2]}" if match else base
    if pattern not in names.names:
        if base == "rope_freqs":
            raise AttnError(
                f"tensor {name!r}: RoPE frequency factors (Llama 3.1's scaling) are not yet supported",
                source=source,
                hint="attn applies RoPE without scaling for now",
            )
        raise AttnError(
            f"tensor {name!r} has no place in attn's model of this architecture",
            source=source,
            hint="a variant attn does not run (new layers or norms)",
        )
    hf = names.names[pattern].format(i=match[1] if match else "")
    return pattern, f"{hf}.{suffix}" if suffix else hf


def unpermute(w: np.ndarray, heads: int, name: str = "", source: str | None = None) -> np.ndarray:
    """Undo llama.cpp's permutation of Q or K rows: each head's rows [2, d/2] -> [d/2, 2] back,
    so that feature pairs are halves again. [d_out, …] -> [d_out, …] (a bias is [d_out])."""
    rows = w.shape[0]
    if rows % (2 * heads):
        raise AttnError(
            f"tensor {name!r} has {rows} rows, which do not split into {heads} heads of pairs", source=source
        )
    # llama.cpp: hf.reshape(h, 2, d/h/2, …).swapaxes(1, 2); so gguf.reshape(h, d/h/2, 2, …).swapaxes(1, 2) is hf
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# --- the tokenizer ---------------------------------------------------------------------


def _gpt2_split() -> Any:
    """GPT-2's rule: contractions, letters, numbers, other symbols, each with one space before."""
    from tokenizers import pre_tokenizers

    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def _smollm_split() -> Any:
    """SmolLM's: every digit alone, then GPT-2's rule (llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM)."""
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _gpt2_split()])


# tokenizer.ggml.pre -> the split rule llama.cpp's llama-vocab.cpp gives it (the same regexes)
PRE_TOKENIZERS = {"gpt2": _gpt2_split, "smollm": _smollm_split}
CONTROL, USER_DEFINED = 3, 4  # tokenizer.ggml.token_type


def read_tokenizer(reader: Any, path: Path) -> Any:
    """A byte-level BPE tokenizer from the vocabulary and merges in the metadata, splitting
    text as llama.cpp does for ``tokenizer.ggml.pre``, with the beginning-of-sequence
    token added when ``tokenizer.ggml.add_bos_token`` says so."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors

    meta, source = Metadata(reader), str(path)
    kind = meta.get("tokenizer.ggml.model")
    if kind is None or "tokenizer.ggml.tokens" not in meta:
        raise AttnError("no tokenizer: the file has no tokenizer.ggml.model and tokens", source=source)
    if kind != "gpt2":
        raise AttnError(
            f"tokenizer.ggml.model {kind!r} is not yet supported",
            source=source,
            hint="attn rebuilds byte-level BPE vocabularies ('gpt2')",
        )
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise AttnError(
            f"tokenizer.ggml.pre {pre!r} is not yet supported",
            source=source,
            hint=f"attn splits text as llama.cpp does for {', '.join(sorted(PRE_TOKENIZERS))}",
        )
    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    try:
        tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    except Exception as e:  # tokenizers raises plain Exception for merges of unknown tokens
        raise AttnError(f"cannot rebuild the tokenizer: {(str(e).splitlines() or [''])[0]}", source=source) from None
    tokenizer.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tokenizer.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type") or []
    kinds = list(zip(tokens, types, strict=False))
    special = [AddedToken(t, normalized=False, special=True) for t, k in kinds if k == CONTROL]
    added = [AddedToken(t, normalized=False, special=False) for t, k in kinds if k == USER_DEFINED]
    tokenizer.add_special_tokens(special)
    tokenizer.add_tokens(added)
    if meta.get("tokenizer.ggml.add_bos_token", False):
        bos = meta.get("tokenizer.ggml.bos_token_id")
        if not isinstance(bos, int) or not 0 <= bos < len(tokens):
            raise AttnError(f"tokenizer.ggml.bos_token_id must be a token's id, got {bos!r}", source=source)
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos]} $A", pair=f"{tokens[bos]} $A {tokens[bos]} $B", special_tokens=[(tokens[bos], bos)]
        )
    return tokenizer


def eos_ids(reader: Any) -> tuple[int, ...]:
    """The end-of-sequence token's id, if the file names one."""
    eos = Metadata(reader).get("tokenizer.ggml.eos_token_id")
    return (eos,) if isinstance(eos, int) else ()
