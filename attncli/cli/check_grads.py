"""``attn check --grad``: a kernel's gradients (dq, dk, dv, and dsinks and dbias)
against attn's float64 backward pass, each by the forward's rule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.check_result import json_number, position
from attncli.cli.emit import Emitted, Result
from attncli.errors import AttnError, CheckFailed, UsageError

if TYPE_CHECKING:
    from attncli.cli.attention import AttentionFlags
    from attncli.cli.inputs import Inputs
    from attncli.cli.options import Layout, ReadFlags
    from attncli.core.check import Verdict


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
            raise UsageError(
                f"--grad-factor {item}: expected NAME=F with NAME one of {', '.join(GRADIENTS)} "
                "and F a finite number ≥ 0"
            )
        factors[name] = number
    return factors


def check_gradients(
    files: list[str],
    attention: AttentionFlags,
    reading: ReadFlags,
    layout: Layout,
    dout: str | None,
    factor: float,
    factors: dict[str, float],
    atol: float | None,
    keep: bool = False,
) -> Result:
    """``attn check --grad``: each gradient against the float64 backward pass, by the forward's rule."""
    from attncli.cli.inputs import output_gradient, read_inputs, to_layout
    from attncli.cli.io import progress_bar
    from attncli.core.check_grads import check_grads

    source = files[0]
    held, sources, files = read_gradients(files, reading)
    grads = {
        name: (to_layout(held[name], layout) if name in ("dq", "dk", "dv") else held[name])
        for name in GRADIENTS
        if name in held
    }
    if not {"dq", "dk", "dv"} <= set(grads):
        missing = ", ".join(name for name in ("dq", "dk", "dv") if name not in grads)
        raise AttnError(
            f"the gradients have no {missing}",
            source=source,
            hint="an NPZ or safetensors bundle with dq, dk, dv (and dsinks, dbias), as attn grad writes",
        )
    inputs = read_inputs(files, attention, reading.settings(), layout, wanted=("dout",))
    d_out = output_gradient(inputs, dout, reading.settings())
    for name in ("dsinks", "dbias"):  # the readers hold a vector as a 1×n matrix: the shape of what it is of
        given = getattr(inputs.options, name[1:])
        if name in grads and given is not None and grads[name].size == given.size:
            grads[name] = grads[name].reshape(given.shape)
    with progress_bar("check --grad") as progress:
        verdicts = check_grads(
            grads, inputs.q.values, inputs.k.values, inputs.v.values, d_out, inputs.options, factors, atol,
            progress=progress, keep=keep,
        )  # fmt: skip
    failed = [name for name, verdict in verdicts.items() if not verdict.passed]
    result = grads_result(source, inputs, verdicts, factor)
    if failed:
        result.failure = CheckFailed(
            grad_failure(failed[0], verdicts[failed[0]], len(failed)), source=sources.get(failed[0], source)
        )
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
    arrays = {
        name: read_named(f, reading.settings(), tensors=True, finite=False).matrix().values
        for name, f in sources.items()
    }
    return arrays, {name: source_name(f) for name, f in sources.items()}, files[3:]


# Each gradient's last axes, as a position names them.
GRADIENT_AXES = {
    "dq": ("head", "query", "column"),
    "dk": ("head", "key", "column"),
    "dv": ("head", "key", "column"),
    "dsinks": ("head",),
    "dbias": ("query", "key"),
}


def grad_position(name: str, index: tuple[int, ...]) -> str:
    """'head 1, key 3, column 2' for an index of a gradient (dsinks: 'head 2'; dbias: 'query 1, key 3')."""
    return position(index, GRADIENT_AXES[name])


def grad_failure(name: str, verdict: Verdict, count: int) -> str:
    """The one line of a failed gradient check: which gradient, and where."""
    import math

    where = grad_position(name, verdict.worst)
    worst = verdict.worst_error
    others = f" ({count - 1} more {'gradient disagrees' if count == 2 else 'gradients disagree'})" if count > 1 else ""
    if not math.isfinite(worst):
        return f"{name} holds a non-finite value at {where}{others}"
    return (
        f"{name} disagrees with the reference: max |{name} - ref| = {worst:.3g} at {where} is more than the "
        f"tolerance {verdict.tolerance:.3g} ({verdict.factor:g} × baseline error "
        f"{verdict.max_baseline_error:.3g} + atol {verdict.atol:.3g}){others}"
    )


def grads_result(name: str, inputs: Inputs, verdicts: dict[str, Verdict], factor: float) -> Result:
    """JSON and the terminal view of a gradient check: one verdict per gradient, its worst cell and head."""
    passed = all(verdict.passed for verdict in verdicts.values())
    gradients = {
        grad: {
            "passed": verdict.passed,
            "dtype": verdict.dtype,
            "max_abs_error": json_number(verdict.max_error),
            "max_rel_error": json_number(verdict.max_relative_error),
            "worst": {"index": list(verdict.worst), "where": grad_position(grad, verdict.worst)},
            "baseline_error": json_number(verdict.max_baseline_error),
            "factor": verdict.factor,
            "atol": verdict.atol,
            "tolerance": verdict.tolerance,
        }
        for grad, verdict in verdicts.items()
    }
    data: dict[str, Any] = {
        "grads": name,
        "passed": passed,
        "verdict": "pass" if passed else "fail",
        "rule": "max|G - ref| <= factor * max|baseline - ref| + atol",
        "gradients": gradients,
    }

    def view() -> Any:
        from rich.table import Table
        from rich.text import Text

        from attncli.output.render import stack

        header = Text.assemble(
            ("attn check --grad ", "bold"),
            name,
            ": ",
            ("PASS" if passed else "FAIL", "bold green" if passed else "bold red"),
        )
        table = Table(show_edge=False, pad_edge=False)
        for column in ("", "dtype", "max |G - ref|", "at", "tolerance", "within"):
            table.add_column(column, no_wrap=True)
        for grad, verdict in verdicts.items():
            ok = verdict.passed
            table.add_row(
                grad,
                verdict.dtype,
                f"{verdict.max_error:.3g}",
                grad_position(grad, verdict.worst),
                f"{verdict.tolerance:.3g}",
                "yes" if ok else "NO",
                style=None if ok else "red",
            )
        return stack(header, table)

    error = verdicts["dq"].error  # kept when a matrix format writes it
    matrices = (
        {}
        if error is None
        else {"error": Emitted(inputs.to_file_layout(error), inputs.q.row_labels, inputs.q.col_labels)}
    )
    return Result(data, view, matrices)
