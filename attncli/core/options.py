"""AttentionOptions: every setting of one attention call, typed, in one place.

The core takes these; every command builds them (``attncli.cli.options``).
To add a setting: a field here, its step in ``logits.combine`` (the one
function that turns scores into logits), and one CLI option alias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:  # numpy is imported where arrays are checked: the CLI's help needs only the names
    import numpy as np

Similarity = Literal["dot", "cosine"]
CausalAlign = Literal["top-left", "bottom-right"]
RopeStyle = Literal["neox", "gptj"]
RopeFeatures = Literal["first", "last"]
RopeScalingKind = Literal["linear", "dynamic", "llama3", "yarn", "longrope"]
# The Python API's ``causal=``: False, True (= "top-left"), or an alignment.
Causal = bool | CausalAlign

SIMILARITIES: tuple[Similarity, ...] = ("dot", "cosine")
CAUSAL_ALIGNS: tuple[CausalAlign, ...] = ("top-left", "bottom-right")
ROPE_STYLES: tuple[RopeStyle, ...] = ("neox", "gptj")
ROPE_FEATURES: tuple[RopeFeatures, ...] = ("first", "last")
ROPE_SCALINGS: tuple[RopeScalingKind, ...] = ("linear", "dynamic", "llama3", "yarn", "longrope")
UNBOUNDED = -1  # a window side of -1 has no limit (FlashAttention's window_size)
# The largest RoPE position (either sign). The angle position · theta^(−2i/dim) is rounded to float64, and
# the frequency before it: both err by about |position| · 2^−53 radians, under 1e-6 up to 2^32 and growing
# with the position (past 2^53 the position itself is not a float64). Models' contexts are far shorter.
MAX_POSITION = 2**32
POSITION_HINT = "float64 keeps RoPE angles within 1e-6 radians only up to position 2^32"


# Each kind of RoPE scaling: the fields it needs, then those it may take; any
# other field given is refused. The frequencies are worked out in
# ``positions.SCALINGS`` (one function per kind, as Hugging Face's
# ``ROPE_INIT_FUNCTIONS``).
SCALING_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "linear": (("factor",), ()),
    "dynamic": (("factor", "original_max_position_embeddings"), ()),
    "llama3": (("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"), ()),
    "yarn": (("factor", "original_max_position_embeddings"),
             ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate")),
    "longrope": (("original_max_position_embeddings", "short_factor", "long_factor"), ("factor", "attention_factor")),
}
_POSITIVE = ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "attention_factor")
_HINTS = {
    "factor": "how many times the context is stretched, e.g. 8 for Llama 3.1, 32 for gpt-oss",
    "original_max_position_embeddings": "the context length the model was trained at, e.g. 8192 for Llama 3.1",
    "low_freq_factor": "Llama 3.1 uses 1",
    "high_freq_factor": "Llama 3.1 uses 4",
    "short_factor": "one number per rotated pair, as in the config's rope_scaling",
    "long_factor": "one number per rotated pair, as in the config's rope_scaling",
}


@dataclass(frozen=True)
class RopeScaling:
    """How a model stretches RoPE past the context it was trained at:
    Hugging Face's ``rope_scaling`` (``rope_parameters``), one kind each.

    The inverse frequencies and the attention factor are worked out exactly as
    transformers' ``ROPE_INIT_FUNCTIONS`` do (``positions.rope_frequencies``);
    None means "not given" (the kind's default, or the field does not apply).

    - ``linear`` (factor): every frequency divided by factor.
    - ``dynamic`` (factor, original_max_position_embeddings, which Hugging Face
      reads from ``config.max_position_embeddings``): NTK-aware, θ raised for
      sequences longer than original_max_position_embeddings; depends on the
      sequence length L = the largest position + 1.
    - ``llama3`` (factor, original_max_position_embeddings, low_freq_factor,
      high_freq_factor): long wavelengths divided by factor, short ones kept,
      a smooth ramp between (Llama 3.1 / 3.2).
    - ``yarn`` (factor, original_max_position_embeddings; beta_fast 32,
      beta_slow 1, truncate True, and attention_factor or mscale and
      mscale_all_dim): frequencies ramped between interpolated and kept;
      cos and sin multiplied by the attention factor, by default
      0.1 ln(factor) + 1, or mscale's ratio when both mscale fields are
      given and non-zero (DeepSeek-V3). gpt-oss sets truncate False.
    - ``longrope`` (original_max_position_embeddings, short_factor,
      long_factor, and factor or attention_factor): each frequency divided by
      its own factor, the long ones when L > original_max_position_embeddings,
      else the short ones (Phi-3); attention factor by default
      √(1 + ln(factor) / ln(original_max_position_embeddings)).
    """

    kind: RopeScalingKind
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    low_freq_factor: float | None = None  # llama3
    high_freq_factor: float | None = None  # llama3
    beta_fast: float | None = None  # yarn; None: 32
    beta_slow: float | None = None  # yarn; None: 1
    mscale: float | None = None  # yarn (DeepSeek)
    mscale_all_dim: float | None = None  # yarn (DeepSeek)
    attention_factor: float | None = None  # yarn, longrope: multiplies cos and sin; None: the kind's default
    truncate: bool | None = None  # yarn: round the ramp's ends out to whole features; None: True
    short_factor: tuple[float, ...] | None = None  # longrope: [rope dim / 2]
    long_factor: tuple[float, ...] | None = None  # longrope: [rope dim / 2]

    def __post_init__(self) -> None:
        if self.kind not in SCALING_FIELDS:
            raise UsageError(f"unknown rope scaling kind {self.kind!r}", hint="use " + _either(ROPE_SCALINGS))
        needed, optional = SCALING_FIELDS[self.kind]
        for name in needed:
            if getattr(self, name) is None:
                raise UsageError(f"{self.kind} rope scaling needs {name}", hint=_HINTS.get(name))
        for name in (f.name for f in fields(self) if f.name != "kind"):
            if getattr(self, name) is not None and name not in needed + optional:
                raise UsageError(f"{name} does not apply to {self.kind} rope scaling",
                                 hint=f"{self.kind} takes {', '.join(needed + optional)}")
        for name in _POSITIVE:
            _positive_number(name, getattr(self, name))
        length = self.original_max_position_embeddings
        if length is not None and (not _is_int(length) or length < 1):
            raise UsageError(f"rope scaling's original_max_position_embeddings must be a positive whole number, "
                             f"got {length}")
        if length is not None and length > MAX_POSITION:
            raise UsageError(f"rope scaling's original_max_position_embeddings {length} is past 2^32 "
                             f"({MAX_POSITION:,})", hint="it is a context length; " + POSITION_HINT)
        for name in ("mscale", "mscale_all_dim"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and math.isfinite(value) and value >= 0):
                raise UsageError(f"rope scaling's {name} must be a finite number ≥ 0, got {value!r}")
        if self.truncate is not None and not isinstance(self.truncate, bool):
            raise UsageError(f"rope scaling's truncate must be true or false, got {self.truncate!r}")
        for name in ("short_factor", "long_factor"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _factors(name, getattr(self, name)))
        self._check_together()

    def _check_together(self) -> None:
        """What one field says about another."""
        if self.kind == "llama3" and self.high_freq_factor <= self.low_freq_factor:  # type: ignore[operator]
            raise UsageError(f"llama3 rope scaling's high_freq_factor ({self.high_freq_factor}) must be greater "
                             f"than its low_freq_factor ({self.low_freq_factor})", hint="Llama 3.1 uses 4 and 1")
        if self.kind == "yarn" and (self.beta_fast or 32.0) < (self.beta_slow or 1.0):
            raise UsageError(f"yarn rope scaling's beta_fast ({self.beta_fast or 32.0:g}) must be at least its "
                             f"beta_slow ({self.beta_slow or 1.0:g})", hint="the defaults are 32 and 1")
        if self.kind == "longrope" and self.factor is None and self.attention_factor is None:
            raise UsageError("longrope rope scaling needs factor or attention_factor",
                             hint="factor is max_position_embeddings / original_max_position_embeddings, "
                                  "e.g. 131072 / 4096 = 32 for Phi-3")
        if (self.kind == "longrope" and self.attention_factor is None and self.factor > 1  # type: ignore[operator]
                and self.original_max_position_embeddings < 2):  # type: ignore[operator]
            raise UsageError("longrope rope scaling's original_max_position_embeddings must be at least 2 for "
                             "its attention factor, √(1 + ln factor / ln original_max_position_embeddings)",
                             hint="or give attention_factor")
        if self.kind == "longrope" and len(self.short_factor or ()) != len(self.long_factor or ()):
            raise UsageError(f"longrope rope scaling's short_factor has {len(self.short_factor or ())} numbers "
                             f"but its long_factor has {len(self.long_factor or ())}",
                             hint="one of each per rotated pair")


@dataclass(frozen=True)
class Rope:
    """Rotary position embedding: Q and K rotated by their positions before q·k.

    Feature pairs of ``dim`` features of each head (the first ``dim``, or the
    last with ``features="last"``, as DeepSeek's MLA rotates its trailing
    ``qk_rope_head_dim``) turn by the angle position · inv_freq[i], with
    inv_freq[i] = theta^(−2i/dim), i = 0 .. dim/2 − 1, unless ``scaling``
    changes them (``RopeScaling``, which may also multiply cos and sin by an
    attention factor, as Hugging Face does). ``neox`` pairs feature i
    with i + dim/2 (``rotate_half``: Hugging Face LLaMA, GPT-NeoX); ``gptj``
    pairs 2i with 2i + 1 (GPT-J, Meta's complex form). Keys sit at positions
    0 .. n_k − 1; queries at offset + i, the offset defaulting to n_k − n_q
    (new tokens after cached ones). Positions stay within ±2^32
    (``MAX_POSITION``), where float64 angles are still within 1e-6 radians.
    """

    style: RopeStyle = "neox"
    theta: float = 10000.0  # the base of the frequencies
    dim: int | None = None  # rotate only ``dim`` features of each head (Pythia/NeoX, DeepSeek); None: all
    offset: int | None = None  # the position of the first query; None: n_k − n_q
    scaling: RopeScaling | None = None  # None: plain RoPE
    features: RopeFeatures = "first"  # which ``dim`` features turn: the first (Pythia/NeoX) or the last (DeepSeek)

    def __post_init__(self) -> None:
        if self.style not in ROPE_STYLES:
            raise UsageError(f"unknown rope style {self.style!r}", hint="use neox or gptj")
        check_positive("rope theta", self.theta)
        if self.dim is not None and (not _is_int(self.dim) or self.dim < 2 or self.dim % 2):
            raise UsageError(f"rope dim must be a positive even number, got {self.dim}",
                             hint="features are rotated in pairs")
        if self.offset is not None and not _is_int(self.offset):
            raise UsageError(f"rope offset must be a whole number, got {self.offset}")
        if self.offset is not None and abs(self.offset) > MAX_POSITION:
            raise UsageError(f"rope offset {self.offset} is outside ±2^32 (±{MAX_POSITION:,})", hint=POSITION_HINT)
        if self.scaling is not None and not isinstance(self.scaling, RopeScaling):
            raise UsageError(f"rope scaling must be a RopeScaling, not {type(self.scaling).__name__}",
                             hint="Rope(scaling=RopeScaling('linear', factor=2))")
        if self.scaling is not None and self.scaling.kind == "yarn" and self.theta == 1:
            raise UsageError("yarn rope scaling needs a rope theta other than 1",
                             hint="it divides by ln theta to find the pairs to interpolate")
        if self.features not in ROPE_FEATURES:
            raise UsageError(f"unknown rope features {self.features!r}",
                             hint="use first or last (DeepSeek rotates the last qk_rope_head_dim)")


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


def _is_number(value: Any) -> bool:
    import numbers

    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _either(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1]


def _positive_number(name: str, value: Any) -> None:
    """None passes (not given); anything else must be a finite number > 0."""
    if value is not None and not (_is_number(value) and math.isfinite(value) and value > 0):
        raise UsageError(f"rope scaling's {name} must be a positive finite number, got {value!r}")


def _factors(name: str, values: Any) -> tuple[float, ...]:
    """longrope's short_factor or long_factor: a sequence of positive finite numbers, as a tuple."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise UsageError(f"rope scaling's {name} must be a list of numbers, got {values!r}",
                         hint=_HINTS[name])
    values = tuple(values)
    if not values or not all(_is_number(x) and math.isfinite(x) and x > 0 for x in values):
        raise UsageError(f"rope scaling's {name} must be a list of positive finite numbers", hint=_HINTS[name])
    return tuple(float(x) for x in values)


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
