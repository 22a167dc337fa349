"""``attn check``: is a kernel's output right?

OUT is compared with attn's float64 reference for the same Q, K, V and
options, under FlashAttention's rule (``attncli.core.check``). Exit 0 when
within tolerance, 3 when not; 1 and 2 keep meaning bad data and bad usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Emitted, Result
from attncli.cli.options import FROM_READ_OPTIONS, Layout, LayoutOption, PrecisionOption, ReadFlags, read_options
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS
from attncli.errors import AttnError, CheckFailed, ShapeError, UsageError

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.core.check import Verdict
    from attncli.core.options import AttentionOptions

EXAMPLES = """\b
Examples:
  attn check out.npy q.npy k.npy v.npy                        # a kernel's output for q, k, v
  attn check out.safetensors case.safetensors --rope neox --window 127,0 --softcap 50
  attn check out.npy q.npy k.npy v.npy --layout bshd --causal-align bottom-right
  attn check out.npy q.npy k.npy v.npy -f json | jq .max_abs_error
  attn check out.npy q.npy k.npy v.npy -f npy --emit error > err.npy     # |OUT - ref|
  attn check out.npy case.npz || echo "exit $?: 3 disagrees, 1 bad data, 2 bad usage"
  attn check --grad grads.npz q.npy k.npy v.npy --dout dout.npy --causal   # dq, dk, dv (dsinks, dbias)
  attn check --grad grads.npz case.npz --grad-factor dq=160 --grad-factor dk=25
  attn check --grad dq.npy dk.npy dv.npy q.npy k.npy v.npy --dout dout.npy
"""

QUERY_COLUMNS = 32  # the error heatmap's columns: queries are grouped past this many


@attention_options()
@read_options()
@output_options(emit=("error", "reference"), pictures=("svg", "html"),
                emit_help="The array csv/tsv/npy/npz/safetensors write: error (|OUT - ref|, the default) or the "
                          "reference output.")
def check(
    files: Annotated[list[str], typer.Argument(
        metavar="OUT [Q K V | BUNDLE]", show_default=False,
        help="OUT, the output a kernel computed (NPY, NPZ or safetensors; float16, bfloat16, float32 or "
             "float64; (batch, heads, seq, dim) or any rank, as Q), then three files Q K V or one bundle, "
             "as for 'attn run'.",
    ), READS],
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    factor: Annotated[float, typer.Option(
        "--factor", metavar="F",
        help="OUT may be F times as far from the reference as the naive baseline in OUT's dtype is (plus --atol).",
    )] = 2.0,
    atol: Annotated[float | None, typer.Option(
        "--atol", metavar="A", show_default=False,
        help="Absolute slack added to the tolerance. Default: 2 units in the last place of OUT's dtype at the "
             "largest |reference| value.",
    )] = None,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    grad: Annotated[bool, typer.Option(
        "--grad", help="Check gradients instead: OUT is an NPZ or safetensors bundle of dq, dk, dv (and dsinks, "
                       "dbias), as 'attn grad -f npz' writes, or three files dQ dK dV, against attn's float64 "
                       "backward pass for --dout.",
    )] = False,
    dout: Annotated[str | None, typer.Option(
        "--dout", metavar="FILE", show_default=False,
        help="With --grad: the output's gradient dO the kernel was given (or a bundle entry dout).",
    ), READS] = None,
    grad_factor: Annotated[list[str] | None, typer.Option(
        "--grad-factor", metavar="NAME=F", show_default=False,
        help="With --grad: one gradient's factor, e.g. dq=160 (PyTorch's SDPA tests); default --factor for each.",
    )] = None,
) -> Result:
    """Check a kernel's attention output against attn's float64 reference.

    OUT passes when max|OUT - ref| <= factor × max|baseline - ref| + atol
    (FlashAttention's rule): the baseline is naive attention in OUT's dtype,
    inputs and every step rounded to it. Prints the verdict, the largest
    absolute and relative errors and where, a table per head and a heatmap of
    the error over heads and queries. Exit 0 within tolerance, 3 not (1 bad
    data, 2 bad usage).
    """
    import math

    from attncli.cli.inputs import read_inputs, to_layout
    from attncli.cli.io import open_input
    from attncli.core.check import check as compare
    from attncli.readers import read_matrix

    counted = f"got {len(files)} {'file' if len(files) == 1 else 'files'}"
    if grad and len(files) not in (2, 4, 6):
        raise UsageError(f"expected the gradients (one bundle, or dQ dK dV) and one bundle or three files Q K V, "
                         f"{counted}")
    if not grad and len(files) not in (2, 4):
        raise UsageError(f"expected OUT and one bundle, or OUT and three files Q K V, {counted}")
    for name, value in (("--factor", factor), ("--atol", atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{name} must be a finite number ≥ 0, got {value}")
    if grad:
        return check_gradients(files, attention, reading, layout, dout, factor,
                               grad_factors(grad_factor or [], factor), atol)
    if dout is not None or grad_factor:
        raise UsageError(f"{'--dout' if dout is not None else '--grad-factor'} is for checking gradients",
                         hint="add --grad")
    out_source = open_input(files[0])
    kernel_out = read_matrix(out_source, tensors=True, finite=False)  # NaN in OUT is a finding, not bad data
    inputs = read_inputs(files[1:], attention, reading.settings(), layout)
    options = inputs.options
    out_values = to_layout(kernel_out.values, layout)
    check_shape(out_values, inputs)
    verdict = compare(out_values, inputs.q.values, inputs.k.values, inputs.v.values, options, factor, atol)
    result = check_result(out_source.name, inputs, verdict, options, precision)
    if not verdict.passed:
        result.failure = CheckFailed(failure(verdict), source=out_source.name)
    return result


GRADIENTS = ("dq", "dk", "dv", "dsinks", "dbias")


def grad_factors(given: list[str], factor: float) -> dict[str, float]:
    """--grad-factor dq=160 ... -> a factor for every gradient (--factor for those not named)."""
    import math

    factors = dict.fromkeys(GRADIENTS, factor)
    for item in given:
        name, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if name not in factors or not (math.isfinite(number) and number >= 0):
            raise UsageError(f"--grad-factor {item}: expected NAME=F with NAME one of {', '.join(GRADIENTS)} "
                             "and F a finite number ≥ 0")
        factors[name] = number
    return factors


def check_gradients(files: list[str], attention: AttentionFlags, reading: ReadFlags, layout: Layout,
                    dout: str | None, factor: float, factors: dict[str, float], atol: float | None) -> Result:
    """``attn check --grad``: each gradient against the float64 backward pass, by the forward's rule."""
    from attncli.cli.inputs import output_gradient, read_inputs, to_layout
    from attncli.core.check import check_grads

    source = files[0]
    held, sources, files = read_gradients(files, reading)
    grads = {name: (to_layout(held[name], layout) if name in ("dq", "dk", "dv") else held[name])
             for name in GRADIENTS if name in held}
    if not {"dq", "dk", "dv"} <= set(grads):
        missing = ", ".join(name for name in ("dq", "dk", "dv") if name not in grads)
        raise AttnError(f"the gradients have no {missing}", source=source,
                        hint="an NPZ or safetensors bundle with dq, dk, dv (and dsinks, dbias), as attn grad writes")
    inputs = read_inputs(files, attention, reading.settings(), layout, wanted=("dout",))
    d_out = output_gradient(inputs, dout, reading.settings())
    for name in ("dsinks", "dbias"):  # the readers hold a vector as a 1×n matrix: the shape of what it is of
        given = getattr(inputs.options, name[1:])
        if name in grads and given is not None and grads[name].size == given.size:
            grads[name] = grads[name].reshape(given.shape)
    verdicts = check_grads(grads, inputs.q.values, inputs.k.values, inputs.v.values, d_out, inputs.options,
                           factors, atol)
    failed = [name for name, verdict in verdicts.items() if not verdict.passed]
    result = grads_result(source, inputs, verdicts, factor)
    if failed:
        result.failure = CheckFailed(grad_failure(failed[0], verdicts[failed[0]], len(failed)),
                                     source=sources.get(failed[0], source))
    return result


def read_gradients(files: list[str], reading: ReadFlags) -> tuple[dict, dict[str, str], list[str]]:
    """The gradients by name, the file each came from, and the files left for Q, K, V: a
    bundle of dq, dk, dv (dsinks, dbias), or, when the first file holds one array, three
    files dQ dK dV."""
    from attncli.cli.io import source_name
    from attncli.cli.reading import read_named
    from attncli.readers import NotABundle

    try:
        bundle = read_named(files[0], reading.settings(), bundle=True, tensors=True, finite=False)
        held = {name.lower(): m.values for name, m in bundle.matrices.items()}
    except NotABundle:
        held = {}
    if "dq" in held or len(files) not in (4, 6):
        return held, {}, files[1:]
    sources = dict(zip(("dq", "dk", "dv"), files[:3], strict=True))
    arrays = {name: read_named(f, reading.settings(), tensors=True, finite=False).matrix().values
              for name, f in sources.items()}
    return arrays, {name: source_name(f) for name, f in sources.items()}, files[3:]


def grad_position(name: str, index: tuple[int, ...]) -> str:
    """'head 1, key 3, column 2' for an index of a gradient (dsinks: 'head 2'; dbias: 'query 1, key 3')."""
    rows = {"dq": "query", "dk": "key", "dv": "key"}
    names = (["head"] if name == "dsinks" else ["query", "key"] if name == "dbias"
             else ["head", rows[name], "column"])[-len(index):]
    parts = [f"{label} {i}" for label, i in zip(names, index[-len(names):], strict=True)]
    lead = index[: len(index) - len(names)]
    if lead:
        parts.insert(0, f"batch {lead[0] if len(lead) == 1 else tuple(lead)}")
    return ", ".join(parts)


def grad_failure(name: str, verdict: Verdict, count: int) -> str:
    """The one line of a failed gradient check: which gradient, and where."""
    import math

    where = grad_position(name, verdict.worst)
    worst = verdict.error[verdict.worst]
    others = f" ({count - 1} more {'gradient disagrees' if count == 2 else 'gradients disagree'})" if count > 1 else ""
    if not math.isfinite(worst):
        return f"{name} holds a non-finite value at {where}{others}"
    return (f"{name} disagrees with the reference: max |{name} - ref| = {worst:.3g} at {where} is more than the "
            f"tolerance {verdict.tolerance:.3g} ({verdict.factor:g} × baseline error "
            f"{verdict.max_baseline_error:.3g} + atol {verdict.atol:.3g}){others}")


def grads_result(name: str, inputs: Inputs, verdicts: dict[str, Verdict], factor: float) -> Result:
    """JSON and the terminal view of a gradient check: one verdict per gradient, its worst cell and head."""
    passed = all(verdict.passed for verdict in verdicts.values())
    gradients = {
        grad: {"passed": verdict.passed, "dtype": verdict.dtype,
               "max_abs_error": _json_number(verdict.max_error),
               "max_rel_error": _json_number(verdict.max_relative_error),
               "worst": {"index": list(verdict.worst), "where": grad_position(grad, verdict.worst)},
               "baseline_error": _json_number(verdict.max_baseline_error), "factor": verdict.factor,
               "atol": verdict.atol,
               "tolerance": verdict.tolerance}
        for grad, verdict in verdicts.items()}
    data: dict[str, Any] = {"grads": name, "passed": passed, "verdict": "pass" if passed else "fail",
                            "rule": "max|G - ref| <= factor * max|baseline - ref| + atol", "gradients": gradients}

    def view() -> Any:
        from rich.table import Table
        from rich.text import Text

        from attncli.output.render import stack

        header = Text.assemble(("attn check --grad ", "bold"), name, ": ",
                               ("PASS" if passed else "FAIL", "bold green" if passed else "bold red"))
        table = Table(show_edge=False, pad_edge=False)
        for column in ("", "dtype", "max |G - ref|", "at", "tolerance", "within"):
            table.add_column(column, no_wrap=True)
        for grad, verdict in verdicts.items():
            ok = verdict.passed
            table.add_row(grad, verdict.dtype, f"{verdict.max_error:.3g}", grad_position(grad, verdict.worst),
                          f"{verdict.tolerance:.3g}", "yes" if ok else "NO", style=None if ok else "red")
        return stack(header, table)

    matrices = {"error": Emitted(inputs.to_file_layout(verdicts["dq"].error), inputs.q.row_labels,
                                 inputs.q.col_labels)}
    return Result(data, view, matrices)


def check_shape(out: np.ndarray, inputs: Inputs) -> None:
    """OUT must have the shape of the output of Q, K and V: [..., H_q, n_q, d_v], as the files hold them."""
    from attncli.cli.inputs import layout_shape
    from attncli.core.arrays import shape_text
    from attncli.core.logits import check_shapes, leading_axes

    q, k, v = inputs.q.values, inputs.k.values, inputs.v.values
    check_shapes(q, k, v)
    lead, _ = leading_axes(q, k, v)
    expected = lead + (q.shape[-2], v.shape[-1])
    if tuple(out.shape) != expected:
        shown = (shape_text(layout_shape(shape, inputs.layout)) for shape in (tuple(out.shape), expected))
        raise ShapeError("OUT is {} but the output of Q, K and V is {}".format(*shown),
                         hint="the same inputs, options and layout as the kernel's")


def failure(verdict: Verdict) -> str:
    """The one line of a failed check."""
    import math

    where = position(verdict.worst, verdict.error.shape)
    worst = verdict.error[verdict.worst]
    if not math.isfinite(worst):
        return f"holds a non-finite value at {where} (the reference is finite)"
    return (f"disagrees with the reference: max |OUT - ref| = {worst:.3g} at {where} is more than the tolerance "
            f"{verdict.tolerance:.3g} ({verdict.factor:g} × baseline error {verdict.max_baseline_error:.3g} "
            f"+ atol {verdict.atol:.3g})")


def position(index: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """'batch 0, head 3, query 5, column 2' for an index of the output [..., H, n_q, d_v]."""
    names = ["query", "column"] if len(index) == 2 else ["head", "query", "column"]
    parts = [f"{name} {i}" for name, i in zip(names, index[-len(names):], strict=True)]
    lead = index[: len(index) - len(names)]
    if lead:
        parts.insert(0, f"batch {lead[0] if len(lead) == 1 else tuple(lead)}")
    return ", ".join(parts)


def check_result(name: str, inputs: Inputs, verdict: Verdict, options: AttentionOptions,
                 precision: int) -> Result:
    """JSON, the terminal view and the arrays of one check."""
    from attncli.cli.describe import attention_data, call_of

    error = verdict.error
    by_head = _by_head(error)  # [batches, heads, n_q, d_v]
    heads = by_head.shape[1]
    worst = verdict.worst
    data: dict[str, Any] = {
        "out": name,
        "passed": verdict.passed,
        "verdict": "pass" if verdict.passed else "fail",
        "dtype": verdict.dtype,
        "max_abs_error": _json_number(verdict.max_error),
        "max_rel_error": _json_number(verdict.max_relative_error),
        "worst": {"index": list(worst), "where": position(worst, error.shape),
                  "out": _json_number(verdict.out[worst]), "reference": float(verdict.reference[worst])},
        "baseline_error": _json_number(verdict.max_baseline_error),
        "factor": verdict.factor,
        "atol": verdict.atol,
        "tolerance": verdict.tolerance,
        "rule": "max|OUT - ref| <= factor * max|baseline - ref| + atol",
        "per_head": {
            "max_abs_error": _json_array(by_head.max(axis=(-2, -1))),  # [batches, heads]
            "baseline_error": _json_array(_by_head(verdict.baseline_error).max(axis=(-2, -1))),
        },
        "error_by_query": _json_array(by_head.max(axis=-1)),  # [batches, heads, n_q]
        "shape": list(inputs.to_file_layout(verdict.reference).shape),
        "layout": inputs.layout.value,
        **attention_data(options, call_of(verdict.reference.shape[:-1] + inputs.q.shape[-1:], inputs.k.shape)),
    }

    def view() -> Any:
        from rich.text import Text

        from attncli.cli.describe import call_of, settings_line
        from attncli.output.heatmap import ViewStyle
        from attncli.output.render import heatmap, stack

        ok = verdict.passed
        header = Text.assemble(
            ("attn check ", "bold"), name, ": ", ("PASS" if ok else "FAIL", "bold green" if ok else "bold red"),
            f" ({verdict.dtype}, {'×'.join(map(str, data['shape']))}, {inputs.layout.value})\n",
            settings_line(options, call_of(verdict.reference.shape[:-1] + inputs.q.shape[-1:], inputs.k.shape)),
            "\n",
            f"max |OUT - ref| {verdict.max_error:.3g} at {data['worst']['where']} "
            f"(OUT {float(verdict.out[worst]):.6g}, reference {data['worst']['reference']:.6g})\n",
            f"max relative error {verdict.max_relative_error:.3g} (of max |ref| {verdict.scale:.3g})\n",
            f"rule: max |OUT - ref| ≤ {verdict.factor:g} × max |baseline - ref| + atol = {verdict.factor:g} × "
            f"{verdict.max_baseline_error:.3g} + {verdict.atol:.3g} = {verdict.tolerance:.3g}\n",
            ("baseline: naive attention in float64 summed in another order (blocked kernel)"
             if verdict.dtype == "float64" else
             f"baseline: naive attention in {verdict.dtype}, inputs and every step rounded to it"),
        )
        rows = _row_labels(by_head.shape[0], heads)
        grouped, columns = _query_columns(by_head.max(axis=-1).reshape(-1, by_head.shape[2]) / verdict.tolerance)
        return stack(
            header,
            head_table(rows, by_head.max(axis=(-2, -1)).reshape(-1),
                       _by_head(verdict.baseline_error).max(axis=(-2, -1)).reshape(-1), verdict.tolerance),
            heatmap(grouped, rows, columns, precision=min(precision, 2), style=ViewStyle(hints=False),
                    title="max |OUT - ref| / tolerance by head (down) and query (across): above 1 fails"),
        )

    matrices = {
        "error": Emitted(inputs.to_file_layout(error), inputs.q.row_labels, inputs.v.col_labels),
        "reference": Emitted(inputs.to_file_layout(verdict.reference), inputs.q.row_labels, inputs.v.col_labels),
    }
    return Result(data, view, matrices)


def _json_number(x: Any) -> float | None:
    """A float, or None (JSON's null) for NaN and infinities, which JSON cannot hold."""
    import math

    x = float(x)
    return x if math.isfinite(x) else None


def _json_array(values: np.ndarray) -> Any:
    """An array as JSON can hold it: nested lists with null for NaN, or the array itself when all finite."""
    import numpy as np

    if np.isfinite(values).all():
        return values
    shown = values.astype(object)
    shown[~np.isfinite(values)] = None
    return shown.tolist()


def _by_head(values: np.ndarray) -> np.ndarray:
    """[..., H, n_q, d] -> [batches, H, n_q, d] (a matrix is one batch of one head)."""
    if values.ndim == 2:
        return values[None, None]
    return values.reshape(-1, *values.shape[-3:])


def _row_labels(batches: int, heads: int) -> list[str]:
    if batches == 1:
        return [f"head {h}" for h in range(heads)]
    return [f"batch {b} head {h}" for b in range(batches) for h in range(heads)]


def _query_columns(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """[rows, n_q] -> at most QUERY_COLUMNS columns (the max of each group of queries) and their labels."""
    import numpy as np

    n_q = values.shape[1]
    if n_q <= QUERY_COLUMNS:
        return values, [f"q{i}" for i in range(n_q)]
    edges = np.linspace(0, n_q, QUERY_COLUMNS + 1).astype(int)
    grouped = np.stack([values[:, a:b].max(axis=1) for a, b in zip(edges[:-1], edges[1:], strict=True)], axis=1)
    return grouped, [f"q{a}-{b - 1}" for a, b in zip(edges[:-1], edges[1:], strict=True)]


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


COMMAND = CommandSpec(check, EXAMPLES)
