"""The arrays the attention options name (--mask, --bias, --sinks, --alibi-slopes),
as read from their files or a bundle's entries (``OptionArrays``), and what
reading them decides: a mask's cells as booleans, a bias's −inf as the mask,
one number per head."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from attncli.errors import AttnError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class OptionArrays:
    """The arrays attention options name, as read from their files or a bundle's entries."""

    mask: np.ndarray | None = None  # bool, True where a query may attend
    bias: np.ndarray | None = None  # added to the scaled scores
    sinks: np.ndarray | None = None  # one logit per query head
    alibi_slopes: np.ndarray | None = None  # one slope per query head


ARRAY_OPTIONS = tuple(f.name for f in fields(OptionArrays))  # the options that name a file; in a bundle, entries


def mask_and_bias(arrays: OptionArrays) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The mask and bias as read, a bias's -inf moved into the mask (it forbids the pair)."""
    import numpy as np

    mask, bias = arrays.mask, arrays.bias
    if bias is not None and not np.isfinite(bias).all():
        finite = np.isfinite(bias)
        try:
            mask = finite if mask is None else mask & finite
            bias = np.where(finite, bias, 0.0)
        except ValueError:  # shapes that do not fit: the core names them
            pass
    return mask, bias


# How to give a mask's numbers as a bias instead, by where the mask came from.
AS_BIAS = {"file": "give the file as --bias FILE", "entry": "name the entry bias"}


def allowed_cells(values: np.ndarray, source: str, given_as: str) -> np.ndarray:
    """A mask as read (``given_as`` "file" or bundle "entry") -> bool [..., rows,
    cols] (any rank, as the mask is), True where a query may attend. A mask says
    where, never how much: a cell other than 0/1 (true/false) is refused, saying
    how to give it as a bias; a mask of numbers that are all 0 gets a note saying
    the same, as it is likely PyTorch's additive float mask (which 0 leaves unchanged)."""
    import numpy as np

    from attncli.cli.notes import note

    values = np.asarray(values)
    if values.dtype == bool:
        return values
    cells = np.isin(values, (0, 1))
    if not cells.all():
        other = float(values[~cells].flat[0])
        raise AttnError(
            f"the mask holds {other:g}, but a mask holds only 1 (may attend) and 0 (may not)",
            source=source,
            hint=f"to add numbers to the scores, {AS_BIAS[given_as]}",
        )
    if not values.any():
        note(
            f"the mask's cells are all 0, so no query may attend to any key; if it is PyTorch's float "
            f"attn_mask, which is added to the scores, {AS_BIAS[given_as]}",
            source,
        )
    return values.astype(bool)


def per_head(values: np.ndarray) -> np.ndarray:
    """One number per head, [H] or [..., H], from a matrix as read (a row [1, H] is [H])."""
    return values[0] if values.ndim == 2 and values.shape[0] == 1 else values
