"""RoPE's settings, checked when made: ``Rope`` (the style, θ, which features
turn, the first query's position) and ``RopeScaling`` (how a model stretches
RoPE past its trained context). The rotation itself is ``positions.py``'s."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Literal

from attncli.core.checks import check_positive, either, is_int, is_number
from attncli.errors import UsageError

RopeStyle = Literal["neox", "gptj"]
RopeFeatures = Literal["first", "last"]
RopeScalingKind = Literal["linear", "dynamic", "llama3", "yarn", "longrope"]

ROPE_STYLES: tuple[RopeStyle, ...] = ("neox", "gptj")
ROPE_FEATURES: tuple[RopeFeatures, ...] = ("first", "last")
ROPE_SCALINGS: tuple[RopeScalingKind, ...] = ("linear", "dynamic", "llama3", "yarn", "longrope")
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
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate"),
    ),
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
            raise UsageError(f"unknown rope scaling kind {self.kind!r}", hint="use " + either(ROPE_SCALINGS))
        needed, optional = SCALING_FIELDS[self.kind]
        for name in needed:
            if getattr(self, name) is None:
                raise UsageError(f"{self.kind} rope scaling needs {name}", hint=_HINTS.get(name))
        for name in (f.name for f in fields(self) if f.name != "kind"):
            if getattr(self, name) is not None and name not in needed + optional:
                raise UsageError(
                    f"{name} does not apply to {self.kind} rope scaling",
                    hint=f"{self.kind} takes {', '.join(needed + optional)}",
                )
        for name in _POSITIVE:
            _positive_number(name, getattr(self, name))
        length = self.original_max_position_embeddings
        if length is not None and (not is_int(length) or length < 1):
            raise UsageError(
                f"rope scaling's original_max_position_embeddings must be a positive whole number, got {length}"
            )
        if length is not None and length > MAX_POSITION:
            raise UsageError(
                f"rope scaling's original_max_position_embeddings {length} is past 2^32 ({MAX_POSITION:,})",
                hint="it is a context length; " + POSITION_HINT,
            )
        for name in ("mscale", "mscale_all_dim"):
            value = getattr(self, name)
            if value is not None and not (is_number(value) and math.isfinite(value) and value >= 0):
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
            raise UsageError(
                f"llama3 rope scaling's high_freq_factor ({self.high_freq_factor}) must be greater "
                f"than its low_freq_factor ({self.low_freq_factor})",
                hint="Llama 3.1 uses 4 and 1",
            )
        if self.kind == "yarn" and (self.beta_fast or 32.0) < (self.beta_slow or 1.0):
            raise UsageError(
                f"yarn rope scaling's beta_fast ({self.beta_fast or 32.0:g}) must be at least its "
                f"beta_slow ({self.beta_slow or 1.0:g})",
                hint="the defaults are 32 and 1",
            )
        if self.kind == "longrope" and self.factor is None and self.attention_factor is None:
            raise UsageError(
                "longrope rope scaling needs factor or attention_factor",
                hint="factor is max_position_embeddings / original_max_position_embeddings, "
                "e.g. 131072 / 4096 = 32 for Phi-3",
            )
        if (
            self.kind == "longrope"
            and self.attention_factor is None
            and self.factor > 1  # type: ignore[operator]
            and self.original_max_position_embeddings < 2  # type: ignore[operator]
        ):
            raise UsageError(
                "longrope rope scaling's original_max_position_embeddings must be at least 2 for "
                "its attention factor, √(1 + ln factor / ln original_max_position_embeddings)",
                hint="or give attention_factor",
            )
        if self.kind == "longrope" and len(self.short_factor or ()) != len(self.long_factor or ()):
            raise UsageError(
                f"longrope rope scaling's short_factor has {len(self.short_factor or ())} numbers "
                f"but its long_factor has {len(self.long_factor or ())}",
                hint="one of each per rotated pair",
            )


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
        if self.dim is not None and (not is_int(self.dim) or self.dim < 2 or self.dim % 2):
            raise UsageError(
                f"rope dim must be a positive even number, got {self.dim}", hint="features are rotated in pairs"
            )
        if self.offset is not None and not is_int(self.offset):
            raise UsageError(f"rope offset must be a whole number, got {self.offset}")
        if self.offset is not None and abs(self.offset) > MAX_POSITION:
            raise UsageError(f"rope offset {self.offset} is outside ±2^32 (±{MAX_POSITION:,})", hint=POSITION_HINT)
        if self.scaling is not None and not isinstance(self.scaling, RopeScaling):
            raise UsageError(
                f"rope scaling must be a RopeScaling, not {type(self.scaling).__name__}",
                hint="Rope(scaling=RopeScaling('linear', factor=2))",
            )
        if self.scaling is not None and self.scaling.kind == "yarn" and self.theta == 1:
            raise UsageError(
                "yarn rope scaling needs a rope theta other than 1",
                hint="it divides by ln theta to find the pairs to interpolate",
            )
        if self.features not in ROPE_FEATURES:
            raise UsageError(
                f"unknown rope features {self.features!r}",
                hint="use first or last (DeepSeek rotates the last qk_rope_head_dim)",
            )


def _positive_number(name: str, value: Any) -> None:
    """None passes (not given); anything else must be a finite number > 0."""
    if value is not None and not (is_number(value) and math.isfinite(value) and value > 0):
        raise UsageError(f"rope scaling's {name} must be a positive finite number, got {value!r}")


def _factors(name: str, values: Any) -> tuple[float, ...]:
    """longrope's short_factor or long_factor: a sequence of positive finite numbers, as a tuple."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise UsageError(f"rope scaling's {name} must be a list of numbers, got {values!r}", hint=_HINTS[name])
    values = tuple(values)
    if not values or not all(is_number(x) and math.isfinite(x) and x > 0 for x in values):
        raise UsageError(f"rope scaling's {name} must be a list of positive finite numbers", hint=_HINTS[name])
    return tuple(float(x) for x in values)
