"""AttentionOptions: every setting of one attention call, typed, in one place.

The core takes these; every command builds them (``attncli.cli.options``).
To add a setting: a field here, its step in ``logits.combine`` (the one
function that turns scores into logits), and one CLI option alias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:  # numpy is imported where arrays are checked: the CLI's help needs only the names
    import numpy as np

Similarity = Literal["dot", "cosine"]
CausalAlign = Literal["top-left", "bottom-right"]
# The Python API's ``causal=``: False, True (= "top-left"), or an alignment.
Causal = bool | CausalAlign

SIMILARITIES: tuple[Similarity, ...] = ("dot", "cosine")
CAUSAL_ALIGNS: tuple[CausalAlign, ...] = ("top-left", "bottom-right")


@dataclass(frozen=True, eq=False)
class AttentionOptions:
    """How the scores QKᵀ become weights; the defaults are plain softmax(QKᵀ/√d_k).

    logits = scale · q·k / temperature + bias, then −∞ wherever causal or the
    mask forbids the pair; weights = softmax(logits) along the keys.
    """

    scale: float | None = None  # multiplies q·k; None: 1/√d_k (1 for cosine)
    temperature: float = 1.0  # divides the scaled scores: > 1 flattens, < 1 sharpens
    similarity: Similarity = "dot"  # cosine: q and k made unit length first
    causal: CausalAlign | None = None  # None: every key; top-left: j ≤ i; bottom-right: j ≤ i + n_k − n_q
    mask: np.ndarray | None = None  # [..., n_q or 1, n_k or 1] bool, True where a query may attend
    bias: np.ndarray | None = None  # [..., n_q or 1, n_k or 1] float, added to the logits (−inf forbids)

    def __post_init__(self) -> None:
        check_positive("scale", self.scale)
        check_positive("temperature", self.temperature)
        if self.similarity not in SIMILARITIES:
            raise AttnError(f"unknown similarity {self.similarity!r}", hint="use dot or cosine")
        if self.causal is not None and self.causal not in CAUSAL_ALIGNS:
            raise AttnError(f"unknown causal alignment {self.causal!r}", hint="use top-left or bottom-right")
        if self.mask is not None:
            object.__setattr__(self, "mask", _boolean_mask(self.mask))
        if self.bias is not None:
            object.__setattr__(self, "bias", _additive_bias(self.bias))

    def scale_for(self, d_k: int) -> float:
        """The scale in force: the one given, else 1/√d_k for dot products (keeps
        their spread independent of d_k) and 1 for cosines, already in [−1, 1]."""
        if self.scale is not None:
            return float(self.scale)
        return 1.0 / math.sqrt(d_k) if self.similarity == "dot" else 1.0

    def but(self, **changes) -> AttentionOptions:
        """A copy with some settings changed."""
        return replace(self, **changes)

    @classmethod
    def from_keywords(
        cls,
        *,
        scale: float | None = None,
        temperature: float = 1.0,
        similarity: Similarity = "dot",
        causal: Causal | None = False,
        mask: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> AttentionOptions:
        """The keywords of the Python API (as in 0.1): ``causal`` may be True,
        and ``mask`` may be boolean, 0/1, or additive floats (see ``split_mask``)."""
        allowed, additive = split_mask(mask)
        if bias is not None:
            additive = bias if additive is None else additive + bias
        align = "top-left" if causal is True else (causal or None)
        return cls(scale, temperature, similarity, align, allowed, additive)


def check_positive(name: str, value: float | None) -> None:
    """None passes (a default applies); anything else must be finite and > 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{name} must be a positive finite number, got {value}")


def split_mask(mask: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Read a mask of the Python API as (allowed, bias).

    A boolean mask, or one whose cells are all 0 or 1, says where a query may
    attend (True/1 = may attend, as in PyTorch SDPA, JAX and Keras). Any other
    float mask is added to the scaled scores; −inf there forbids the pair.
    """
    import numpy as np

    if mask is None:
        return None, None
    mask = np.asarray(mask)
    if mask.dtype == bool:
        return mask, None
    if mask.dtype.kind not in "fiu":
        raise AttnError(f"a mask must hold numbers or booleans, not {mask.dtype}")
    if np.isnan(mask).any() or np.isposinf(mask).any():
        raise AttnError("a mask may hold -inf but not NaN or +inf")
    if np.isin(mask, (0, 1)).all():
        return mask.astype(bool), None
    finite = np.isfinite(mask)
    if finite.all():
        return None, mask
    return finite, np.where(finite, mask, 0.0)  # −inf forbids the pair, like False


def _boolean_mask(mask: np.ndarray) -> np.ndarray:
    import numpy as np

    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise AttnError(f"a mask must be boolean (True where a query may attend), not {mask.dtype}",
                        hint="an additive float mask is a bias")
    return mask


def _additive_bias(bias: np.ndarray) -> np.ndarray:
    import numpy as np

    bias = np.asarray(bias)
    if bias.dtype.kind not in "fiu":
        raise AttnError(f"a bias must hold numbers, not {bias.dtype}")
    if np.isnan(bias).any() or np.isposinf(bias).any():
        raise AttnError("a mask may hold -inf but not NaN or +inf")
    return bias
