"""``attn explain --grad``'s sections: the backward pass with the user's
numbers (dP, the softmax's Jacobian, dS, through the soft-cap, and one
query's dQ written out term by term)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.explained import TERMS, Page, columns, factor, vector

if TYPE_CHECKING:
    import numpy as np


def backward_sections(page: Page, b: dict[str, np.ndarray]) -> list[Any]:
    """dP, the softmax's Jacobian step, dS, and dQ row i term by term."""
    from rich.text import Text

    from attncli.output.render import fmt

    inputs, steps, i, precision = page.inputs, page.steps, page.i, page.precision
    options = inputs.options
    rows, key_rows, key_cols = page.rows, page.key_rows, page.key_cols
    d_k = inputs.q.values.shape[-1]
    factor_ = steps.scale / options.temperature
    k_met = steps.rotated[1] if steps.rotated is not None else inputs.k.values  # K as it met Q
    nonzero = [j for j in range(len(key_rows)) if b["dz"][i, j] != 0]
    shown = nonzero[:TERMS]
    written = [f"{factor(b['dz'][i, j], precision)} × {vector(k_met[j], precision)}" for j in shown]
    row = factor_ * (b["dz"][i] @ k_met)
    softcap = options.softcap is not None
    turned = [f"RoPE's rotation is then turned back (by minus each position's angle): dQ row = "
              f"{vector(b['dq'][i], precision)}."] if steps.rotated is not None else []
    cosine = ["With cosine similarity Q and K are unit rows here; the gradient is then taken back through "
              "their normalisation."] if options.similarity == "cosine" else []
    sections = [
        page.heading("Backward: dP = dO · Vᵀ",
                     "Given dO, the gradient of something with respect to each output, every weight's gradient "
                     "is how its value lines up with dO: dP[i, j] = dO[i] · v[j]."),
        page.table(b["dout"], rows, inputs.columns, "dO, the output's gradient"),
        page.table(b["dp"], rows, key_cols, "dP = dO · Vᵀ"),
        page.heading("The softmax's Jacobian: rowsum(dO ∘ O)",
                     "Softmax ties each row's weights together (they sum to 1), so raising one lowers the others: "
                     "the gradient of a logit is P[i, j] (dP[i, j] − δ[i]), with δ[i] = Σ_j P[i, j] dP[i, j] "
                     "= dO[i] · O[i]."),
        page.table(b["delta"], rows, ["δ"], "δ = rowsum(dO ∘ O)"),
        page.heading("dS = P ∘ (dP − δ)",
                     "A pair the mask forbids has P = 0, so no gradient; a query that sees no key gets none."
                     + (" The sinks take no gradient here; theirs is Σ_i −p_sink[i] · δ[i]."
                        if options.sinks is not None else "")),
        page.table(b["ds"], rows, key_cols, "dS, the logits' gradient"),
    ]
    if softcap:
        sections += [
            page.heading("Through the soft-cap", f"cap · tanh(x / cap) has slope 1 − tanh²(x / cap): "
                         f"dZ = dS ∘ (1 − tanh²(scaled / {fmt(float(options.softcap or 0), precision)}))."),
            page.table(b["dz"], rows, key_cols, "dZ, the scaled scores' gradient")]
    sections += [
        page.heading(f"dQ for {inputs.queries[i]}: dZ · K · scale",
                     f"Each query's gradient is the keys, each times its {'dZ' if softcap else 'dS'}, times the "
                     f"scale {fmt(factor_, precision)}:", *cosine),
        Text(f"{inputs.queries[i]}: {fmt(factor_, precision)} × ({' + '.join(written) or '0'}"
             f"{' + …' if len(shown) < len(nonzero) else ''}) = {vector(row, precision)}"
             + "".join("\n" + line for line in turned)),
        page.table(b["dq"], rows, inputs.q.col_labels or columns(d_k), "dQ = dZ · K · scale"),
        page.table(b["dk"], key_rows, inputs.k.col_labels or columns(d_k),
                   "dK = dZᵀ · Q · scale (summed over the query heads of a K/V head's group)"),
        page.table(b["dv"], key_rows, inputs.columns, "dV = Pᵀ · dO (summed over the group's query heads)"),
    ]
    return sections
