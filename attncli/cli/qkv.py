"""Q, K and V problems (``attn run`` and ``attn explain``): reading them, the
result both commands write, and the lines that say what the outputs mean."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.emit import Emitted, Result
from attncli.cli.io import progress_bar, source_name
from attncli.cli.notes import note
from attncli.cli.options import FROM_OPTIONS, Layout
from attncli.cli.reading import read_matrix_named, read_named
from attncli.errors import AttnError, UsageError
from attncli.readers.base import BY_FILE
from attncli.text import plural

if TYPE_CHECKING:
    from attncli.cli.options import AttentionFlags
    from attncli.core.options import AttentionOptions
    from attncli.core.reference import Steps
    from attncli.readers import Matrix, TextSettings

# What a bundle may hold besides q, k and v: arrays the options use, and settings (cli/options.py).
BUNDLE_ARRAYS = ("mask", "bias", "sinks", "alibi_slopes")
SETTINGS = ("window",)  # settings that may be written as a list, which the readers read as a matrix
UNUSED = {"dout": "the output's gradient, for a backward pass: attn grad computes it"}


class Problem:
    """Q, K, V as read, the options they are attended with (mask, bias, the
    bundle's settings, sinks, ALiBi slopes), and the labels to show them by.

    Tensors are held as [..., heads, seq, dim] whatever ``layout`` the files
    use; ``to_file_layout`` turns a result back. ``flags`` are the attention
    flags with the bundle's settings, ``arrays`` the sinks and ALiBi slopes read.
    """

    def __init__(self, q, k, v, options: AttentionOptions | None = None, meta=None, masked: bool = False, *,
                 flags: AttentionFlags = FROM_OPTIONS, arrays=None, layout: Layout = Layout.bhsd):
        from attncli.core.options import AttentionOptions

        self.q, self.k, self.v = q, k, v
        self.options = options or AttentionOptions()
        self.meta = meta or {}  # a bundle's plain settings that are not attention options: description, rgb
        self.masked = masked  # a mask was given (rather than only causal)
        self.flags = flags
        self.arrays = arrays or {}  # "sinks", "alibi_slopes" -> Matrix, from the bundle or the files named
        self.layout = layout

    @property
    def tensors(self) -> bool:
        """Has any input more than two axes (batch, heads)?"""
        return max(self.q.values.ndim, self.k.values.ndim, self.v.values.ndim) > 2

    def to_file_layout(self, values):
        """A result [..., heads, seq, dim] in the files' layout (bshd: [..., seq, heads, dim])."""
        return to_layout(values, self.layout)

    @property
    def queries(self) -> list[str]:
        return self.q.row_labels or [f"q{i}" for i in range(self.q.shape[-2])]

    @property
    def keys(self) -> list[str]:
        return self.k.row_labels or self.v.row_labels or [f"k{i}" for i in range(self.k.shape[-2])]

    @property
    def columns(self) -> list[str]:
        return self.v.col_labels or [f"d{i}" for i in range(self.v.shape[-1])]

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


# A bundle's plain settings that are not attention options, and their types.
BUNDLE_META: dict[str, Any] = {"description": str, "rgb": bool}


def to_layout(values, layout: Layout):
    """[..., a, b, d] -> [..., b, a, d] for bshd (its own inverse); bhsd and 2-D arrays unchanged."""
    import numpy as np

    return np.swapaxes(values, -3, -2) if layout is Layout.bshd and values.ndim >= 3 else values


def layout_shape(shape: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    """A shape [..., a, b, d] as ``to_layout`` would make it."""
    if layout is Layout.bshd and len(shape) >= 3:
        return shape[:-3] + (shape[-2], shape[-3], shape[-1])
    return shape


def load_problem(files: list[str], attention: AttentionFlags = FROM_OPTIONS, text: TextSettings = BY_FILE,
                 layout: Layout = Layout.bhsd, wanted: tuple[str, ...] = ()) -> Problem:
    """Read one bundle or three files and the files the flags name (mask, bias,
    sinks, ALiBi slopes), and gather the options: the command line's, else the
    bundle's settings. NPY, NPZ and safetensors inputs may be tensors of any
    rank ≥ 2, in ``layout``. ``wanted``: entries of UNUSED this command uses
    (``dout`` for ``attn grad``), kept in ``Problem.arrays``."""
    from attncli.cli.options import allowed_cells, setting_names
    from attncli.cli.settings import BundleSettings
    from attncli.readers import NotABundle

    if len(files) not in (1, 3):
        raise UsageError(f"expected one bundle file or three files Q K V, got {len(files)}")
    mask = bias = None
    meta: dict[str, Any] = {}
    arrays: dict[str, Matrix] = {}
    if len(files) == 1:
        source = source_name(files[0])
        try:
            bundle = read_named(files[0], text, bundle=True, tensors=True)
        except NotABundle as e:
            e.hint = "give three files Q K V, or one YAML/JSON/NPZ/safetensors bundle with q, k and v"
            raise
        entries = {name.lower(): m for name, m in bundle.matrices.items()}
        # A setting written as a list (window: [3, 0]) is read as a matrix: it is a setting all the same.
        given_settings = {**bundle.meta, **{name: entries.pop(name) for name in list(entries) if name in SETTINGS}}
        missing = [n for n in ("q", "k", "v") if n not in entries]
        extra = sorted(set(entries) - {"q", "k", "v", *BUNDLE_ARRAYS, *UNUSED})
        if missing or extra:
            what = f"has no {', '.join(missing)}" if missing else f"has an unexpected entry {extra[0]!r}"
            raise AttnError(f"the bundle {what}", source=source,
                            hint="a bundle holds q, k and v, and optionally " + ", ".join(BUNDLE_ARRAYS))
        for name in sorted(set(entries) & set(UNUSED) - set(wanted)):
            note(f"{name} is not used: {UNUSED[name]}", source)
        settings = BundleSettings.of(given_settings, source, bundle.lines, [*BUNDLE_META, *setting_names()])
        attention = attention.with_settings(settings)
        meta = settings.fill({}, BUNDLE_META, frozenset())
        q, k, v = entries["q"], entries["k"], entries["v"]
        if "mask" in entries:
            mask = allowed_cells(entries["mask"], source, "entry")
        if "bias" in entries:
            bias = entries["bias"].values
        arrays = {name: entries[name] for name in ("sinks", "alibi_slopes", *wanted) if name in entries}
    else:
        q, k, v = (read_matrix_named(f, text, tensors=True) for f in files)
    if attention.mask is not None:
        mask = allowed_cells(read_matrix_named(attention.mask, text, mask=True, tensors=True),
                             source_name(attention.mask), "file")
    if attention.bias is not None:
        bias = read_matrix_named(attention.bias, text, bias=True, tensors=True).values
    for name in ("sinks", "alibi_slopes"):
        if getattr(attention, name) is not None:
            arrays[name] = read_matrix_named(getattr(attention, name), text, tensors=True)
    for m in (q, k, v):
        m.values = to_layout(m.values, layout)
    options = attention.build(mask, bias, sinks=arrays.get("sinks"), alibi_slopes=arrays.get("alibi_slopes"))
    return Problem(q, k, values_per_key(v, k), options, meta, masked=mask is not None, flags=attention,
                   arrays=arrays, layout=layout)


def output_gradient(problem: Problem, dout: str | None, text: TextSettings = BY_FILE):
    """dO for a backward pass (``attn grad``, ``attn check --grad``): the file --dout names, else
    the bundle's ``dout`` (load with ``wanted=("dout",)``); [..., heads, n_q, d_v] whatever the layout."""
    if dout is not None:
        values = read_matrix_named(dout, text, tensors=True).values
    elif "dout" in problem.arrays:
        values = problem.arrays["dout"].values
    else:
        raise UsageError("the backward pass needs the output's gradient dO",
                         hint="give --dout FILE, or a bundle entry dout")
    return to_layout(values, problem.layout)


def values_per_key(v: Matrix, k: Matrix) -> Matrix:
    """V written as a flat list (or a 1-D array) of one number per key, as
    seed 000's ``v: [10, 5, 2]`` and the Python API's 1-D v: a column, n_k×1."""
    from attncli.readers import Matrix

    n_k = k.shape[0]
    if v.vector and k.values.ndim == 2 and n_k > 1 and v.shape == (1, n_k):
        return Matrix(v.values.T, v.col_labels, None)
    return v


def compute(problem: Problem, options: AttentionOptions) -> Steps:
    """Every step, from the reference; the guard-rails' notes on the weights."""
    from attncli.cli.guards import check_attention
    from attncli.core.reference import reference

    steps = reference(problem.q.values, problem.k.values, problem.v.values, options)
    check_attention(options, problem.queries, problem.k.shape[-2], steps,
                    head_count(steps.weights.shape))
    return steps


def compute_output(problem: Problem, options: AttentionOptions):
    """The output alone, from the blocked kernel, with a progress bar on a terminal
    (and the notes that need no weights: queries that may attend to nothing)."""
    from attncli.cli.guards import check_attention
    from attncli.core.kernel import blocked

    with progress_bar("attention") as progress:
        output = blocked(problem.q.values, problem.k.values, problem.v.values, options, progress=progress)
    check_attention(options, problem.queries, problem.k.shape[-2])
    return output


def head_count(shape: tuple[int, ...]) -> int:
    """How many (batch, head) matrices weights [..., n_q, n_k] hold."""
    import math

    return math.prod(shape[:-2])


def output_matrix(problem: Problem, output) -> Emitted:
    """The output as --emit writes it, in the files' layout: rows named as the queries, columns as V's."""
    return Emitted(problem.to_file_layout(output), problem.q.row_labels, problem.v.col_labels)


def describe(steps: Steps, d_k: int, options: AttentionOptions) -> str:
    """'scale 1/√3 = 0.5774' and the other settings in force, for the header.
    With several heads, ``d_k`` is a head's width and the mask count is one head's."""
    parts = [describe_options(d_k, options)]
    if steps.allowed is not None:
        allowed = steps.allowed.reshape(-1, *steps.allowed.shape[-2:])[0]  # [n_q, n_k], the first head's
        parts.append(f"{int((~allowed).sum())} of {allowed.size} pairs masked")
    return " · ".join(parts)


def describe_options(d_k: int, options: AttentionOptions) -> str:
    """The settings in force: 'scale 1/√3 = 0.5774 · RoPE neox (θ 10000) · causal (top-left)'."""
    scale = options.scale_for(d_k)
    if options.scale is not None:
        parts = [f"scale {scale:g}"]
    elif options.similarity == "cosine":
        parts = ["cosine similarity", "scale 1"]
    else:
        parts = [f"scale 1/√{d_k} = {scale:.4g}"]
    if options.temperature != 1:
        parts.append(f"temperature {options.temperature:g}")
    parts += variant_parts(options)
    if options.causal is not None:
        parts.append(f"causal ({options.causal})")
    return " · ".join(parts)


def variant_parts(options: AttentionOptions) -> list[str]:
    """The variants in force, as the header names them: 'RoPE neox (θ 10000)', 'window 3,0', ..."""
    parts = []
    rope = options.rope
    if rope is not None:
        extra = [f"θ {rope.theta:g}"] + ([f"first {rope.dim} dims"] if rope.dim else []) + (
            [f"queries from position {rope.offset}"] if rope.offset is not None else [])
        parts.append(f"RoPE {rope.style} ({', '.join(extra)})")
    if options.softcap is not None:
        parts.append(f"softcap {options.softcap:g}")
    if options.uses_alibi:
        parts.append("ALiBi" + (" (own slopes)" if options.alibi_slopes is not None else ""))
    if options.window is not None:
        parts.append("window {},{}".format(*options.window))
    if options.sinks is not None:
        parts.append("sinks")
    return parts


def variant_data(options: AttentionOptions, heads: int) -> dict:
    """The variants in force, for JSON (only those set)."""
    data: dict[str, Any] = {}
    if options.window is not None:
        data["window"] = list(options.window)
    if options.softcap is not None:
        data["softcap"] = options.softcap
    if options.uses_alibi:
        from attncli.core.positions import alibi_slopes

        data["alibi_slopes"] = alibi_slopes(heads) if options.alibi_slopes is None else options.alibi_slopes
    if options.rope is not None:
        rope = options.rope
        data["rope"] = {"style": rope.style, "theta": rope.theta, "dim": rope.dim, "offset": rope.offset}
    if options.sinks is not None:
        data["sinks"] = options.sinks
    return data


MAX_SLICES = 8  # (batch, head) heatmaps shown on a terminal unless --batch or --head choose


def slices(shape: tuple[int, ...], batch: int | None, head: int | None) -> list[tuple[int, int]]:
    """The (batch, head) pairs a view shows, for weights [..., H, n_q, n_k]; the
    leading axes before the heads count as one batch axis."""
    import math

    heads = shape[-3] if len(shape) > 2 else 1
    batches = math.prod(shape[:-3]) if len(shape) > 3 else 1
    for flag, value, count, what in (("--batch", batch, batches, ("batch", "batches")),
                                     ("--head", head, heads, ("query head", "query heads"))):
        if value is not None and value >= count:
            there = f"there {'is' if count == 1 else 'are'} {plural(count, *what)}"
            numbered = "the only one is 0" if count == 1 else f"they are numbered from 0 to {count - 1}"
            raise UsageError(f"{flag} {value} but {there}", hint=numbered)
    return [(b, h) for b in ([batch] if batch is not None else range(batches))
            for h in ([head] if head is not None else range(heads))]


def slice_of(values, b: int, h: int):
    """[..., H, n, m] -> [n, m], batch b (the leading axes flattened) and head h."""
    if values.ndim == 2:
        return values
    return values.reshape(-1, *values.shape[-3:])[b, h]


def run_result(problem: Problem, steps, precision: int, options: AttentionOptions,
               batch: int | None = None, head: int | None = None, style=None) -> Result:
    """JSON, table view and emittable matrices of one attention run."""
    from attncli.core.arrays import shape_text

    q, k, v = problem.q, problem.k, problem.v
    shapes = {name: list(problem.to_file_layout(m.values).shape) for name, m in (("q", q), ("k", k), ("v", v))}
    out_shape = tuple(problem.to_file_layout(steps.output).shape)
    shown = slices(steps.weights.shape, batch, head)
    heads = steps.weights.shape[-3] if steps.weights.ndim > 2 else 1
    data = {
        "queries": problem.queries,
        "keys": problem.keys,
        "columns": problem.columns,
        "weights": steps.weights,
        "output": problem.to_file_layout(steps.output),
        "scale": steps.scale,
        "temperature": options.temperature,
        "similarity": options.similarity,
        "causal": options.causal or False,
        "shapes": shapes,
        **({"layout": problem.layout.value, "dtype": steps.output.dtype.name} if problem.tensors else {}),
        **variant_data(options, heads),
        **({} if problem.tensors else colour_data(problem, steps)),
    }

    def view() -> Any:  # Rich is imported only when a table or picture is shown
        from rich.text import Text

        from attncli.cli.guards import rows_sum
        from attncli.output.render import heatmap, number_table, stack

        layout = f" ({problem.layout.value})" if problem.tensors else ""
        header = Text.assemble(
            ("attention ", "bold"),
            f"Q {shape_text(tuple(shapes['q']))} · K {shape_text(tuple(shapes['k']))} · "
            f"V {shape_text(tuple(shapes['v']))} → output {shape_text(out_shape)}{layout}\n",
            describe(steps, q.shape[-1], options), grouping(q.shape, k.shape), computed_in(problem, steps),
        )
        rows, _, key_headers = shown_labels(problem)
        sums = rows_sum(options, *steps.weights.shape[-2:])
        parts: list[Any] = [header]
        for b, h in shown[:MAX_SLICES]:
            where = "" if not problem.tensors else f"batch {b} · head {h}: "
            allowed = None if steps.allowed is None else slice_of(steps.allowed, b, h)
            parts += [
                heatmap(slice_of(steps.weights, b, h), rows, key_headers, precision=precision,
                        title=f"{where}weights = softmax(scores), {sums}", allowed=allowed, style=style),
                number_table(slice_of(steps.output, b, h), rows, problem.columns, precision=precision,
                             title=f"{where}output = weights · V"),
            ]
        if len(shown) > MAX_SLICES:
            parts.append(Text(f"… and {len(shown) - MAX_SLICES} more (batch, head) pairs: choose with --batch "
                              "and --head; data formats (-f json, npy) hold them all", style="dim"))
        if not problem.tensors:
            parts.append(readings(problem, steps, precision))
        return stack(*parts)

    matrices = {
        "output": output_matrix(problem, steps.output),
        "weights": Emitted(steps.weights, q.row_labels, k.row_labels or v.row_labels),
    }

    def maps():
        """The weights shown, for pictures: one head, or tensors' (batch, head) pairs as batches × heads."""
        import numpy as np

        from attncli.output.heatmap import ViewStyle
        from attncli.output.maps import AttentionMaps

        top = (style or ViewStyle()).scale(steps.weights)
        if not problem.tensors:
            return AttentionMaps.single(steps.weights, problem.queries, problem.keys, steps.allowed,
                                        "attention weights", top)
        batches, heads = sorted({b for b, _ in shown}), sorted({h for _, h in shown})

        def grid(values):  # [..., H, n_q, n_k] -> [batches, heads, n_q, n_k]
            return np.stack([np.stack([slice_of(values, b, h) for h in heads]) for b in batches])

        return AttentionMaps(grid(steps.weights), problem.queries, problem.keys, [f"batch {b}" for b in batches],
                             [f"head {h}" for h in heads], None if steps.allowed is None else grid(steps.allowed),
                             "attention weights", top, layer_axis="batch")

    return Result(data, view, matrices, maps)


def computed_in(problem: Problem, steps) -> str:
    """' · bfloat16 computed in float32', when the inputs' dtype is not the one computed in."""
    stored = sorted({m.values.dtype.name for m in (problem.q, problem.k, problem.v)} - {steps.output.dtype.name})
    return f" · {'/'.join(stored)} computed in {steps.output.dtype.name}" if problem.tensors and stored else ""


def grouping(q_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> str:
    """' · grouped-query: 4 query heads per K/V head', when K/V have fewer heads than Q."""
    if len(q_shape) < 3 or len(k_shape) < 3 or q_shape[-3] == k_shape[-3] or 1 in (q_shape[-3], k_shape[-3]):
        return ""
    group = q_shape[-3] // k_shape[-3]
    return f" · grouped-query: {group} query heads per K/V head"


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
    from attncli.output.summary import first_lines

    shown, rest = first_lines(len(problem.queries))
    lines = []
    for i in shown if rows is None else rows:
        parts: list = []
        if shares:
            parts += [" is ", (percentages(steps.output[i], problem.columns, precision), "bold")]
        if blends is not None:
            parts += [";" if shares else "", " its weights mix the key colours into ", to_hex(blends[i])]
        lines.append(with_swatches(parts, problem.queries[i], queries and queries[i],
                                   blends and blends[i]))
    return Group(*lines, *([rest] if rest and rows is None else []))


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
