"""One-off check of attn's numpy BERT against the reference implementation.

Not part of the test suite: it needs torch, transformers and
sentence-transformers, which attn never uses. Run it in a throwaway
environment that has them and attncli[models]:

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 transformers \
        sentence-transformers -e '.[models]'
    /tmp/ref/bin/python scripts/reference_check.py MODEL_DIR

It prints the largest differences of the last hidden states, every layer's
attention weights and the sentence embeddings, and the numbers pinned in
tests/test_trace.py (so they can be re-measured).
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer

from attncli.models import load_model, sentence_embeddings, tokenize
from attncli.models.running import encode

TEXTS = [
    "The pink elephant tried to get into the car but it was too big",
    "a sweet yellow fruit",
    "apple",
    "banana",
    "chair",
    "fruit",
]


def main(folder: str) -> None:
    torch.set_grad_enabled(False)
    tok = AutoTokenizer.from_pretrained(folder)
    ref = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    ours = load_model(folder)

    batch = tok(TEXTS, padding=True, return_tensors="pt")
    out = ref(**batch, output_attentions=True)
    ref_hidden = out.last_hidden_state.numpy()  # [b, n, d]
    ref_weights = torch.stack(out.attentions).numpy()  # [n_layer, b, n_head, n, n]

    mine = tokenize(ours, TEXTS)
    assert (mine.ids == batch["input_ids"].numpy()).all(), "token ids differ"
    hidden, weights = encode(ours, mine)  # [b, n, d], attention weights [n_layer, b, n_head, n, n]
    real = mine.allowed  # compare real tokens only: padded rows are unused by both
    print("max |Δ| last hidden state (real tokens):", np.abs(hidden - ref_hidden)[real].max())
    print(
        "max |Δ| attention weights (real query rows):",
        np.abs(weights - ref_weights).transpose(1, 3, 0, 2, 4)[real].max(),
    )
    print("dtypes:", hidden.dtype, weights.dtype)

    st = SentenceTransformer(folder, device="cpu")
    ref_emb = st.encode(TEXTS, convert_to_numpy=True)
    emb = sentence_embeddings(ours, TEXTS)
    print("max |Δ| sentence embeddings:", np.abs(emb - ref_emb).max())
    long = " ".join(["the pink elephant tried to get into the car but it was too big"] * 30)  # > 256 tokens
    print(
        "max |Δ| sentence embedding of a text cut to max_seq_length:",
        np.abs(sentence_embeddings(ours, [long]) - st.encode([long], convert_to_numpy=True)).max(),
    )
    for i in (1, 5):  # "a sweet yellow fruit", "fruit" vs apple, banana, chair
        print(
            f"cosine {TEXTS[i]!r} vs apple/banana/chair, ours:",
            np.round(emb[i] @ emb[2:5].T, 4),
            "reference:",
            np.round(ref_emb[i] @ ref_emb[2:5].T, 4),
        )

    # The numbers tests/test_trace.py pins, measured with the reference.
    n = int(real[0].sum())
    print("tokens:", tok.convert_ids_to_tokens(batch["input_ids"][0][:n]))
    np.set_printoptions(precision=6, suppress=True, linewidth=200)
    for layer, head in ((0, 0), (2, 5), (5, 11)):
        print(f"layer {layer} head {head}, query 'it' (row 11):", repr(ref_weights[layer, 0, head, 11, :n]))
    print("embedding[:5, :6]:", repr(ref_emb[:5, :6]))


if __name__ == "__main__":
    main(sys.argv[1])
