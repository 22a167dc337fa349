"""``attn self``: self-, cross- and multi-head attention with projections.

Q = X W_Q + b_q, K = Z W_K + b_k, V = Z W_V + b_v (Z = X unless --context),
split into heads, attention in each, heads side by side, then W_O + b_o when
given (seeds 001, 002 and 004). X is a matrix file, a bundle holding X and the
weights, or a sentence whose words become rows through word vectors. Any of
W_Q, W_K, W_V not given is drawn from a seeded generator, as the seeds do when
they have no trained weights.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.command import CommandSpec
from attncli.cli.emit import Emitted, Result
from attncli.cli.guards import check_attention
from attncli.cli.io import source_name
from attncli.cli.options import (
    FROM_OPTIONS,
    FROM_READ_OPTIONS,
    UNKNOWN_IS_AN_ERROR,
    AttentionFlags,
    PrecisionOption,
    ReadFlags,
    UnknownOption,
    VectorsOption,
    WordsOption,
    attention_options,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS, READS_IF_FILE, is_file_name
from attncli.cli.qkv import SETTINGS, describe
from attncli.cli.reading import read_matrix_named, read_named
from attncli.cli.settings import BundleSettings, given_on_command_line
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options
from attncli.cli.words import note_unknown, word_vectors
from attncli.errors import AttnError, UsageError
from attncli.text import plural

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions
    from attncli.readers import Bundle, TextSettings

EXAMPLES = """\b
Examples:
  attn self "the pink elephant tried to get into the car but it was too big" --heads 2
  attn self x.csv --wq wq.npy --wk wk.npy --wv wv.npy            # one head
  attn self x.csv --wq wq.npy --wk wk.npy --wv wv.npy --wo wo.npy --heads 4 --causal
  attn self x.csv --context z.csv --wq wq.npy --wk wk.npy --wv wv.npy   # cross-attention
  attn self samples/three_spaces.yaml        # one bundle: x, and any of context, wq ... bo
  attn self x.csv --columns --wq wq.csv --wk wk.csv --wv wv.csv  # seed 004: vectors as columns
  attn self "she made her uncle tea" --heads 2 -f npy --emit weights > w.npy
  attn self "Zuko made his uncle tea" --unknown zero     # seed 001: Zuko is not in GloVe
"""

# Bundle entries, and the names the maths and messages use for them.
WEIGHTS = {"wq": "W_Q", "wk": "W_K", "wv": "W_V", "wo": "W_O", "bq": "b_q", "bk": "b_k", "bv": "b_v", "bo": "b_o"}
BUNDLE_ENTRIES = ("x", "context", *WEIGHTS, "mask", "bias")
RANDOM = ("wq", "wk", "wv")  # drawn from --seed when not given; W_O and biases never are
MAX_TABLE_COLUMNS = 12  # output columns shown on a terminal; data formats have them all


WqOption = Annotated[str | None, typer.Option(
    "--wq", metavar="FILE", show_default=False,
    help="W_Q, d_in×d_attn: Q = X W_Q + b_q. Random when not given.",
), READS]
WkOption = Annotated[str | None, typer.Option(
    "--wk", metavar="FILE", show_default=False,
    help="W_K, d_z×d_attn: K = Z W_K + b_k. Random when not given.",
), READS]
WvOption = Annotated[str | None, typer.Option(
    "--wv", metavar="FILE", show_default=False,
    help="W_V, d_z×d_v: V = Z W_V + b_v. Random when not given.",
), READS]
WoOption = Annotated[str | None, typer.Option(
    "--wo", metavar="FILE", show_default=False,
    help="W_O, d_v×d_out: output = concat(heads) W_O + b_o. None when not given."), READS]
BqOption = Annotated[str | None, typer.Option(
    "--bq", metavar="FILE", show_default=False,
    help="b_q, d_attn numbers (one row or column). Zero when not given.",
), READS]
BkOption = Annotated[str | None, typer.Option(
    "--bk", metavar="FILE", show_default=False,
    help="b_k, d_attn numbers. Zero when not given.",
), READS]
BvOption = Annotated[str | None, typer.Option(
    "--bv", metavar="FILE", show_default=False,
    help="b_v, d_v numbers. Zero when not given.",
), READS]
BoOption = Annotated[str | None, typer.Option(
    "--bo", metavar="FILE", show_default=False,
    help="b_o, d_out numbers; needs W_O.",
), READS]
HeadsOption = Annotated[int, typer.Option(
    "--heads", "-H", metavar="H", min=1,
    help="Split d_attn and d_v into this many heads; each attends with scale 1/√(d_attn/heads).",
)]
SeedOption = Annotated[int, typer.Option(
    "--seed", metavar="S", min=0,
    help="Seed of the random W_Q, W_K, W_V: each d×d' matrix is drawn from N(0, 1/d) (LeCun normal), "
         "so projected features stay as large as the inputs and the scores near 1.",
)]
DAttnOption = Annotated[int | None, typer.Option(
    "--d-attn", metavar="N", min=1, show_default=False,
    help="Width of random W_Q and W_K (the attention space). Default: the width of a given W_Q or W_K, else d_in.",
)]
DOutOption = Annotated[int | None, typer.Option(
    "--d-out", metavar="N", min=1, show_default=False,
    help="Width of a random W_V (the output space, unless --wo maps it on). Default: the rows of W_O, else d_in.",
)]
ColumnsOption = Annotated[bool, typer.Option(
    "--columns/--rows",
    help="The files hold column vectors, as seed 004: X and Z are d×n (one column per token) and each W "
         "is d_out×d_in. They are transposed on reading; results are still one row per token.",
)]


@dataclass
class SelfSettings:
    """The options of ``attn self`` that a bundle may set too (heads: 2, seed: 3, ...)."""

    heads: int = 1
    seed: int = 0
    d_attn: int | None = None
    d_out: int | None = None
    columns: bool = False


# Each of them once: the alias its option and bundle setting are read by.
SELF_SETTINGS: dict[str, Any] = {"heads": HeadsOption, "seed": SeedOption, "d_attn": DAttnOption,
                                 "d_out": DOutOption, "columns": ColumnsOption}
BUNDLE_META: dict[str, Any] = {"description": str}  # a bundle's plain settings that are not options


@attention_options()
@read_options()
@view_options()
@output_options(emit=("output", "weights", "q", "k", "v"),
                emit_help="The matrix csv/tsv/npy write: output (n_q×d_out, the default), weights (npy: "
                          "heads×n_q×n_k; csv/tsv: every head's rows stacked, labelled head:query), or the "
                          "projections q, k, v.")
def self_attention(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(
        metavar="X", show_default=False,
        help="The rows that attend: a matrix file (CSV, TSV, NPY, YAML, JSON; '-' is stdin), a bundle "
             "(YAML, JSON or NPZ with x and any of context, wq, wk, wv, wo, bq, bk, bv, bo, mask, bias, and "
             "settings such as heads: 2 or seed: 3, which options given here override), or a sentence: "
             "anything that is not a file and has no / or file extension. A sentence's words "
             "become rows through the word vectors, labelled by the words.",
    ), READS_IF_FILE],
    context: Annotated[str | None, typer.Option(
        "--context", "-c", metavar="Z", show_default=False,
        help="Cross-attention: keys and values come from Z (a matrix file or a sentence) instead of X.",
    ), READS_IF_FILE] = None,
    wq: WqOption = None,
    wk: WkOption = None,
    wv: WvOption = None,
    wo: WoOption = None,
    bq: BqOption = None,
    bk: BkOption = None,
    bv: BvOption = None,
    bo: BoOption = None,
    heads: HeadsOption = 1,
    head: Annotated[int | None, typer.Option(
        "--head", metavar="N", min=0, show_default=False,
        help="Show only head N (numbered from 0) on the terminal, and write only its n_q×n_k weights "
             "with --emit weights in csv/tsv/npy. JSON always holds every head.",
    )] = None,
    seed: SeedOption = 0,
    d_attn: DAttnOption = None,
    d_out: DOutOption = None,
    vectors: VectorsOption = None,
    words_file: WordsOption = None,
    unknown: UnknownOption = UNKNOWN_IS_AN_ERROR,
    columns: ColumnsOption = False,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    look: ViewFlags = FROM_VIEW_OPTIONS,
) -> Result:
    """Self-, cross- and multi-head attention: project X (and a context Z), attend, project out.

    Q = X W_Q + b_q, K = Z W_K + b_k, V = Z W_V + b_v, with Z = X unless
    --context. Row vectors: X is n_q×d_in, W_Q is d_in×d_attn. With --heads H,
    Q, K and V are cut into H slices along their columns; each head attends on
    its own, the heads' outputs are put side by side and multiplied by W_O when
    given. On a terminal: a header with d_in, d_attn, d_out, heads and the seed,
    one heatmap per head and the output. In a pipe: one JSON object with
    queries, keys, weights (heads × n_q × n_k), output and the projections.
    """
    weight_files = {"wq": wq, "wk": wk, "wv": wv, "wo": wo, "bq": bq, "bk": bk, "bv": bv, "bo": bo}
    own = SelfSettings(heads, seed, d_attn, d_out, columns)
    problem = load_self_problem(
        source, context, weight_files,
        attention, own, given_on_command_line(ctx, SELF_SETTINGS), reading.settings(), (vectors, words_file),
        unknown.value,
    )
    heads, options = problem.settings.heads, problem.options
    if head is not None and head >= heads:
        raise UsageError(f"--head {head} but there {'is 1 head' if heads == 1 else f'are {heads} heads'}",
                         hint=f"heads are numbered from 0 to {heads - 1}")
    steps, random = compute_self(problem, options, heads=heads, seed=problem.settings.seed,
                                 d_attn=problem.settings.d_attn, d_out=problem.settings.d_out)
    check_attention(options, problem.queries, len(problem.keys), steps.heads, heads)
    settings = {"seed": problem.settings.seed, "random": random, "options": options, "head": head,
                "style": look.style()}
    return self_result(problem, steps, settings, precision)


@dataclass
class SelfProblem:
    """X, the context Z (None for self-attention), the given weights and the mask, as read."""

    x: Any  # Matrix [n_q, d_in]
    z: Any = None  # Matrix [n_k, d_z], or None: Z = X
    weights: dict = field(default_factory=dict)  # "wq" ... "bo" -> Matrix
    options: Any = None  # AttentionOptions, with the mask and bias
    settings: SelfSettings = field(default_factory=SelfSettings)  # the command line's, else the bundle's
    meta: dict = field(default_factory=dict)  # a bundle's description

    @property
    def queries(self) -> list[str]:
        return self.x.row_labels or [f"x{i}" for i in range(self.x.shape[0])]

    @property
    def keys(self) -> list[str]:
        if self.z is None:
            return self.queries
        return self.z.row_labels or [f"z{i}" for i in range(self.z.shape[0])]

    @property
    def context(self):
        """The Matrix keys and values come from: Z, or X for self-attention."""
        return self.x if self.z is None else self.z

    def given(self, name: str):
        """The values of a given weight ("wq" ... "bo"), or None."""
        m = self.weights.get(name)
        return None if m is None else m.values


def load_self_problem(source: str, context: str | None, files: dict, attention: AttentionFlags,
                      own: SelfSettings, given: frozenset[str], text: TextSettings,
                      vectors: tuple[str | None, str | None], unknown: str = "error") -> SelfProblem:
    """Read X (a file, a bundle or a sentence), the context, the weight files, the mask and the bias.

    ``vectors`` is (--vectors, --words): the word vectors of a sentence, None for the bundled table;
    ``unknown`` what to do with a word they do not have (error, skip, zero).
    Files named on the command line take the place of the bundle's entries, and options typed on
    the command line the place of its settings (``given``: which of ``own`` were typed).
    With ``columns``, X, Z and every W are transposed (biases are vectors either way).
    """
    from attncli.cli.options import allowed_cells, setting_names

    x_is_file, z_is_file = is_file_name(source), context is not None and is_file_name(context)
    entries: dict = {}
    meta: dict = {}
    if x_is_file:
        bundle = read_named(source, text, bundle={"x"})
        if bundle.single:
            entries["x"] = bundle.matrix()
        else:
            # A setting written as a list (window: [3, 0]) is read as a matrix: it is a setting all the same.
            listed = {name: bundle.matrices.pop(name) for name in list(bundle.matrices) if name.lower() in SETTINGS}
            entries.update(_bundle_entries(bundle, source_name(source)))
            settings = BundleSettings.of({**bundle.meta, **listed}, source_name(source), bundle.lines,
                                         [*BUNDLE_META, *SELF_SETTINGS, *setting_names()])
            attention = attention.with_settings(settings)
            own = SelfSettings(**settings.fill(vars(own), SELF_SETTINGS, given))
            meta = settings.fill({}, BUNDLE_META, frozenset())
    if z_is_file and context is not None:
        entries["context"] = read_matrix_named(context, text)
    for name, path in files.items():
        if path is not None:
            entries[name] = read_matrix_named(path, text)
    mask = bias = None
    if "mask" in entries:
        mask = allowed_cells(entries.pop("mask"), source_name(source), "entry")
    if "bias" in entries:
        bias = entries.pop("bias").values
    if attention.mask is not None:
        mask = allowed_cells(read_matrix_named(attention.mask, text, mask=True), source_name(attention.mask),
                             "file")
    if attention.bias is not None:
        bias = read_matrix_named(attention.bias, text, bias=True).values
    if own.columns:
        for name in ("x", "context", "wq", "wk", "wv", "wo"):
            if name in entries:
                entries[name] = _transposed(entries[name])

    sentences = [s for s, is_file in ((source, x_is_file), (context, z_is_file)) if s is not None and not is_file]
    if sentences:
        table = word_vectors(*vectors, sentences)
        missing: list[str] = []
        if not x_is_file:
            entries["x"] = _sentence_matrix(source, table, unknown, missing)
        if context is not None and not z_is_file:
            entries["context"] = _sentence_matrix(context, table, unknown, missing)
        note_unknown(list(dict.fromkeys(missing)), unknown, table.name)
    elif vectors != (None, None):
        raise UsageError("--vectors turns the words of a sentence into rows, but X and Z are files")
    elif unknown != "error":
        raise UsageError("--unknown is about the words of a sentence, but X and Z are files")
    weights = {name: entries[name] for name in WEIGHTS if name in entries}
    return SelfProblem(entries["x"], entries.get("context"), weights, attention.build(mask, bias), own, meta)



def _bundle_entries(bundle: Bundle, source: str) -> dict:
    """Every entry of a bundle that holds x, by its lowercase name."""
    entries = {name.lower(): m for name, m in bundle.matrices.items()}
    extra = sorted(set(entries) - set(BUNDLE_ENTRIES))
    if extra:
        raise AttnError(f"the bundle has an unexpected entry {extra[0]!r}", source=source,
                        hint="a bundle holds x and any of " + ", ".join(BUNDLE_ENTRIES[1:]))
    return entries


def _transposed(m):
    """A column-convention matrix turned into rows, its labels swapped with it."""
    from attncli.readers import Matrix

    return Matrix(m.values.T, m.col_labels, m.row_labels)


def _sentence_matrix(text: str, table, unknown: str, missing: list[str]):
    """One row per word of the sentence: its vector, labelled by the word; a
    word the table does not have is an error, left out or zeros (``unknown``),
    and added to ``missing``."""
    from attncli.readers import Matrix
    from attncli.vectors.table import phrase_words

    words = phrase_words(text)
    if not words:
        raise AttnError(f"no words in {text!r}", hint="give a sentence or a matrix file")
    found = table.embed(words, unknown)  # each word its own one-word phrase
    if not found.kept:
        raise AttnError(f"no word of {text!r} is in {table.name}", hint="--unknown skip left them all out")
    missing += found.unknown
    return Matrix(found.vectors, [words[i] for i in found.kept], None)


def compute_self(problem: SelfProblem, options: AttentionOptions, *, heads: int, seed: int, d_attn: int | None,
                 d_out: int | None) -> tuple[Any, list[str]]:
    """Draw the missing W_Q, W_K, W_V and run the multi-head maths -> (steps, names drawn)."""
    from attncli.core.multihead import multi_head_attention_steps, random_projection

    x = problem.x.values
    z = x if problem.z is None else problem.z.values
    w_o = problem.given("wo")
    attn_width = _width("--d-attn", d_attn, problem, ("wq", "wk"), x.shape[1])
    v_width = _width("--d-out", d_out, problem, ("wv",), x.shape[1] if w_o is None else w_o.shape[0])
    shapes = {"wq": (x.shape[1], attn_width), "wk": (z.shape[1], attn_width), "wv": (z.shape[1], v_width)}
    drawn = {}
    for i, name in enumerate(RANDOM):
        if problem.given(name) is None:
            _check_size(name, *shapes[name])
            drawn[name] = random_projection(seed, i, *shapes[name])
    w = {name: drawn.get(name, problem.given(name)) for name in RANDOM}
    steps = multi_head_attention_steps(
        x, w["wq"], w["wk"], w["wv"],
        context=None if problem.z is None else z,
        w_o=w_o, b_q=problem.given("bq"), b_k=problem.given("bk"),
        b_v=problem.given("bv"), b_o=problem.given("bo"),
        n_head=heads, options=options,
    )
    return steps, [WEIGHTS[name] for name in drawn]


def _check_size(name: str, rows: int, cols: int) -> None:
    """A random projection as large as --d-attn/--d-out ask, within the limit on values."""
    from attncli.readers.limits import ELEMENTS

    if rows * cols > ELEMENTS.value():
        option = "--d-out" if name == "wv" else "--d-attn"
        raise UsageError(f"{option} {cols:,}: a random {WEIGHTS[name]} of {rows:,}×{cols:,} would hold "
                         f"{rows * cols:,} values, more than the limit of {ELEMENTS.value():,}",
                         hint=f"a smaller {option}, or set {ELEMENTS.variable} to raise the limit")


def _width(option: str, value: int | None, problem: SelfProblem, names: tuple, default: int) -> int:
    """Columns of a random projection: the option, else a given sibling's width, else the default.
    An option that disagrees with a given matrix is a usage error, not silently ignored."""
    given = [(n, problem.given(n)) for n in names if problem.given(n) is not None]
    for name, m in given:
        if value is not None and m.shape[-1] != value:
            raise UsageError(f"{option} {value} but {WEIGHTS[name]} is {'×'.join(map(str, m.shape))}",
                             hint=f"{option} sets the width of random projections only")
    if value is not None:
        return value
    return given[0][1].shape[-1] if given else default


def self_result(problem: SelfProblem, steps, settings: dict, precision: int) -> Result:
    """JSON, terminal view and emittable matrices of one `attn self` run."""
    dims = _dims(problem, steps, n_head=steps.weights.shape[0])
    out_labels = _output_columns(problem)
    data = {
        "queries": problem.queries,
        "keys": problem.keys,
        "columns": out_labels or [f"d{i}" for i in range(steps.output.shape[1])],
        "weights": steps.weights,  # [heads, n_q, n_k], always 3-D
        "output": steps.output,
        "q": steps.q,
        "k": steps.k,
        "v": steps.v,
        **dims,
        "scale": steps.heads.scale,
        "temperature": settings["options"].temperature,
        "similarity": settings["options"].similarity,
        "causal": settings["options"].causal or False,
        "seed": settings["seed"],
        "random": settings["random"],
    }
    matrices = {
        "output": Emitted(steps.output, problem.x.row_labels, out_labels),
        "weights": _weights_to_emit(problem, steps.weights, settings["head"]),
        "q": Emitted(steps.q, problem.x.row_labels),
        "k": Emitted(steps.k, problem.context.row_labels),
        "v": Emitted(steps.v, problem.context.row_labels),
    }
    view = functools.partial(_view, problem, steps, dims, settings, data["columns"], precision)
    return Result(data, view, matrices, functools.partial(_maps, problem, steps, settings))


def _maps(problem: SelfProblem, steps, settings: dict):
    """Every head's weights (or the one --head picks) for the head view and figures."""
    from attncli.output.maps import AttentionMaps

    n_head = steps.weights.shape[0]
    shown = list(range(n_head)) if settings["head"] is None else [settings["head"]]
    allowed = steps.heads.allowed
    if allowed is not None:
        allowed = allowed[shown] if allowed.ndim == 3 else allowed
    kind = "self-attention" if problem.z is None else "cross-attention"
    return AttentionMaps(steps.weights[None, shown], problem.queries, problem.keys, [""],
                         [f"head {h}" for h in shown], None if allowed is None else allowed[None],
                         f"{kind}, {plural(n_head, 'head')}", settings["style"].scale(steps.weights[shown]))


def _dims(problem: SelfProblem, steps, n_head: int) -> dict:
    """The sizes of the three spaces (seed 004) and of the heads."""
    d_attn, d_v = steps.q.shape[1], steps.v.shape[1]
    dims = {"heads": n_head, "d_in": problem.x.shape[1]}
    if problem.z is not None:
        dims["d_z"] = problem.z.shape[1]
    dims.update(d_attn=d_attn, d_head=d_attn // n_head, d_v=d_v, d_out=steps.output.shape[1])
    return dims


def _output_columns(problem: SelfProblem) -> list[str] | None:
    last = problem.weights.get("wo", problem.weights.get("wv"))
    return None if last is None else last.col_labels


def _weights_to_emit(problem: SelfProblem, weights, head: int | None) -> Emitted:
    """One head as n_q×n_k, else every head as [heads, n_q, n_k] (which csv/tsv
    write as the heads' rows stacked, labelled head:query)."""
    keys = problem.context.row_labels
    if head is not None:
        return Emitted(weights[head], problem.x.row_labels, keys)
    return Emitted(weights, problem.queries, keys)


def _view(problem: SelfProblem, steps, dims: dict, settings: dict, out_labels: list[str], precision: int):
    """Header, one heatmap per head (or the one --head asks for), the output."""
    from rich.text import Text

    from attncli.cli.guards import rows_sum
    from attncli.output.render import heatmap, number_table, stack
    from attncli.output.summary import SHOWN_TABLES, first_lines

    n_head = dims["heads"]
    kind = "self-attention" if problem.z is None else "cross-attention"
    z_part = "" if problem.z is None else f" over Z {problem.z.shape[0]}×{dims['d_z']}"
    sizes = " · ".join(f"{name} {dims[name]}" for name in ("d_in", "d_z", "d_attn", "d_v", "d_out") if name in dims
                       and (name != "d_v" or "wo" in problem.weights))
    random = settings["random"]
    seed = f"seed {settings['seed']}: random {', '.join(random)}" if random else "no random weights"
    details = [sizes, f"{plural(n_head, 'head')} of d_head {dims['d_head']}",
               describe(steps.heads, dims["d_head"], settings["options"]), seed]
    allowed = steps.heads.allowed
    description = problem.meta.get("description")
    header = Text.assemble((kind + " ", "bold"),
                           f"X {problem.x.shape[0]}×{dims['d_in']}{z_part} → output "
                           f"{steps.output.shape[0]}×{dims['d_out']}\n", f"{description}\n" if description else "",
                           " · ".join(details))
    parts: list = [header]
    shown, more_heads = first_lines(n_head, SHOWN_TABLES, "heads (--head N shows one)")
    if settings["head"] is not None:
        shown, more_heads = range(settings["head"], settings["head"] + 1), None
    sums = rows_sum(settings["options"], len(problem.queries), len(problem.keys))
    for h in shown:
        title = f"head {h} of {n_head}: weights = softmax of head {h}'s scaled scores, {sums}"
        parts.append(heatmap(steps.weights[h], problem.queries, problem.keys, precision=precision,
                             title=title, allowed=None if allowed is None else allowed[h],
                             style=settings["style"]))
    if more_heads is not None:
        parts.append(more_heads)
    if "wo" in problem.weights:
        how = "concat(heads) · W_O" + (" + b_o" if "bo" in problem.weights else "")
    else:
        how = "weights · V" + (", heads side by side" if n_head > 1 else "")
    cut = steps.output.shape[1] > MAX_TABLE_COLUMNS
    parts.append(number_table(steps.output[:, :MAX_TABLE_COLUMNS], problem.queries, out_labels[:MAX_TABLE_COLUMNS],
                              precision=precision, title=f"output = {how}"))
    if cut:
        parts.append(Text(f"… and {steps.output.shape[1] - MAX_TABLE_COLUMNS} more columns "
                          "(all of them with --format json, csv or npy)", style="dim"))
    return stack(*parts)


COMMAND = CommandSpec(self_attention, EXAMPLES)
