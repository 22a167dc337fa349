"""AttentionOptions: every setting of one attention call, typed, in one place.

The core takes these; every command builds them (``attncli.cli.options``).
To add a setting: a field here, its step in ``logits.combine`` (the one
function that turns scores into logits), and one CLI option alias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:  # numpy is imported where arrays are checked: the CLI's help needs only the names
    import numpy as np

Similarity = Literal["dot", "cosine"]
CausalAlign = Literal["top-left", "bottom-right"]
RopeStyle = Literal["neox", "gptj"]
# The Python API's ``causal=``: False, True (= "top-left"), or an alignment.
Causal = bool | CausalAlign

SIMILARITIES: tuple[Similarity, ...] = ("dot", "cosine")
CAUSAL_ALIGNS: tuple[CausalAlign, ...] = ("top-left", "bottom-right")
ROPE_STYLES: tuple[RopeStyle, ...] = ("neox", "gptj")
UNBOUNDED = -1  # a window side of -1 has no limit (FlashAttention's window_size)


@dataclass(frozen=True)
class Rope:
    """Rotary position embedding: Q and K rotated by their positions before q·k.

    Feature pairs of the first ``dim`` features of each head turn by the angle
    position · theta^(−2i/dim), i = 0 .. dim/2 − 1. ``neox`` pairs feature i
    with i + dim/2 (``rotate_half``: Hugging Face LLaMA, GPT-NeoX); ``gptj``
    pairs 2i with 2i + 1 (GPT-J, Meta's complex form). Keys sit at positions
    0 .. n_k − 1; queries at offset + i, the offset defaulting to n_k − n_q
    (new tokens after cached ones).
    """

    style: RopeStyle = "neox"
    theta: float = 10000.0  # the base of the frequencies
    dim: int | None = None  # rotate only the first ``dim`` features of each head (Pythia/NeoX); None: all
    offset: int | None = None  # the position of the first query; None: n_k − n_q

    def __post_init__(self) -> None:
        if self.style not in ROPE_STYLES:
            raise UsageError(f"unknown rope style {self.style!r}", hint="use neox or gptj")
        check_positive("rope theta", self.theta)
        if self.dim is not None and (not _is_int(self.dim) or self.dim < 2 or self.dim % 2):
            raise UsageError(f"rope dim must be a positive even number, got {self.dim}",
                             hint="features are rotated in pairs")
        if self.offset is not None and not _is_int(self.offset):
            raise UsageError(f"rope offset must be a whole number, got {self.offset}")


@dataclass(frozen=True, eq=False)
class AttentionOptions:
    """How the scores QKᵀ become weights; the defaults are plain softmax(QKᵀ/√d_k).

    In this order (``logits.combine``)::

        logits  = softcap(scale · q·k / temperature) + bias + ALiBi    (q, k rotated first with RoPE)
        logits  = −∞ wherever causal, the window or the mask forbids the pair
        weights = exp(logits) / (Σ exp(logits) + exp(sink))           along the keys

    A query that may attend to nothing gets zero weights and a zero output.
    Heads are axis −3 of [..., heads, n, d]; K and V may have fewer heads than
    Q when they divide Q's (grouped-query attention).
    """

    scale: float | None = None  # multiplies q·k; None: 1/√d_k (1 for cosine)
    temperature: float = 1.0  # divides the scaled scores: > 1 flattens, < 1 sharpens
    similarity: Similarity = "dot"  # cosine: q and k made unit length first
    causal: CausalAlign | None = None  # None: every key; top-left: j ≤ i; bottom-right: j ≤ i + n_k − n_q
    mask: np.ndarray | None = None  # [..., n_q or 1, n_k or 1] bool, True where a query may attend
    bias: np.ndarray | None = None  # [..., n_q or 1, n_k or 1] float, added to the logits (−inf forbids)
    softcap: float | None = None  # logits = softcap · tanh(logits / softcap) before the bias (Gemma 2); None: off
    window: tuple[int, int] | None = None  # (left, right): FlashAttention's window_size, −1 unbounded
    alibi: bool = False  # ALiBi with the standard slopes for the number of query heads
    alibi_slopes: np.ndarray | None = None  # [H] or [..., H] one slope per query head; implies ALiBi
    rope: Rope | None = None  # rotate Q and K by position before the product
    sinks: np.ndarray | None = None  # [H] or [..., H] one logit per query head that joins each row's softmax

    def __post_init__(self) -> None:
        check_positive("scale", self.scale)
        check_positive("temperature", self.temperature)
        if not math.isfinite((self.scale or 1.0) / self.temperature):  # the default scale 1/√d_k ≤ 1
            raise UsageError(f"temperature {self.temperature} is too small: scale / temperature overflows",
                             hint="use a larger temperature (or a smaller scale)")
        if self.similarity not in SIMILARITIES:
            raise AttnError(f"unknown similarity {self.similarity!r}", hint="use dot or cosine")
        if self.causal is not None and self.causal not in CAUSAL_ALIGNS:
            raise AttnError(f"unknown causal alignment {self.causal!r}", hint="use top-left or bottom-right")
        if self.mask is not None:
            object.__setattr__(self, "mask", _boolean_mask(self.mask))
        if self.bias is not None:
            object.__setattr__(self, "bias", _additive_bias(self.bias))
        check_positive("softcap", self.softcap)
        if self.window is not None:
            object.__setattr__(self, "window", _window(self.window))
        if self.alibi_slopes is not None:
            object.__setattr__(self, "alibi_slopes", _per_head("ALiBi slopes", self.alibi_slopes))
        if self.sinks is not None:
            object.__setattr__(self, "sinks", _per_head("sinks", self.sinks))
        if self.rope is not None and not isinstance(self.rope, Rope):
            raise UsageError(f"rope must be a Rope, not {type(self.rope).__name__}",
                             hint="AttentionOptions(rope=Rope('neox'))")

    @property
    def uses_alibi(self) -> bool:
        return self.alibi or self.alibi_slopes is not None

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
        **variants: Any,
    ) -> AttentionOptions:
        """The keywords of the Python API (as in 0.1): ``causal`` may be True,
        and ``mask`` may be boolean, 0/1, or additive floats (see ``split_mask``).
        The variants (softcap, window, alibi, alibi_slopes, rope, sinks) are
        keywords too; ``rope`` may be a style name ("neox", "gptj")."""
        unknown = sorted(set(variants) - VARIANTS)
        if unknown:
            known = ["scale", "temperature", "similarity", "causal", "mask", "bias", *sorted(VARIANTS)]
            raise UsageError(f"unknown attention keyword {unknown[0]!r}", hint="use " + ", ".join(known))
        allowed, additive = split_mask(mask)
        if bias is not None:
            additive = bias if additive is None else additive + bias
        align = "top-left" if causal is True else (causal or None)
        if isinstance(variants.get("rope"), str):
            variants["rope"] = Rope(variants["rope"])
        return cls(scale, temperature, similarity, align, allowed, additive, **variants)


VARIANTS = frozenset({"softcap", "window", "alibi", "alibi_slopes", "rope", "sinks"})


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


def _is_int(value: Any) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _window(window: Any) -> tuple[int, int]:
    """(left, right), each a whole number ≥ −1 (−1: unbounded on that side)."""
    try:
        left, right = window
    except (TypeError, ValueError):
        raise UsageError(f"a window is (left, right), got {window!r}") from None
    for side, n in (("left", left), ("right", right)):
        if not _is_int(n) or n < UNBOUNDED:
            raise UsageError(f"the window's {side} side must be a whole number ≥ -1, got {n}",
                             hint="-1 means unbounded on that side")
    return int(left), int(right)


def _per_head(what: str, values: Any) -> np.ndarray:
    """One finite number per query head: [H] or [..., H] (a scalar is [1])."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype.kind not in "fiu" and values.dtype.name != "bfloat16":
        raise AttnError(f"{what} must hold numbers, not {values.dtype}")
    values = np.atleast_1d(values.astype(np.float64) if values.dtype.kind in "iu" else values)
    if not np.isfinite(values.astype(np.float64)).all():
        raise AttnError(f"{what} must be finite numbers")
    return values
