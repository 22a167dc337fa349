"""Bytes -> text: UTF-8 (with or without a byte-order mark) and UTF-16/UTF-32
with a byte-order mark (Excel's "Unicode text") are read; anything else is
refused with a name for what it probably is, so that a Windows-1252 CSV or an
Excel workbook renamed .csv gets a useful reason, not "not UTF-8"."""

from __future__ import annotations

import codecs

from attncli.errors import AttnError

# Longest first: the UTF-32 LE mark begins with the UTF-16 LE one.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)

# Files that are not text at all, by their first bytes: (magic, what it is, what to do).
NOT_TEXT = (
    (b"\x93NUMPY", "an NPY array", "name it .npy"),
    (
        b"PK\x03\x04",
        "a zip archive (an Excel .xlsx workbook, or an NPZ archive)",
        "save a sheet as CSV UTF-8, or name an NPZ archive .npz",
    ),
    (b"\xd0\xcf\x11\xe0", "an Excel .xls workbook", "save the sheet as CSV UTF-8"),
    (b"\x1f\x8b", "gzip-compressed", "decompress it first: gunzip"),
    (b"%PDF", "a PDF document", None),
)


def decode(data: bytes, source: str) -> str:
    """The text of ``data``: by its byte-order mark, else UTF-8; else an
    AttnError saying what the bytes probably are and how to make them UTF-8.
    NUL characters are never text (UTF-16 without its mark is valid UTF-8
    when it holds only ASCII)."""
    for magic, _, _ in NOT_TEXT:
        if data.startswith(magic):
            raise not_utf8(data, 0, source)
    for mark, codec, name in BYTE_ORDER_MARKS:
        if data.startswith(mark):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as e:
                line = data[: e.start].decode(codec, errors="replace").count("\n") + 1
                raise AttnError(
                    f"is not valid {name} text, though it starts with a {name} byte-order mark",
                    source=source,
                    line=line,
                ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(data, e.start, source) from None
    if "\x00" in text or _binary(data[:65536]):
        raise not_utf8(data, 0, source)
    return text


CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f")


def _binary(sample: bytes) -> bool:
    """NUL bytes, or more than 5 % control characters other than tab, line ends and form feed."""
    return 0 in sample or len(sample) - len(sample.translate(None, CONTROL)) > 0.05 * len(sample)


def head_text(data: bytes, size: int = 4096) -> str:
    """The start of ``data`` as text, for recognising a format: decoded as
    ``decode`` would, with undecodable bytes replaced."""
    for mark, codec, _ in BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return data[: size * 4].decode(codec, errors="replace")
    return data[:size].decode("utf-8", errors="replace")


def not_utf8(data: bytes, start: int, source: str) -> AttnError:
    """Name what bytes that are not UTF-8 probably are: a known binary file,
    UTF-16 without its byte-order mark, binary data, or a one-byte Windows
    code page (what Excel's plain "CSV" writes outside UTF-8)."""
    for magic, what, hint in NOT_TEXT:
        if data.startswith(magic):
            return AttnError(f"is {what}, not text", source=source, hint=hint)
    sample = data[:65536]
    zeros_even, zeros_odd = sample[0::2].count(0), sample[1::2].count(0)
    pairs = max(1, len(sample) // 2)
    if max(zeros_even, zeros_odd) > 0.3 * pairs and min(zeros_even, zeros_odd) < 0.05 * pairs:
        order = "LE" if zeros_odd > zeros_even else "BE"
        return AttnError(
            "is UTF-16 text without a byte-order mark",
            source=source,
            hint=f"save it as UTF-8, or convert it: iconv -f UTF-16{order} -t UTF-8",
        )
    if _binary(sample):
        return AttnError(
            "is binary data, not text",
            source=source,
            hint="attn reads CSV, TSV, YAML and JSON text, or NPY/NPZ arrays by their extension",
        )
    line = data[:start].count(b"\n") + 1
    return AttnError(
        "is not UTF-8 text: it looks like Windows-1252 (Latin-1) text",
        source=source,
        line=line,
        hint="save it as UTF-8, in Excel as CSV UTF-8, or convert it: iconv -f WINDOWS-1252 -t UTF-8",
    )
