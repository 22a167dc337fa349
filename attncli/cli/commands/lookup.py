"""``attn lookup``: a key-value lookup by meaning (seed 000), on real word vectors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Emitted, Result
from attncli.cli.options import (
    FROM_READ_OPTIONS,
    UNKNOWN_IS_AN_ERROR,
    PrecisionOption,
    ReadFlags,
    UnknownOption,
    VectorsOption,
    WordsOption,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS, READS_MODEL
from attncli.errors import AttnError, UsageError
from attncli.text import parse_number, plural

if TYPE_CHECKING:
    from attncli.core.options import AttentionOptions
    from attncli.core.reference import Steps
    from attncli.readers import Matrix, TextSettings
    from attncli.vectors.table import Embedded

EXAMPLES = """\b
Examples:
  attn lookup fruit --keys apple,banana,chair
  attn lookup fruit --keys apple,banana,chair --values 10,5,2
  attn lookup fruit -k apple -k banana -k chair      # repeated, keys add up
  attn lookup fruit --keys apple,zuko --unknown skip  # zuko: not in GloVe
  attn lookup fruit --dict samples/fruit.yaml
  attn lookup "tropical fruit" --keys apple,banana,chair
  attn lookup king --keys queen,man,chair --vectors glove.6B.300d.txt
  attn lookup fruit --keys apple,banana,chair -f json | jq '.weights[0]'
  attn lookup "a sweet yellow fruit" --keys apple,banana,chair --model DIR
"""


@attention_options("scale", "temperature", "similarity")
@read_options()
@output_options(
    emit=("output", "weights"),
    emit_help="The matrix csv/tsv/npy write: output (the default when there are values) or weights.",
)
def lookup(
    queries: Annotated[
        list[str],
        typer.Argument(
            metavar="QUERY...",
            show_default=False,
            help='Words or phrases to look up. A phrase ("tropical fruit") is the mean of its words\' vectors.',
        ),
    ],
    keys: Annotated[
        list[str] | None,
        typer.Option(
            "--keys",
            "-k",
            metavar="A,B,C",
            show_default=False,
            help="The keys, comma-separated words or phrases; repeat it to add more (-k apple -k banana).",
        ),
    ] = None,
    values: Annotated[
        list[str] | None,
        typer.Option(
            "--values",
            "-v",
            metavar="X,Y,Z",
            show_default=False,
            help="One number per key, comma-separated (repeat it to add more); the output is their weighted "
            "sum. Without values: the weights alone.",
        ),
    ] = None,
    dict_file: Annotated[
        str | None,
        typer.Option(
            "--dict",
            "-d",
            metavar="FILE",
            show_default=False,
            help="Keys and values from a YAML/JSON mapping (key: number or key: [vector]), or a CSV "
            "whose first column holds the keys.",
        ),
        READS,
    ] = None,
    vectors: VectorsOption = None,
    words_file: WordsOption = None,
    unknown: UnknownOption = UNKNOWN_IS_AN_ERROR,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="DIR",
            show_default=False,
            help="Embed each query and key as a whole sentence with a BERT-family sentence model "
            "(a Hugging Face folder, or a name in the local cache; needs the 'models' extra) "
            "instead of word vectors. Its embeddings are unit length, so the scores are cosines, "
            "scaled by 1 (as with --similarity cosine) unless --scale says otherwise.",
        ),
        READS_MODEL,
    ] = None,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
) -> Result:
    """Look words up by meaning: attention of query words over key words.

    Each word becomes its GloVe vector (or, with --model, each text its
    sentence embedding); the query attends to the keys with softmax(q·kᵀ/√d),
    exactly as `attn run`, and the values are blended by those weights.
    Matching is case-insensitive.
    """

    import numpy as np

    from attncli.cli.guards import check_attention
    from attncli.cli.words import note_unknown
    from attncli.core.reference import reference
    from attncli.readers import Matrix

    key_names, value_matrix = _keys_and_values(keys, values, dict_file, reading.settings())
    if model is not None and unknown.value != "error":
        raise UsageError("--unknown is for word vectors; --model embeds any text")
    space = embedding(model, vectors, words_file, [*queries, *key_names])
    found_q = space.embed(queries, unknown.value)
    found_k = space.embed(key_names, unknown.value)
    queries, q = [queries[i] for i in found_q.kept], found_q.vectors  # [n_q, d]
    key_names, k = [key_names[i] for i in found_k.kept], found_k.vectors  # [n_k, d]
    for what, left in (("query", queries), ("key", key_names)):
        if not left:
            raise AttnError(f"no {what} has a word in {space.name}", hint="--unknown skip left them all out")
    note_unknown(list(dict.fromkeys(found_q.unknown + found_k.unknown)), unknown.value, space.name)
    if value_matrix is not None and len(found_k.kept) < value_matrix.shape[0]:
        value_matrix = Matrix(value_matrix.values[found_k.kept], key_names, value_matrix.col_labels)
    options = attention.build()
    if model is not None:  # unit-length embeddings: the dot is a cosine, scored as one (scale 1)
        options = options.but(similarity="cosine")
    v = value_matrix.values if value_matrix is not None else np.eye(len(key_names))
    steps = reference(q, k, v, options)
    check_attention(options, queries, len(key_names), steps)
    if out.emit == "output" and value_matrix is None:
        raise UsageError("--emit output needs values", hint="give --values or --dict, or use --emit weights")
    return _result(queries, key_names, value_matrix, space, steps, options, precision)


def _keys_and_values(
    keys: list[str] | None, values: list[str] | None, dict_file: str | None, settings: TextSettings
) -> tuple[list[str], Matrix | None]:
    """Key names and an optional [n_k, d_v] value Matrix, from --keys/--values or --dict."""

    from attncli.cli.io import source_name
    from attncli.cli.reading import read_matrix_named
    from attncli.readers import Matrix

    if (keys is None) == (dict_file is None):
        raise UsageError(
            "give the keys with --keys a,b,c or --dict FILE" if keys is None else "give --keys or --dict, not both"
        )
    if dict_file is not None:
        if values is not None:
            raise UsageError("--values goes with --keys; a --dict file holds its own values")
        matrix = read_matrix_named(dict_file, settings)
        if matrix.row_labels is None:
            raise AttnError(
                "has no keys",
                source=source_name(dict_file),
                hint="write a mapping key: value, or put the keys in the first column",
            )
        if matrix.col_labels is None:
            n = matrix.shape[1]
            matrix.col_labels = ["value"] if n == 1 else [f"d{j}" for j in range(n)]
        return matrix.row_labels, matrix
    assert keys is not None
    names = _split("--keys", keys)
    if values is None:
        return names, None
    numbers = []
    for text in _split("--values", values):
        number = parse_number(text)
        if number is None:
            raise UsageError(f"--values: {text!r} is not a number")
        numbers.append([number])
    if len(numbers) != len(names):
        raise UsageError(
            f"{plural(len(names), 'key')} but {plural(len(numbers), 'value')}", hint="give one value per key"
        )
    import numpy as np

    array = np.array(numbers)
    if not np.isfinite(array).all():
        raise UsageError("--values must be finite numbers")
    return names, Matrix(array, names, ["value"])


def _split(option: str, texts: list[str]) -> list[str]:
    """['a, b,c', 'd'] -> ['a', 'b', 'c', 'd']: every time the option is given
    adds its items; an empty item is a mistake worth naming."""
    result = []
    for text in texts:
        items = [item.strip() for item in text.split(",")]
        if not all(items):
            raise UsageError(f"{option} has an empty item in {text!r}", hint="separate items with single commas")
        result += items
    return result


@dataclass
class Embedding:
    """Where the vectors come from: a word-vector table or a sentence model."""

    name: str
    dim: int
    words: int | None  # the table's size; None for a model
    embed: Callable[[list[str], str], Embedded]  # (texts, what to do with unknown words) -> their vectors


def embedding(model: str | None, vectors: str | None, words_file: str | None, texts: list[str]) -> Embedding:
    """A sentence model given with --model, else word vectors (see ``word_vectors``)."""

    from attncli.cli.words import word_vectors

    if model is None:
        table = word_vectors(vectors, words_file, texts)
        return Embedding(table.name, table.dim, len(table), table.embed)
    if vectors is not None or words_file is not None:
        raise UsageError("give --model or --vectors, not both")
    from attncli.models import load_model, sentence_embeddings
    from attncli.vectors.table import Embedded

    loaded = load_model(model)
    return Embedding(
        f"{loaded.name} (sentence embeddings)",
        loaded.config.d_model,
        None,
        lambda texts, _: Embedded(sentence_embeddings(loaded, texts), list(range(len(texts))), []),
    )


def _result(
    queries: list[str],
    keys: list[str],
    value_matrix: Matrix | None,
    space: Embedding,
    steps: Steps,
    options: AttentionOptions,
    precision: int,
) -> Result:
    """JSON, one table per query (score, weight bar, value) and emittable matrices."""

    from rich.text import Text

    from attncli.cli.describe import attention_data, call_of, settings_line
    from attncli.output.render import lookup_table, stack
    from attncli.output.summary import SHOWN_TABLES, first_lines

    call = call_of(steps.weights.shape[:-1] + (space.dim,), steps.weights.shape[-1:] + (space.dim,))
    data = {
        "queries": queries,
        "keys": keys,
        "scores": steps.scores,
        "weights": steps.weights,
        **attention_data(options, call),
        "vectors": {"name": space.name, "words": space.words, "dim": space.dim},
    }
    matrices = {"weights": Emitted(steps.weights, queries, keys)}  # the first is written unless --emit says
    if value_matrix is not None:
        data["columns"] = value_matrix.col_labels
        data["output"] = steps.output
        matrices = {"output": Emitted(steps.output, queries, value_matrix.col_labels), **matrices}
    header = Text.assemble(
        ("lookup ", "bold"),
        f"{plural(len(queries), 'query', 'queries')} × {len(keys)} keys · "
        f"{space.name} ({f'{space.words:,} words, ' if space.words else ''}dim {space.dim})\n",
        settings_line(options, call, steps.allowed),
    )

    def view() -> Any:  # built only when shown: one table per query, the first SHOWN_TABLES of them
        shown, rest = first_lines(len(queries), SHOWN_TABLES, "queries")
        tables = [
            lookup_table(
                queries[i],
                keys,
                steps.scores[i],
                steps.weights[i],
                None if value_matrix is None else value_matrix,
                None if value_matrix is None else steps.output[i],
                precision=precision,
            )
            for i in shown
        ]
        return stack(header, *tables, rest)

    from attncli.output.maps import AttentionMaps

    maps = AttentionMaps.single(steps.weights, list(queries), list(keys), title=f"lookup in {space.name}")
    return Result(data, view, matrices, maps)


COMMAND = CommandSpec(lookup, EXAMPLES)
