"""Q, K and V problems (``attn run`` and ``attn explain``): reading them, the
result both commands write, and the lines that say what the outputs mean."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.emit import Emitted, Result
from attncli.cli.io import check_stdin_once, progress_bar, source_name
from attncli.cli.reading import read_matrix_named, read_named
from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:
    from attncli.cli.options import AttentionFlags
    from attncli.core.options import AttentionOptions
    from attncli.core.reference import Steps
    from attncli.readers import Matrix, TextSettings


class Problem:
    """Q, K, V as read, the options they are attended with, and the labels to show them by."""

    def __init__(self, q, k, v, options: AttentionOptions | None = None, meta=None, masked: bool = False):
        from attncli.core.options import AttentionOptions

        self.q, self.k, self.v = q, k, v
        self.options = options or AttentionOptions()
        self.meta = meta or {}  # a bundle's plain settings that are not attention options: description, rgb
        self.masked = masked  # a mask was given (rather than only causal)

    @property
    def queries(self) -> list[str]:
        return self.q.row_labels or [f"q{i}" for i in range(self.q.shape[0])]

    @property
    def keys(self) -> list[str]:
        return self.k.row_labels or self.v.row_labels or [f"k{i}" for i in range(self.k.shape[0])]

    @property
    def columns(self) -> list[str]:
        return self.v.col_labels or [f"d{i}" for i in range(self.v.shape[1])]

    @property
    def query_colours(self):
        """Each query's colour (hex labels, or RGB rows when the bundle says ``rgb: true``), or None."""
        from attncli.output.colours import row_colours

        return row_colours(self.q.row_labels, self.q.values, self.meta.get("rgb") is True)

    @property
    def key_colours(self):
        """Each key's colour, or None when the keys are not colours."""
        from attncli.output.colours import row_colours

        return row_colours(self.k.row_labels or self.v.row_labels, self.k.values, self.meta.get("rgb") is True)


BUNDLE_ENTRIES = ("q", "k", "v", "mask", "bias")
# A bundle's plain settings that are not attention options, and their types.
BUNDLE_META: dict[str, Any] = {"description": str, "rgb": bool}


def load_problem(files: list[str], attention: AttentionFlags, text: TextSettings) -> Problem:
    """Read one bundle or three files, the mask and the bias, and gather the
    options: the command line's, else the bundle's settings."""
    from attncli.cli.options import allowed_cells, setting_names
    from attncli.cli.settings import BundleSettings
    from attncli.readers import NotABundle

    if len(files) not in (1, 3):
        raise UsageError(f"expected one bundle file or three files Q K V, got {len(files)}")
    check_stdin_once([*files, attention.mask, attention.bias])
    mask = bias = None
    meta: dict[str, Any] = {}
    if len(files) == 1:
        source = source_name(files[0])
        try:
            bundle = read_named(files[0], text, bundle=True)
        except NotABundle as e:
            e.hint = "give three files Q K V, or one YAML/JSON/NPZ bundle with q, k and v"
            raise
        entries = {name.lower(): m for name, m in bundle.matrices.items()}
        missing = [n for n in ("q", "k", "v") if n not in entries]
        extra = sorted(set(entries) - set(BUNDLE_ENTRIES))
        if missing or extra:
            what = f"has no {', '.join(missing)}" if missing else f"has an unexpected entry {extra[0]!r}"
            raise AttnError(f"the bundle {what}", source=source,
                            hint="a bundle holds q, k and v, and optionally mask and bias")
        settings = BundleSettings.of(bundle.meta, source, bundle.lines, [*BUNDLE_META, *setting_names()])
        attention = attention.with_settings(settings)
        meta = settings.fill({}, BUNDLE_META, frozenset())
        q, k, v = entries["q"], entries["k"], entries["v"]
        if "mask" in entries:
            mask = allowed_cells(entries["mask"], source, "entry")
        if "bias" in entries:
            bias = entries["bias"].values
    else:
        q, k, v = (read_matrix_named(f, text) for f in files)
    if attention.mask is not None:
        mask = allowed_cells(read_matrix_named(attention.mask, text, mask=True), source_name(attention.mask),
                             "file")
    if attention.bias is not None:
        bias = read_matrix_named(attention.bias, text, bias=True).values
    return Problem(q, k, values_per_key(v, k), attention.build(mask, bias), meta, masked=mask is not None)


def values_per_key(v: Matrix, k: Matrix) -> Matrix:
    """V written as a flat list (or a 1-D array) of one number per key, as
    seed 000's ``v: [10, 5, 2]`` and the Python API's 1-D v: a column, n_k×1."""
    from attncli.readers import Matrix

    n_k = k.shape[0]
    if v.vector and n_k > 1 and v.shape == (1, n_k):
        return Matrix(v.values.T, v.col_labels, None)
    return v


def compute(problem: Problem, options: AttentionOptions) -> Steps:
    """Every step, from the reference; the guard-rails' notes on the weights."""
    from attncli.cli.guards import check_attention
    from attncli.core.reference import reference

    steps = reference(problem.q.values, problem.k.values, problem.v.values, options)
    check_attention(options, problem.queries, problem.k.shape[0], steps.weights, steps.logits)
    return steps


def compute_output(problem: Problem, options: AttentionOptions):
    """The output alone, from the blocked kernel, with a progress bar on a terminal
    (and the notes that need no weights: queries that may attend to nothing)."""
    from attncli.cli.guards import check_attention
    from attncli.core.kernel import blocked

    with progress_bar("attention") as progress:
        output = blocked(problem.q.values, problem.k.values, problem.v.values, options, progress=progress)
    check_attention(options, problem.queries, problem.k.shape[0])
    return output


def output_matrix(problem: Problem, output) -> Emitted:
    """The output as --emit writes it: rows named as the queries, columns as V's."""
    return Emitted(output, problem.q.row_labels, problem.v.col_labels)


def describe(steps: Steps, d_k: int, options: AttentionOptions) -> str:
    """'scale 1/√3 = 0.5774' and the other settings in force, for the header.
    With several heads, ``d_k`` is a head's width and the mask count is one head's."""
    if options.scale is not None:
        parts = [f"scale {steps.scale:g}"]
    elif options.similarity == "cosine":
        parts = ["cosine similarity", "scale 1"]
    else:
        parts = [f"scale 1/√{d_k} = {steps.scale:.4g}"]
    if options.temperature != 1:
        parts.append(f"temperature {options.temperature:g}")
    if options.causal is not None:
        parts.append(f"causal ({options.causal})")
    if steps.allowed is not None:
        allowed = steps.allowed.reshape(-1, *steps.allowed.shape[-2:])[0]  # [n_q, n_k], the first head's
        parts.append(f"{int((~allowed).sum())} of {allowed.size} pairs masked")
    return " · ".join(parts)


def run_result(problem: Problem, steps, precision: int, options: AttentionOptions) -> Result:
    """JSON, table view and emittable matrices of one attention run."""
    q, k, v = problem.q, problem.k, problem.v
    n_q, d_k = q.shape
    n_k, d_v = v.shape
    data = {
        "queries": problem.queries,
        "keys": problem.keys,
        "columns": problem.columns,
        "weights": steps.weights,
        "output": steps.output,
        "scale": steps.scale,
        "temperature": options.temperature,
        "similarity": options.similarity,
        "causal": options.causal or False,
        "shapes": {"q": [n_q, d_k], "k": [n_k, d_k], "v": [n_k, d_v]},
        **colour_data(problem, steps),
    }

    def view():  # Rich is imported only when a table or picture is shown
        from rich.text import Text

        from attncli.cli.guards import rows_sum
        from attncli.output.render import heatmap, number_table, stack

        header = Text.assemble(
            ("attention ", "bold"),
            f"Q {n_q}×{d_k} · K {n_k}×{d_k} · V {n_k}×{d_v} → output {n_q}×{d_v}\n",
            describe(steps, d_k, options),
        )
        rows, _, key_headers = shown_labels(problem)
        return stack(
            header,
            heatmap(steps.weights, rows, key_headers, precision=precision,
                    title=f"weights = softmax(scores), {rows_sum(options, n_q, n_k)}", allowed=steps.allowed),
            number_table(steps.output, rows, problem.columns, precision=precision,
                         title="output = weights · V"),
            readings(problem, steps, precision),
        )

    matrices = {
        "output": output_matrix(problem, steps.output),
        "weights": Emitted(steps.weights, q.row_labels, k.row_labels or v.row_labels),
    }
    return Result(data, view, matrices)


def shown_labels(problem: Problem):
    """(query row labels, key row labels, key column headers) for tables, with
    colour swatches when the rows are colours."""
    from attncli.output.render import swatched, swatched_headers

    keys = problem.key_colours
    return (swatched(problem.queries, problem.query_colours), swatched(problem.keys, keys),
            swatched_headers(problem.keys, keys))


def colour_data(problem: Problem, steps) -> dict:
    """``{"mix": ["#hex", ...]}``, each query's blend of the key colours, when keys are colours."""
    from attncli.output.colours import mix, to_hex

    keys = problem.key_colours
    return {} if keys is None else {"mix": [to_hex(c) for c in mix(steps.weights, keys)]}


def readings(problem: Problem, steps, precision: int, rows=None):
    """What each query's output means, one line per query, when it means more
    than its numbers: shares of V's named columns ("48.8 % warm, 51.2 % cool")
    and, when the keys are colours, the colour their weights mix. None otherwise."""
    from rich.console import Group

    from attncli.output.colours import are_shares, mix, percentages, to_hex

    shares = problem.v.col_labels is not None and are_shares(problem.v.values)
    keys = problem.key_colours
    if not shares and keys is None:
        return None
    queries = problem.query_colours
    blends = mix(steps.weights, keys) if keys is not None else None
    lines = []
    for i in range(len(problem.queries)) if rows is None else rows:
        parts: list = []
        if shares:
            parts += [" is ", (percentages(steps.output[i], problem.columns, precision), "bold")]
        if blends is not None:
            parts += [";" if shares else "", " its weights mix the key colours into ", to_hex(blends[i])]
        lines.append(with_swatches(parts, problem.queries[i], queries and queries[i],
                                   blends and blends[i]))
    return Group(*lines)


def with_swatches(parts: list[Any], label: str, colour, blend):
    """A line about one query: ``label`` + ``parts``, with swatches before the
    query's label and before the mix (the last part) where colours show."""
    from rich.text import Text

    from attncli.output.render import IfColour, swatch

    plain = Text.assemble(label, *parts)
    if colour is None and blend is None:
        return plain
    head: list[Any] = [swatch(colour), " "] if colour is not None else []
    tail = [*parts[:-1], swatch(blend), " ", parts[-1]] if blend is not None else parts
    return IfColour(Text.assemble(*head, label, *tail), plain)
