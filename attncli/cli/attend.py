"""Attention on the inputs read: every step (the reference, which views and
explain show), or the output alone (the blocked kernel, which never holds the
weights); the guard-rails' notes on either."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from attncli.cli.io import progress_bar

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.inputs import Inputs
    from attncli.core.reference import Steps


def every_step(inputs: Inputs) -> Steps:
    """Every step, from the reference; the guard-rails' notes on the weights."""
    from attncli.cli.guards import check_attention
    from attncli.core.reference import reference

    steps = reference(inputs.q.values, inputs.k.values, inputs.v.values, inputs.options)
    colours = not inputs.tensors and (inputs.query_colours is not None or inputs.key_colours is not None)
    check_attention(
        inputs.options, inputs.queries, inputs.k.shape[-2], steps, math.prod(steps.weights.shape[:-2]), colours
    )
    return steps


def output_only(inputs: Inputs) -> np.ndarray:
    """The output alone, from the blocked kernel, with a progress bar on a terminal
    (and the notes that need no weights: queries that may attend to nothing)."""
    from attncli.cli.guards import check_attention
    from attncli.core.kernel import blocked

    with progress_bar("attention") as progress:
        output = blocked(inputs.q.values, inputs.k.values, inputs.v.values, inputs.options, progress=progress)
    check_attention(inputs.options, inputs.queries, inputs.k.shape[-2])
    return output
