"""AttentionOptions: every setting of one attention call, typed, in one place,
and how each is said (``SAYINGS``: its words in a header, its JSON field, its
sentence in ``attn explain``).

The core takes these; every command builds them (``attncli.cli.attention``).
To add a setting: a field here and its saying, its step in ``logits.combine``
(the one function that turns scores into logits), and one field of the
CLI's ``AttentionFlags``. RoPE's own settings are ``rope.py``'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from attncli.core.checks import UNBOUNDED, check_positive, is_int
from attncli.core.rope import Rope
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
            raise UsageError(
                f"temperature {self.temperature} is too small: scale / temperature overflows",
                hint="use a larger temperature (or a smaller scale)",
            )
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
            raise UsageError(
                f"rope must be a Rope, not {type(self.rope).__name__}", hint="AttentionOptions(rope=Rope('neox'))"
            )

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


def split_mask(mask: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Read a mask of the Python API as (allowed, bias).

    A boolean mask, or one whose cells are all 0 or 1, says where a query may
    attend (True/1 = may attend, as in PyTorch SDPA, JAX and Keras). Any other
    float mask is added to the scaled scores; −inf there forbids the pair.
    """
    import numpy as np

    if mask is None:
        return None, None
    mask = _numbers(mask)
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
        raise AttnError(
            f"a mask must be boolean (True where a query may attend), not {mask.dtype}",
            hint="an additive float mask is a bias",
        )
    return mask


def _additive_bias(bias: np.ndarray) -> np.ndarray:
    import numpy as np

    bias = _numbers(bias)
    if bias.dtype.kind not in "fiu":
        raise AttnError(f"a bias must hold numbers, not {bias.dtype}")
    if np.isnan(bias).any() or np.isposinf(bias).any():
        raise AttnError("a mask may hold -inf but not NaN or +inf")
    return bias


def _numbers(values: Any) -> np.ndarray:
    """An option's array; bfloat16 (ml_dtypes', as a model's files hold it) as float32, which holds
    each value exactly and is what bfloat16 computes in."""
    import numpy as np

    from attncli.core.arrays import is_bfloat16

    values = np.asarray(values)
    return values.astype(np.float32) if is_bfloat16(values.dtype) else values


def _window(window: Any) -> tuple[int, int]:
    """(left, right), each a whole number ≥ −1 (−1: unbounded on that side)."""
    try:
        left, right = window
    except (TypeError, ValueError):
        raise UsageError(f"a window is (left, right), got {window!r}") from None
    for side, n in (("left", left), ("right", right)):
        if not is_int(n) or n < UNBOUNDED:
            raise UsageError(
                f"the window's {side} side must be a whole number ≥ -1, got {n}", hint="-1 means unbounded on that side"
            )
    return int(left), int(right)


def _per_head(what: str, values: Any) -> np.ndarray:
    """One finite number per query head: [H] or [..., H] (a scalar is [1])."""
    import numpy as np

    values = _numbers(values)
    if values.dtype.kind not in "fiu":
        raise AttnError(f"{what} must hold numbers, not {values.dtype}")
    values = np.atleast_1d(values.astype(np.float64) if values.dtype.kind in "iu" else values)
    if not np.isfinite(values).all():
        raise AttnError(f"{what} must be finite numbers")
    return values


# --- how each setting is said: in a header, in JSON, in attn explain ----------------------------------


@dataclass(frozen=True)
class Call:
    """What saying a setting needs to know of the call it is in."""

    d_k: int  # a head's width
    n_q: int = 1
    n_k: int = 1
    heads: int = 1  # query heads


@dataclass(frozen=True)
class Said:
    """One setting as attn says it: its JSON field and value (None: not in
    JSON), its words in a header (None: not named there) and its sentence in
    explain (None: none)."""

    field: str
    data: Any
    words: str | None = None
    explain: str | None = None


def said(options: AttentionOptions, call: Call) -> list[Said]:
    """Every setting in force, in the order it acts (``SAYINGS``)."""
    return [s for say in SAYINGS if (s := say(options, call)) is not None]


def _say_scale(o: AttentionOptions, c: Call) -> Said:
    scale = o.scale_for(c.d_k)
    if o.scale is not None:
        return Said("scale", scale, f"scale {scale:g}", f"The scores are multiplied by {scale:g}, the scale given.")
    if o.similarity == "cosine":
        return Said(
            "scale",
            scale,
            "cosine similarity · scale 1",
            "Cosine similarities are already between −1 and 1, so they are not scaled (scale 1).",
        )
    return Said(
        "scale",
        scale,
        f"scale 1/√{c.d_k} = {scale:.4g}",
        f"The scores are multiplied by 1/√d_k = 1/√{c.d_k} = {scale:.4g}: the more numbers a dot product "
        "adds up (d_k of them), the wider its values spread, and scaling keeps softmax from piling all "
        "the weight on one key.",
    )


def _say_temperature(o: AttentionOptions, c: Call) -> Said:
    t = o.temperature
    return Said(
        "temperature",
        t,
        None if t == 1 else f"temperature {t:g}",
        None
        if t == 1
        else f"Then they are divided by the temperature {t:g}, which {'flattens' if t > 1 else 'sharpens'} "
        "the weights.",
    )


def _say_similarity(o: AttentionOptions, c: Call) -> Said:
    return Said("similarity", o.similarity)


def _say_rope(o: AttentionOptions, c: Call) -> Said | None:
    rope = o.rope
    if rope is None:
        return None
    dim = rope.dim or c.d_k
    start = c.n_k - c.n_q if rope.offset is None else rope.offset
    extra = (
        [f"θ {rope.theta:g}"]
        + ([f"{rope.features} {rope.dim} dims"] if rope.dim else [])
        + ([f"queries from position {rope.offset}"] if rope.offset is not None else [])
        + ([f"{rope.scaling.kind} scaling"] if rope.scaling is not None else [])
    )
    pairs = (
        f"feature i with feature i + {dim // 2} (rotate_half)"
        if rope.style == "neox"
        else "features 2i and 2i + 1 (interleaved)"
    )
    turned = "the first" if rope.features == "first" else "the last"
    rest = f" Only {turned} {dim} of the {c.d_k} features turn." if dim < c.d_k else ""
    scaled = (
        ""
        if rope.scaling is None
        else (
            f" The frequencies are {rope.scaling.kind}-scaled (factor {rope.scaling.factor:g})."
            if rope.scaling.factor is not None
            else f" The frequencies are {rope.scaling.kind}-scaled."
        )
    )
    data: dict[str, Any] = {"style": rope.style, "theta": rope.theta, "dim": rope.dim, "offset": rope.offset}
    if rope.features != "first":
        data["features"] = rope.features
    if rope.scaling is not None:
        data["scaling"] = {k: v for k, v in vars(rope.scaling).items() if v is not None}
    return Said(
        "rope",
        data,
        f"RoPE {rope.style} ({', '.join(extra)})",
        f"Each pair of features turns by the angle position · {rope.theta:g}^(−2i/{dim}); {rope.style} "
        f"pairs {pairs}.{rest}{scaled} Keys sit at positions 0 to {c.n_k - 1}, queries at {start} to "
        f"{start + c.n_q - 1}, so a score depends on how far apart the two are.",
    )


def _say_softcap(o: AttentionOptions, c: Call) -> Said | None:
    cap = o.softcap
    if cap is None:
        return None
    return Said(
        "softcap",
        cap,
        f"softcap {cap:g}",
        f"Each scaled score x becomes {cap:g} · tanh(x / {cap:g}): "
        f"about x when small, never beyond ±{cap:g} (Gemma 2).",
    )


def _say_alibi(o: AttentionOptions, c: Call) -> Said | None:
    if not o.uses_alibi:
        return None
    from attncli.core.positions import alibi_slopes

    slopes = alibi_slopes(c.heads) if o.alibi_slopes is None else o.alibi_slopes
    return Said(
        "alibi_slopes",
        slopes,
        "ALiBi" + (" (own slopes)" if o.alibi_slopes is not None else ""),
        "ALiBi adds −m·|i + n_k − n_q − j| to each score: the farther the key from the query, the lower "
        "its score (m is this head's slope).",
    )


def _say_window(o: AttentionOptions, c: Call) -> Said | None:
    if o.window is None:
        return None
    from attncli.core.positions import band

    left, right = o.window
    lo, hi = band(c.n_q, c.n_k, None, o.window)  # a side past every key is open

    def end(bound: int | None, open_end: str) -> str:
        return open_end if bound is None else "i" if bound == 0 else f"i {'+' if bound > 0 else '−'} {abs(bound)}"

    return Said(
        "window",
        list(o.window),
        f"window {left},{right}",
        f"The window ({left},{right}) lets query i see keys {end(lo, '0')} to {end(hi, 'the last')}.",
    )


def _say_causal(o: AttentionOptions, c: Call) -> Said:
    return Said(
        "causal",
        o.causal or False,
        None if o.causal is None else f"causal ({o.causal})",
        None if o.causal is None else "Causal: each query sees only the keys up to its own position.",
    )


def _say_bias(o: AttentionOptions, c: Call) -> Said | None:
    return (
        None
        if o.bias is None
        else Said("bias", None, None, "The bias adds its numbers to the scaled scores; −∞ there forbids a pair too.")
    )


def _say_sinks(o: AttentionOptions, c: Call) -> Said | None:
    return (
        None
        if o.sinks is None
        else Said(
            "sinks",
            o.sinks,
            "sinks",
            "Softmax turns each row into weights e^x / (Σ e^x + e^s), where s is the head's "
            "sink: a logit with no key and no value that takes its share of the denominator (gpt-oss). So each row "
            "sums to less than 1, and a query that finds no good key can give little weight to all of them.",
        )
    )


# Each setting's saying, in the order the settings act (the order of ``logits.combine``).
SAYINGS: tuple[Callable[[AttentionOptions, Call], Said | None], ...] = (
    _say_scale,
    _say_temperature,
    _say_similarity,
    _say_rope,
    _say_softcap,
    _say_bias,
    _say_alibi,
    _say_window,
    _say_causal,
    _say_sinks,
)
