"""``attn check``'s result: the verdict, its one line on failure, the error
per head and query as JSON, a table and a heatmap; the JSON helpers a
gradient check shares (``cli/check_grads.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.emit import Emitted, Result

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.core.check import Verdict
    from attncli.core.options import AttentionOptions

QUERY_COLUMNS = 32  # the error heatmap's columns: queries are grouped past this many


def failure(verdict: Verdict) -> str:
    """The one line of a failed check."""
    import math

    where = position(verdict.worst)
    worst = verdict.worst_error
    sampled = "" if verdict.sample is None else f" ({rows_checked(verdict)}, seed {verdict.sample.seed})"
    if not math.isfinite(worst):
        return f"holds a non-finite value at {where} (the reference is finite){sampled}"
    return (
        f"disagrees with the reference: max |OUT - ref| = {worst:.3g} at {where} is more than the tolerance "
        f"{verdict.tolerance:.3g} ({verdict.factor:g} × baseline error {verdict.max_baseline_error:.3g} "
        f"+ atol {verdict.atol:.3g}){sampled}"
    )


def rows_checked(verdict: Verdict) -> str:
    """'checked 1,024 of 131,072 rows per head'."""
    checked = verdict.n_q if verdict.rows is None else len(verdict.rows)
    return f"checked {checked:,} of {verdict.n_q:,} rows per head"


OUTPUT_AXES = ("head", "query", "column")  # the last axes of an output [..., H, n_q, d_v]


def position(index: tuple[int, ...], axes: tuple[str, ...] = OUTPUT_AXES) -> str:
    """'batch 0, head 3, query 5, column 2' for an index of an array whose last axes are
    ``axes`` (an output's, a gradient's); any axes before them are the batch."""
    names = axes[-min(len(index), len(axes)) :]
    parts = [f"{name} {i}" for name, i in zip(names, index[-len(names) :], strict=True)]
    lead = index[: len(index) - len(names)]
    if lead:
        parts.insert(0, f"batch {lead[0] if len(lead) == 1 else tuple(lead)}")
    return ", ".join(parts)


def check_result(name: str, inputs: Inputs, verdict: Verdict, options: AttentionOptions, precision: int) -> Result:
    """JSON, the terminal view and the arrays of one check (the arrays when the verdict kept them)."""
    from attncli.cli.describe import attention_data, call_of
    from attncli.cli.inputs import layout_shape
    from attncli.cli.model_options import model_data, model_line

    assert verdict.by_query is not None and verdict.baseline_by_query is not None
    by_query = _by_head(verdict.by_query)  # [batches, heads, rows checked]
    baseline_by_query = _by_head(verdict.baseline_by_query)
    heads = by_query.shape[1]
    worst = verdict.worst
    out_shape = verdict.by_query.shape[:-1] + (verdict.n_q, inputs.v.shape[-1])  # [..., H, n_q, d_v]
    call = call_of(out_shape[:-1] + inputs.q.shape[-1:], inputs.k.shape)
    sample = verdict.sample
    data: dict[str, Any] = {
        "out": name,
        "passed": verdict.passed,
        "verdict": "pass" if verdict.passed else "fail",
        "dtype": verdict.dtype,
        "max_abs_error": json_number(verdict.max_error),
        "max_rel_error": json_number(verdict.max_relative_error),
        "worst": {
            "index": list(worst),
            "where": position(worst),
            "out": json_number(verdict.worst_out),
            "reference": verdict.worst_reference,
        },
        "baseline_error": json_number(verdict.max_baseline_error),
        "factor": verdict.factor,
        "atol": verdict.atol,
        "tolerance": verdict.tolerance,
        "rule": "max|OUT - ref| <= factor * max|baseline - ref| + atol",
        "per_head": {
            "max_abs_error": json_array(_head_max(by_query)),  # [batches, heads]
            "baseline_error": json_array(_head_max(baseline_by_query)),
        },
        "error_by_query": json_array(by_query),  # [batches, heads, rows checked]
        "rows": {
            "checked": verdict.n_q if verdict.rows is None else len(verdict.rows),
            "of": verdict.n_q,
            "index": None if verdict.rows is None else verdict.rows,  # the rows error_by_query is of (null: all)
            "edges": None if sample is None else sample.edges,  # how many are block edges and band rows
            "seed": None if sample is None else sample.seed,  # --seed repeats the random rest
        },
        "shape": list(layout_shape(out_shape, inputs.layout)),
        "layout": inputs.layout.value,
        **attention_data(options, call),
        **model_data(inputs.flags),
    }

    def view() -> Any:
        from rich.text import Text

        from attncli.cli.describe import settings_line
        from attncli.output.heatmap import ViewStyle
        from attncli.output.render import heatmap, stack

        ok = verdict.passed
        header = Text.assemble(
            ("attn check ", "bold"),
            name,
            ": ",
            ("PASS" if ok else "FAIL", "bold green" if ok else "bold red"),
            f" ({verdict.dtype}, {'×'.join(map(str, data['shape']))}, {inputs.layout.value})\n",
            settings_line(options, call),
            model_line(inputs.flags),
            "\n",
            f"max |OUT - ref| {verdict.max_error:.3g} at {data['worst']['where']} "
            f"(OUT {verdict.worst_out:.6g}, reference {verdict.worst_reference:.6g})\n",
            f"max relative error {verdict.max_relative_error:.3g} (of max |ref| {verdict.scale:.3g})\n",
            f"rule: max |OUT - ref| ≤ {verdict.factor:g} × max |baseline - ref| + atol = {verdict.factor:g} × "
            f"{verdict.max_baseline_error:.3g} + {verdict.atol:.3g} = {verdict.tolerance:.3g}\n",
            baseline_words(verdict),
            *(
                ()
                if sample is None
                else (
                    f"\n{rows_checked(verdict)}: {sample.edges:,} block edges and band rows, "
                    f"{len(sample.rows) - sample.edges:,} at random (--seed {sample.seed} checks the same rows)",
                )
            ),
        )
        rows = _row_labels(by_query.shape[0], heads)
        grouped, columns = _query_columns(by_query.reshape(-1, by_query.shape[2]) / verdict.tolerance, verdict.rows)
        return stack(
            header,
            head_table(
                rows,
                _head_max(by_query).reshape(-1),
                _head_max(baseline_by_query).reshape(-1),
                verdict.tolerance,
            ),
            heatmap(
                grouped,
                rows,
                columns,
                precision=min(precision, 2),
                style=ViewStyle(hints=False),
                title="max |OUT - ref| / tolerance by head (down) and query (across): above 1 fails",
            ),
        )

    labels = inputs.q.row_labels
    if labels and verdict.rows is not None:
        labels = [labels[i] for i in verdict.rows]
    matrices = {
        name: Emitted(inputs.to_file_layout(values), labels, inputs.v.col_labels)
        for name, values in (("error", verdict.error), ("reference", verdict.reference))
        if values is not None
    }
    return Result(data, view, matrices)


def baseline_words(verdict: Verdict) -> str:
    """What the baseline was, in the view's words."""
    if verdict.dtype != "float64":
        return f"baseline: naive attention in {verdict.dtype}, inputs and every step rounded to it"
    if verdict.sample is not None:
        return "baseline: naive attention in float64 summed in another order (keys last to first)"
    return "baseline: naive attention in float64 summed in another order (blocked kernel)"


def _head_max(by_query: np.ndarray) -> np.ndarray:
    """[batches, heads, rows] -> [batches, heads]: the largest (NaN kept; 0 with no rows)."""
    return by_query.max(axis=-1, initial=0.0)


def json_number(x: Any) -> float | None:
    """A float, or None (JSON's null) for NaN and infinities, which JSON cannot hold."""
    import math

    x = float(x)
    return x if math.isfinite(x) else None


def json_array(values: np.ndarray) -> Any:
    """An array as JSON can hold it: nested lists with null for NaN, or the array itself when all finite."""
    import numpy as np

    if np.isfinite(values).all():
        return values
    shown = values.astype(object)
    shown[~np.isfinite(values)] = None
    return shown.tolist()


def _by_head(values: np.ndarray) -> np.ndarray:
    """[..., H, rows] -> [batches, H, rows] (a matrix's rows are one batch of one head)."""
    if values.ndim == 1:
        return values[None, None]
    return values.reshape(-1, *values.shape[-2:])


def _row_labels(batches: int, heads: int) -> list[str]:
    if batches == 1:
        return [f"head {h}" for h in range(heads)]
    return [f"batch {b} head {h}" for b in range(batches) for h in range(heads)]


def _query_columns(values: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """[rows, queries checked] -> at most QUERY_COLUMNS columns (the max of each group of
    queries) and their labels, by the queries' numbers (``rows``: those checked; None: all)."""
    import numpy as np

    n = values.shape[1]
    number = (lambda i: i) if rows is None else (lambda i: int(rows[i]))
    if n <= QUERY_COLUMNS:
        return values, [f"q{number(i)}" for i in range(n)]
    edges = np.linspace(0, n, QUERY_COLUMNS + 1).astype(int)
    grouped = np.stack([values[:, a:b].max(axis=1) for a, b in zip(edges[:-1], edges[1:], strict=True)], axis=1)
    return grouped, [f"q{number(a)}-{number(b - 1)}" for a, b in zip(edges[:-1], edges[1:], strict=True)]


def head_table(rows: list[str], errors: np.ndarray, baseline: np.ndarray, tolerance: float) -> Any:
    """One row per (batch, head): its largest error, the baseline's, and whether it is within the tolerance."""
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, title="per head", title_justify="left")
    for header in ("", "max |OUT - ref|", "max |baseline - ref|", "within tolerance"):
        table.add_column(header, justify="right" if header else "left", no_wrap=True)
    for label, e, b in zip(rows, errors.tolist(), baseline.tolist(), strict=True):
        ok = bool(e <= tolerance)  # NaN is not
        table.add_row(label, f"{e:.3g}", f"{b:.3g}", "yes" if ok else "NO", style=None if ok else "red")
    return table
