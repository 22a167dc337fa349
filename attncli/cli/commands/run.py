"""``attn run``: attention on Q, K and V from files."""

from __future__ import annotations

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags, attention_options
from attncli.cli.command import CommandSpec
from attncli.cli.emit import Result
from attncli.cli.options import (
    FROM_READ_OPTIONS,
    BatchOption,
    FilesArgument,
    HeadOption,
    Layout,
    LayoutOption,
    PrecisionOption,
    ReadFlags,
    read_options,
)
from attncli.cli.outputs import FROM_OUTPUT_OPTIONS, OUTPUT_OR_WEIGHTS, OutputFlags, output_options
from attncli.cli.views import FROM_VIEW_OPTIONS, ViewFlags, view_options

EXAMPLES = """\b
Examples:
  attn run samples/q.csv samples/k.csv samples/v.csv
  attn run samples/colors.yaml               # one bundle: q, k, v
  cat q.csv | attn run - k.csv v.csv | jq .output
  attn run q.npy k.npy v.npy -f npy --emit weights > w.npy
  attn run q.csv k.csv v.csv --causal --scale 0.5 --mask mask.csv
  attn run q.npy k.npy v.npy --bias attn_mask.npy  # PyTorch's float attn_mask is added
  attn run q.csv k.csv v.csv --no-header           # a first row 0,1,… is data, not pandas' names
  attn run samples/colors.yaml --svg colors.svg --html colors.html
  attn run q.npy k.npy v.npy -f npy > out.npy      # (batch, heads, seq, dim), any rank
  attn run case.safetensors --rope neox --window 127,0 --softcap 50 -f safetensors > out.safetensors
  attn run q.npy k.npy v.npy --layout bshd --sinks sinks.npy --head 3
"""


@attention_options()
@read_options()
@view_options()
@output_options(**OUTPUT_OR_WEIGHTS)
def run(
    files: FilesArgument,
    attention: AttentionFlags = FROM_OPTIONS,
    reading: ReadFlags = FROM_READ_OPTIONS,
    layout: LayoutOption = Layout.bhsd,
    batch: BatchOption = None,
    head: HeadOption = None,
    out: OutputFlags = FROM_OUTPUT_OPTIONS,
    precision: PrecisionOption = 3,
    look: ViewFlags = FROM_VIEW_OPTIONS,
) -> Result:
    """Compute softmax(QKᵀ/√d_k)V on matrices or tensors from files.

    On a terminal: a heatmap of the weights (queries down, keys across) and the
    outputs, one of each per (batch, head) for tensors. In a pipe: one JSON
    object with queries, keys, weights, output and scale. Rows are vectors: Q
    is n_q×d_k, K is n_k×d_k, V is n_k×d_v; NPY, NPZ and safetensors tensors
    are (batch, heads, seq, dim), or with --layout bshd (batch, seq, heads, dim).
    """

    from attncli.cli.attend import every_step, output_only
    from attncli.cli.inputs import read_inputs
    from attncli.cli.run_result import output_matrix, run_result

    inputs = read_inputs(files, attention, reading.settings(), layout)
    if out.only_matrix("output"):
        # Only the output is written: the blocked kernel never holds the weights.
        return Result({}, None, {"output": output_matrix(inputs, output_only(inputs))})
    return run_result(inputs, every_step(inputs), precision, batch, head, look.style())


COMMAND = CommandSpec(run, EXAMPLES)
