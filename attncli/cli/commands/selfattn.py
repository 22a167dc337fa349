"""``attn self``: self-, cross- and multi-head attention with projections.

Q = X W_Q + b_q, K = Z W_K + b_k, V = Z W_V + b_v (Z = X unless --context),
split into heads, attention in each, heads side by side, then W_O + b_o when
given (seeds 001, 002 and 004). X is a matrix file, a bundle holding X and the
weights, or a sentence whose words become rows through word vectors. Any of
W_Q, W_K, W_V not given is drawn from a seeded generator, as the seeds do when
they have no trained weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.explained import pick_query
from attncli.cli.guards import check_attention
from attncli.cli.notes import note
from attncli.cli.options import (
    FROM_READ_OPTIONS,
    UNKNOWN_IS_AN_ERROR,
    PrecisionOption,
    QueryOption,
    ReadFlags,
    UnknownOption,
    VectorsOption,
    WordsOption,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS_IF_FILE
from attncli.cli.self_inputs import (
    SELF_SETTINGS,
    WEIGHTS,
    BkOption,
    BoOption,
    BqOption,
    BvOption,
    ColumnsOption,
    DAttnOption,
    DOutOption,
    HeadsOption,
    SeedOption,
    SelfInputs,
    SelfSettings,
    WkOption,
    WoOption,
    WqOption,
    WvOption,
    read_self_inputs,
)
from attncli.cli.self_result import SelfShown, self_result
from attncli.cli.settings import given_on_command_line
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options
from attncli.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from attncli.core.multihead import MultiHeadSteps

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
RANDOM = ("wq", "wk", "wv")  # drawn from --seed when not given; W_O and biases never are


@attention_options()
@read_options()
@view_options()
@output_options(
    emit=("output", "weights", "scores", "q", "k", "v"),
    emit_help="The matrix csv/tsv/npy write: output (n_q×d_out, the default), weights or scores "
    "(the unscaled q_i·k_j, seed 001's e_ij; npy: heads×n_q×n_k; csv/tsv: every head's rows stacked, "
    "labelled head:query), or the projections q, k, v.",
)
def self_attention(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="X",
            show_default=False,
            help="The rows that attend: a matrix file (CSV, TSV, NPY, YAML, JSON; '-' is stdin), a bundle "
            "(YAML, JSON or NPZ with x and any of context, wq, wk, wv, wo, bq, bk, bv, bo, mask, bias, and "
            "settings such as heads: 2 or seed: 3, which options given here override), or a sentence: "
            "anything that is not a file and has no / or file extension. A sentence's words "
            "become rows through the word vectors, labelled by the words.",
        ),
        READS_IF_FILE,
    ],
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            metavar="Z",
            show_default=False,
            help="Cross-attention: keys and values come from Z (a matrix file or a sentence) instead of X.",
        ),
        READS_IF_FILE,
    ] = None,
    wq: WqOption = None,
    wk: WkOption = None,
    wv: WvOption = None,
    wo: WoOption = None,
    bq: BqOption = None,
    bk: BkOption = None,
    bv: BvOption = None,
    bo: BoOption = None,
    heads: HeadsOption = 1,
    head: Annotated[
        int | None,
        typer.Option(
            "--head",
            metavar="N",
            min=0,
            show_default=False,
            help="Show only head N (numbered from 0) on the terminal, and write only its n_q×n_k weights "
            "with --emit weights in csv/tsv/npy. JSON always holds every head.",
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Walk one token (--query) through one head (--head, default 0) with the real numbers: its "
            "input row, q = x W_Q + b_q and every k, v, the scores and the terms that made each high, the "
            "scale, the mask, the softmax, the weighted sum and W_O. JSON: under explain.",
        ),
    ] = False,
    query: QueryOption = None,
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
    inputs = read_self_inputs(
        source,
        context,
        weight_files,
        attention,
        own,
        given_on_command_line(ctx, SELF_SETTINGS),
        reading.settings(),
        (vectors, words_file),
        unknown.value,
    )
    heads, options = inputs.settings.heads, inputs.options
    if head is not None and head >= heads:
        raise UsageError(
            f"--head {head} but there {'is 1 head' if heads == 1 else f'are {heads} heads'}",
            hint=f"heads are numbered from 0 to {heads - 1}",
        )
    if query is not None and not explain:
        raise UsageError("--query picks the token --explain walks through", hint="add --explain")
    steps, random, w = compute_self(
        inputs, heads=heads, seed=inputs.settings.seed, d_attn=inputs.settings.d_attn, d_out=inputs.settings.d_out
    )
    check_attention(options, inputs.queries, len(inputs.keys), steps.heads, heads)
    if random:
        note(f"random {', '.join(random)}: the pattern means nothing; `attn trace` shows a trained model")
    explained = None
    if explain:
        from attncli.cli.self_explained import Explained

        i = pick_query(inputs.queries, query, "X")
        explained = Explained(inputs, steps, w, head or 0, i, random)
    shown = SelfShown(inputs.settings.seed, random, head, look.style(), explained)
    return self_result(inputs, steps, shown, precision)


def compute_self(
    inputs: SelfInputs, *, heads: int, seed: int, d_attn: int | None, d_out: int | None
) -> tuple[MultiHeadSteps, list[str], dict[str, np.ndarray]]:
    """Draw the missing W_Q, W_K, W_V and run the multi-head maths -> (steps, names drawn, W_Q/W_K/W_V used)."""
    from attncli.core.multihead import multi_head_attention_steps, random_projection

    x = inputs.x.values
    z = x if inputs.z is None else inputs.z.values
    w_o = inputs.given("wo")
    attn_width = _width("--d-attn", d_attn, inputs, ("wq", "wk"), x.shape[1])
    v_width = _width("--d-out", d_out, inputs, ("wv",), x.shape[1] if w_o is None else w_o.shape[0])
    shapes = {"wq": (x.shape[1], attn_width), "wk": (z.shape[1], attn_width), "wv": (z.shape[1], v_width)}
    drawn = {}
    for i, name in enumerate(RANDOM):
        if inputs.given(name) is None:
            _check_size(name, *shapes[name])
            drawn[name] = random_projection(seed, i, *shapes[name])
    w = {name: drawn.get(name, inputs.given(name)) for name in RANDOM}
    steps = multi_head_attention_steps(
        x,
        w["wq"],
        w["wk"],
        w["wv"],
        context=None if inputs.z is None else z,
        w_o=w_o,
        b_q=inputs.given("bq"),
        b_k=inputs.given("bk"),
        b_v=inputs.given("bv"),
        b_o=inputs.given("bo"),
        n_head=heads,
        options=inputs.options,
    )
    return steps, [WEIGHTS[name] for name in drawn], w


def _check_size(name: str, rows: int, cols: int) -> None:
    """A random projection as large as --d-attn/--d-out ask, within the limit on values."""
    from attncli.readers.limits import ELEMENTS

    if rows * cols > ELEMENTS.value():
        option = "--d-out" if name == "wv" else "--d-attn"
        raise UsageError(
            f"{option} {cols:,}: a random {WEIGHTS[name]} of {rows:,}×{cols:,} would hold "
            f"{rows * cols:,} values, more than the limit of {ELEMENTS.value():,}",
            hint=f"a smaller {option}, or set {ELEMENTS.variable} to raise the limit",
        )


def _width(option: str, value: int | None, inputs: SelfInputs, names: tuple[str, ...], default: int) -> int:
    """Columns of a random projection: the option, else a given sibling's width, else the default.
    An option that disagrees with a given matrix is a usage error, not silently ignored."""
    given = [(n, inputs.given(n)) for n in names if inputs.given(n) is not None]
    for name, m in given:
        if value is not None and m.shape[-1] != value:
            raise UsageError(
                f"{option} {value} but {WEIGHTS[name]} is {'×'.join(map(str, m.shape))}",
                hint=f"{option} sets the width of random projections only",
            )
    if value is not None:
        return value
    return given[0][1].shape[-1] if given else default


COMMAND = CommandSpec(self_attention, EXAMPLES)
