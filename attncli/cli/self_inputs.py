"""``attn self``'s inputs, read once: X (a matrix file, a bundle, or a
sentence through word vectors), the context Z, the projection weights, the
option arrays and the bundle's settings, into one typed ``SelfInputs``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.attention import AttentionFlags, setting_names
from attncli.cli.inputs import read_option_arrays
from attncli.cli.io import source_name
from attncli.cli.paths import READS, is_file_name
from attncli.cli.reading import read_matrix_named, read_named
from attncli.cli.settings import BundleSettings
from attncli.cli.words import note_unknown, word_vectors
from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions
    from attncli.readers import Bundle, Matrix, TextSettings
    from attncli.vectors.table import WordVectors

# Bundle entries, and the names the maths and messages use for them.
WEIGHTS = {"wq": "W_Q", "wk": "W_K", "wv": "W_V", "wo": "W_O", "bq": "b_q", "bk": "b_k", "bv": "b_v", "bo": "b_o"}
BUNDLE_ENTRIES = ("x", "context", *WEIGHTS, "mask", "bias")

WqOption = Annotated[
    str | None,
    typer.Option(
        "--wq",
        metavar="FILE",
        show_default=False,
        help="W_Q, d_in×d_attn: Q = X W_Q + b_q. Random when not given.",
    ),
    READS,
]
WkOption = Annotated[
    str | None,
    typer.Option(
        "--wk",
        metavar="FILE",
        show_default=False,
        help="W_K, d_z×d_attn: K = Z W_K + b_k. Random when not given.",
    ),
    READS,
]
WvOption = Annotated[
    str | None,
    typer.Option(
        "--wv",
        metavar="FILE",
        show_default=False,
        help="W_V, d_z×d_v: V = Z W_V + b_v. Random when not given.",
    ),
    READS,
]
WoOption = Annotated[
    str | None,
    typer.Option(
        "--wo",
        metavar="FILE",
        show_default=False,
        help="W_O, d_v×d_out: output = concat(heads) W_O + b_o. None when not given.",
    ),
    READS,
]
BqOption = Annotated[
    str | None,
    typer.Option(
        "--bq",
        metavar="FILE",
        show_default=False,
        help="b_q, d_attn numbers (one row or column). Zero when not given.",
    ),
    READS,
]
BkOption = Annotated[
    str | None,
    typer.Option(
        "--bk",
        metavar="FILE",
        show_default=False,
        help="b_k, d_attn numbers. Zero when not given.",
    ),
    READS,
]
BvOption = Annotated[
    str | None,
    typer.Option(
        "--bv",
        metavar="FILE",
        show_default=False,
        help="b_v, d_v numbers. Zero when not given.",
    ),
    READS,
]
BoOption = Annotated[
    str | None,
    typer.Option(
        "--bo",
        metavar="FILE",
        show_default=False,
        help="b_o, d_out numbers; needs W_O.",
    ),
    READS,
]
HeadsOption = Annotated[
    int,
    typer.Option(
        "--heads",
        "-H",
        metavar="H",
        min=1,
        help="Split d_attn and d_v into this many heads; each attends with scale 1/√(d_attn/heads).",
    ),
]
SeedOption = Annotated[
    int,
    typer.Option(
        "--seed",
        metavar="S",
        min=0,
        help="Seed of the random W_Q, W_K, W_V: each d×d' matrix is drawn from N(0, 1/d) (LeCun normal), "
        "so projected features stay as large as the inputs and the scores near 1.",
    ),
]
DAttnOption = Annotated[
    int | None,
    typer.Option(
        "--d-attn",
        metavar="N",
        min=1,
        show_default=False,
        help="Width of random W_Q and W_K (the attention space). Default: the width of a given W_Q or W_K, else d_in.",
    ),
]
DOutOption = Annotated[
    int | None,
    typer.Option(
        "--d-out",
        metavar="N",
        min=1,
        show_default=False,
        help="Width of a random W_V (the output space, unless --wo maps it on). Default: the rows of W_O, else d_in.",
    ),
]
ColumnsOption = Annotated[
    bool,
    typer.Option(
        "--columns/--rows",
        help="The files hold column vectors, as seed 004: X and Z are d×n (one column per token) and each W "
        "is d_out×d_in. They are transposed on reading; results are still one row per token.",
    ),
]


@dataclass(frozen=True)
class SelfSettings:
    """The options of ``attn self`` that a bundle may set too (heads: 2, seed: 3, ...)."""

    heads: int = 1
    seed: int = 0
    d_attn: int | None = None
    d_out: int | None = None
    columns: bool = False


# Each of them once: the alias its option and bundle setting are read by.
SELF_SETTINGS: dict[str, Any] = {
    "heads": HeadsOption,
    "seed": SeedOption,
    "d_attn": DAttnOption,
    "d_out": DOutOption,
    "columns": ColumnsOption,
}
BUNDLE_META: dict[str, Any] = {"description": str}  # a bundle's plain settings that are not options


@dataclass(frozen=True)
class SelfInputs:
    """X, the context Z (None for self-attention), the given weights and the options, as read."""

    x: Matrix  # [n_q, d_in]
    z: Matrix | None  # [n_k, d_z], or None: Z = X
    weights: dict[str, Matrix]  # "wq" ... "bo", those given
    options: AttentionOptions  # with the mask and bias
    settings: SelfSettings = field(default_factory=SelfSettings)  # the command line's, else the bundle's
    description: str | None = None  # a bundle's description
    vectors: str | None = None  # the word vectors X's sentence was read through (None: X is a file)

    @property
    def sentence(self) -> bool:
        """Is X a sentence's words, each row its word vector?"""
        return self.vectors is not None

    @property
    def queries(self) -> list[str]:
        return self.x.row_labels or [f"x{i}" for i in range(self.x.shape[0])]

    @property
    def keys(self) -> list[str]:
        if self.z is None:
            return self.queries
        return self.z.row_labels or [f"z{i}" for i in range(self.z.shape[0])]

    @property
    def context(self) -> Matrix:
        """The Matrix keys and values come from: Z, or X for self-attention."""
        return self.x if self.z is None else self.z

    def given(self, name: str) -> Any:
        """The values of a given weight ("wq" ... "bo"), or None."""
        m = self.weights.get(name)
        return None if m is None else m.values


def read_self_inputs(
    source: str,
    context: str | None,
    files: dict[str, str | None],
    attention: AttentionFlags,
    own: SelfSettings,
    given: frozenset[str],
    text: TextSettings,
    vectors: tuple[str | None, str | None],
    unknown: str = "error",
) -> SelfInputs:
    """Read X (a file, a bundle or a sentence), the context, the weight files, the mask and the bias.

    ``vectors`` is (--vectors, --words): the word vectors of a sentence, None for the bundled table;
    ``unknown`` what to do with a word they do not have (error, skip, zero).
    Files named on the command line take the place of the bundle's entries, and options typed on
    the command line the place of its settings (``given``: which of ``own`` were typed).
    With ``columns``, X, Z and every W are transposed (biases are vectors either way).
    """
    x_is_file, z_is_file = is_file_name(source), context is not None and is_file_name(context)
    attention = attention.with_model()
    entries: dict[str, Matrix] = {}
    meta: dict[str, Any] = {}
    if x_is_file:
        names = [*BUNDLE_META, *SELF_SETTINGS, *setting_names()]
        bundle = read_named(source, text, bundle={"x"}, settings=names)
        if bundle.single:
            entries["x"] = bundle.matrix()
        else:
            entries.update(_bundle_entries(bundle, source_name(source)))
            settings = BundleSettings.of(bundle.meta, source_name(source), bundle.lines, names)
            attention = attention.with_settings(settings)
            own = SelfSettings(**settings.fill(vars(own), SELF_SETTINGS, given))
            meta = settings.fill({}, BUNDLE_META, frozenset())
    if z_is_file and context is not None:
        entries["context"] = read_matrix_named(context, text)
    for name, path in files.items():
        if path is not None:
            entries[name] = read_matrix_named(path, text)
    arrays = read_option_arrays(attention, text, entries, source_name(source))
    if own.columns:
        for name in ("x", "context", "wq", "wk", "wv", "wo"):
            if name in entries:
                entries[name] = _transposed(entries[name])

    sentences = [s for s, is_file in ((source, x_is_file), (context, z_is_file)) if s is not None and not is_file]
    table_name = None
    if sentences:
        table = word_vectors(*vectors, sentences)
        missing: list[str] = []
        if not x_is_file:
            entries["x"] = _sentence_matrix(source, table, unknown, missing)
            table_name = table.name
        if context is not None and not z_is_file:
            entries["context"] = _sentence_matrix(context, table, unknown, missing)
        note_unknown(list(dict.fromkeys(missing)), unknown, table.name)
    elif vectors != (None, None):
        raise UsageError("--vectors turns the words of a sentence into rows, but X and Z are files")
    elif unknown != "error":
        raise UsageError("--unknown is about the words of a sentence, but X and Z are files")
    weights = {name: entries[name] for name in WEIGHTS if name in entries}
    from attncli.cli.model_options import replaced
    from attncli.cli.notes import note

    for line in replaced(attention):
        note(line)
    return SelfInputs(
        entries["x"],
        entries.get("context"),
        weights,
        attention.build(arrays),
        own,
        meta.get("description"),
        table_name,
    )


def _bundle_entries(bundle: Bundle, source: str) -> dict[str, Matrix]:
    """Every entry of a bundle that holds x, by its lowercase name."""
    entries = {name.lower(): m for name, m in bundle.matrices.items()}
    extra = sorted(set(entries) - set(BUNDLE_ENTRIES))
    if extra:
        raise AttnError(
            f"the bundle has an unexpected entry {extra[0]!r}",
            source=source,
            hint="a bundle holds x and any of " + ", ".join(BUNDLE_ENTRIES[1:]),
        )
    return entries


def _transposed(m: Matrix) -> Matrix:
    """A column-convention matrix turned into rows, its labels swapped with it."""
    from attncli.readers import Matrix

    return Matrix(m.values.T, m.col_labels, m.row_labels)


def _sentence_matrix(text: str, table: WordVectors, unknown: str, missing: list[str]) -> Matrix:
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
