"""Write tests/inputs/: one Q, K, V saved the ways people's tools save them,
and the output PyTorch computes from the arrays themselves.

    pip install pandas torch==2.13.0     # only to rebuild; not dependencies of attn
    python scripts/input_files.py        # needs jq on the PATH for the JSON Lines files

tests/test_inputs.py reads every file with attn and checks it gives torch's
numbers (or, for the masks and pandas' mappings of mappings, to_json()'s
default "columns" and "index" orients, the refusal that says what to do). The files are
committed, so the tests need neither pandas nor torch nor jq.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "inputs"


ORIENTS = ("split", "table", "records", "values", "columns", "index")


def arrays() -> dict[str, np.ndarray]:
    """Q 3×4, K 5×4, V 5×2, in eighths (exact in every text format, pandas' JSON included),
    negatives included so that U+2212 and decimal commas are exercised."""
    rng = np.random.default_rng(12)
    return {name: rng.integers(-16, 17, shape) / 8 for name, shape in (("q", (3, 4)), ("k", (5, 4)), ("v", (5, 2)))}


def main() -> None:
    import pandas as pd
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    a = arrays()
    for name, x in a.items():
        frame = pd.DataFrame(x)
        np.save(OUT / f"{name}.npy", x)
        frame.to_csv(OUT / f"{name}_pandas.csv", index=False)  # header 0,1,2,3
        frame.to_csv(OUT / f"{name}_pandas_index.csv")  # ,0,1,2,3 and the index as a first column
        frame.to_csv(OUT / f"{name}_excel_eu.csv", sep=";", decimal=",", index=False, lineterminator="\r\n")
        with open(OUT / f"{name}_excel_sep.csv", "w", newline="") as f:  # Excel's "sep=" first line
            f.write("sep=;\r\n")
            frame.to_csv(f, sep=";", decimal=",", index=False, header=False, lineterminator="\r\n")
        frame.to_csv(OUT / f"{name}_unicode.txt", sep="\t", index=False, encoding="utf-16", lineterminator="\r\n")
        frame.to_csv(OUT / f"{name}_mac.csv", index=False, header=False, lineterminator="\r")  # CR-only
        frame.to_csv(OUT / f"{name}_tabs.csv", sep="\t", index=False, header=False)  # a TSV named .csv
        np.savetxt(OUT / f"{name}_savetxt.txt", x, header=" ".join(f"c{j}" for j in range(x.shape[1])))
        text = (OUT / f"{name}_pandas.csv").read_text().split("\n", 1)[1]
        (OUT / f"{name}_formula.csv").write_text(text.replace("-", "\u2212"))  # minus signs from a rendered page
        (OUT / f"{name}.json").write_text(json.dumps(x.tolist()))
        with open(OUT / f"{name}.jsonl", "w") as f:  # jq -c '.[]' q.json > q.jsonl
            subprocess.run(["jq", "-c", ".[]", str(OUT / f"{name}.json")], stdout=f, check=True)
        (OUT / f"{name}.json").unlink()
        frame.to_json(OUT / f"{name}_records.jsonl", orient="records", lines=True)
        for orient in ORIENTS:  # DataFrame.to_json in each orient; "columns" is pandas' default
            frame.to_json(OUT / f"{name}_{orient}.json", orient=orient)
        frame.to_json(OUT / f"{name}_split_noindex.json", orient="split", index=False)
        frame.to_json(OUT / f"{name}_table_noindex.json", orient="table", index=False)
    series = pd.Series(a["v"][:, 0], name="value")  # V as one value per key
    series.to_json(OUT / "v_series.json")  # {"0": …, "1": …}: Series' default orient, "index"
    series.to_json(OUT / "v_series_split.json", orient="split")
    series.to_json(OUT / "v_series_table.json", orient="table")

    n_q, n_k = a["q"].shape[0], a["k"].shape[0]
    zeros = np.zeros((n_q, n_k), dtype=np.float32)  # a float mask of zeros: PyTorch adds it (changes nothing)
    np.save(OUT / "float_zeros.npy", zeros)
    additive = np.where(np.arange(n_k) <= np.arange(n_q)[:, None] + 1, 0.0, -np.inf).astype(np.float32)
    np.save(OUT / "float_additive.npy", additive)  # 0 / -inf: PyTorch's additive causal-like mask
    allowed = additive == 0
    pd.DataFrame(allowed).to_csv(OUT / "mask_pandas.csv", index=False)  # True/False cells, header 0,1,…
    pd.DataFrame(allowed).to_json(OUT / "mask_split.json", orient="split")  # true/false cells
    pd.DataFrame(allowed).to_json(OUT / "mask_table.json", orient="table")

    q, k, v = (torch.tensor(a[n]) for n in "qkv")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    expected = {
        "plain": sdpa(q, k, v).tolist(),
        "bias_zeros": sdpa(q, k, v, attn_mask=torch.tensor(zeros, dtype=torch.float64)).tolist(),
        "bias_additive": sdpa(q, k, v, attn_mask=torch.tensor(additive, dtype=torch.float64)).tolist(),
        "mask_allowed": sdpa(q, k, v, attn_mask=torch.tensor(allowed)).tolist(),
        "v_column": sdpa(q, k, v[:, :1]).tolist(),  # V's first column, as a Series
        "torch": torch.__version__,
    }
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
