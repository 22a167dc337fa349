"""``--model PATH --layer N``: a layer's attention settings derived from its
model's config (``models.conventions``), the start that options typed on the
command line (or set by a bundle) replace, one part each.

``read_model`` reads the config once (a config.json, a folder holding one, or
a GGUF's metadata) into a ``FromModel``; ``with_derived`` (through
``AttentionFlags.build``) lays the options the user set over what was
derived; ``replaced`` says, for a note each, which derived value an option
replaced; ``check_tensors`` checks the head counts and sizes against Q, K, V;
``header`` and ``model_data`` are what a view's header and the JSON say.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnError, ShapeError, UsageError

if TYPE_CHECKING:
    import numpy as np

    from attncli.cli.attention import AttentionFlags
    from attncli.core.options import AttentionOptions
    from attncli.core.rope import Rope
    from attncli.models.conventions import LayerAttention


@dataclass(frozen=True)
class FromModel:
    """What --model derived for one layer, and from which file."""

    path: str  # as named on the command line
    source: str  # the file the settings came from: its config.json, or the .gguf
    attention: LayerAttention
    same_everywhere: bool  # every layer derives the same settings (--layer needs no choosing)

    @property
    def where(self) -> str:
        """'config.json (gemma2), layer 3' as a header says it."""
        la = self.attention
        layer = f"layer {la.layer}" + (" of the encoder" if la.encoder else "")
        return f"{self.source} ({la.model_type}), {layer}" + (" (every layer alike)" if self.same_everywhere else "")


# Each option (its AttentionFlags names) -> the setting --model derives that it replaces (Derived.setting).
REPLACES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "scale": (("scale",), ("scale",)),
    "causal": (("causal", "causal_align"), ("causal", "not causal")),
    "window": (("window",), ("window",)),
    "softcap": (("softcap",), ("soft-cap",)),
    "alibi": (("alibi", "alibi_slopes"), ("ALiBi",)),
    "rope": (("rope", "rope_theta", "rope_dim", "rope_features", "rope_offset"), ("RoPE",)),
    "rope_scaling": (("rope_scaling",), ("RoPE scaling",)),
}
FLAG = {name: "--" + name.replace("_", "-") for _, (names, _) in REPLACES.items() for name in names}


def read_model(path: str, layer: int | None) -> FromModel:
    """The settings ``path``'s config gives layer ``layer`` (None: any layer, when all are alike)."""
    from attncli.models.conventions import convention_for
    from attncli.models.loading import read_model_fields

    fields = read_model_fields(path)
    try:
        convention = convention_for(fields)
    except AttnError as e:
        raise AttnError(
            e.message,
            source=e.source,
            hint=f"{e.hint}; without --model, the options (--scale, --causal, --rope, --window…) still work",
        ) from None
    n_layer = convention.shape(fields).n_layer
    if layer is not None and layer >= n_layer:
        raise UsageError(
            f"--layer {layer} is out of range: {fields.source} has {n_layer} layers",
            hint=f"give a layer from 0 to {n_layer - 1}",
        )
    every = [convention.layer(fields, i) for i in range(n_layer)] if layer is None else []
    if layer is None and any(la.describe() != every[0].describe() for la in every):
        settings = {d.setting: None for la in every for d in la.derived}
        differ = [s for s in settings if len({str(_setting(la, s)) for la in every}) > 1]
        raise UsageError(
            f"{fields.source}'s {n_layer} layers differ in {' and '.join(differ)}: give --layer N",
            hint=f"a layer from 0 to {n_layer - 1}",
        )
    attention = every[0] if layer is None else convention.layer(fields, layer)
    return FromModel(path, fields.source or path, attention, layer is None and n_layer > 1)


def _setting(la: LayerAttention, setting: str) -> Any:
    """What layer ``la`` derives for ``setting`` (None: nothing)."""
    return next((d.value for d in la.derived if d.setting == setting), None)


def with_derived(flags: AttentionFlags, options: AttentionOptions) -> AttentionOptions:
    """``options`` (the user's) with what --model derived for every setting the user did not set.
    RoPE is laid over already (``rope_from``); the arrays a family needs must be given."""
    assert flags.derived is not None
    la = flags.derived.attention
    base, typed = la.options, flags.typed
    changes: dict[str, Any] = {}
    for setting, (names, _) in REPLACES.items():
        if setting.startswith("rope") or typed & set(names):
            continue
        if setting == "alibi":
            changes["alibi"], changes["alibi_slopes"] = base.alibi, base.alibi_slopes
        else:
            changes[setting] = getattr(base, setting)
    for need in la.needs:
        if getattr(options, need.option) is None:
            raise UsageError(
                f"{flags.derived.source}: {need.what}: give it with --{need.option} FILE",
                hint=f"the model's {need.where.format(layer=la.layer)}",
            )
    return options.but(**changes)


def replaced(flags: AttentionFlags) -> list[str]:
    """'--scale 0.1 replaces scale 1/√256 (query_pre_attn_scalar)': one line for each derived
    setting an option set by the user replaced."""
    if flags.derived is None:
        return []
    derived = {d.setting: d for d in flags.derived.attention.derived}
    lines = []
    for names, settings in REPLACES.values():
        chosen = [name for name in names if name in flags.typed]
        before = [str(derived[s]) for s in settings if s in derived]
        if chosen and before:
            shown = ", ".join(_typed(flags, name) for name in chosen)
            lines.append(f"{shown} replaces the derived {' and '.join(before)}")
    return lines


def _typed(flags: AttentionFlags, name: str) -> str:
    """An option as the user set it: '--scale 0.1', '--no-causal', '--rope none'."""
    value = getattr(flags, name)
    flag = FLAG[name]
    if isinstance(value, bool):
        return flag if value else "--no-" + flag[2:]
    if value is None:
        return f"{flag} none"
    if isinstance(value, tuple):
        return f"{flag} {','.join(map(str, value))}"
    text = getattr(value, "value", None) or getattr(value, "kind", None) or value
    return f"{flag} {text:g}" if isinstance(text, float) else f"{flag} {text}"


def check_tensors(flags: AttentionFlags, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Q, K and V [..., heads, n, d] against the heads the config gives, and Q and K's rows
    against its head size (which its scale may come from); a matrix is one head, so only its
    size is checked. Each mismatch is one line naming both."""
    if flags.derived is None:
        return
    shape, source = flags.derived.attention.shape, flags.derived.source
    for name, x, heads, field in (
        ("Q", q, shape.n_head, shape.heads_field),
        ("K", k, shape.n_kv_head, shape.kv_heads_field),
        ("V", v, shape.n_kv_head, shape.kv_heads_field),
    ):
        if x.ndim > 2 and x.shape[-3] not in (heads, shape.n_head):  # K/V may come repeated to every query head
            raise ShapeError(
                f"{name} has {x.shape[-3]} heads but {source} gives {heads} ({field})",
                hint="the tensors of that model's layer, [batch, heads, seq, dim]; or another --model",
            )
    for name, x, size, field in (
        ("Q", q, shape.head_dim, shape.head_dim_field),
        ("K", k, shape.head_dim, shape.head_dim_field),
    ):
        if x.shape[-1] != size:
            raise ShapeError(
                f"{name}'s rows have {x.shape[-1]} features but {source} gives a head {size} wide ({field})",
                hint="one head's features per row; or another --model",
            )
    options = flags.derived.attention.options
    if q.ndim == 2 and shape.n_head > 1 and (options.alibi_slopes is not None or flags.derived.attention.needs):
        raise ShapeError(
            f"Q is one head, but the model's settings are per head ({shape.n_head} of them)",
            hint="give Q, K and V with their heads axis, [batch, heads, seq, dim]",
        )


def header(flags: AttentionFlags) -> str | None:
    """'from config.json (gemma2), layer 3: scale 1/√256 (query_pre_attn_scalar), …' for a view's header."""
    if flags.derived is None:
        return None
    return f"from {flags.derived.where}: {flags.derived.attention.describe()}"


def model_line(flags: AttentionFlags) -> str:
    """The header's line of what --model derived ('' without --model), after the settings line."""
    line = header(flags)
    return "" if line is None else "\n" + line


def model_data(flags: AttentionFlags) -> dict[str, Any]:
    """The JSON of what --model derived: the model, the layer, each setting and its field, what was replaced."""
    if flags.derived is None:
        return {}
    la = flags.derived.attention
    return {
        "model": {
            "path": flags.derived.path,
            "config": flags.derived.source,
            "model_type": la.model_type,
            "family": la.name,
            "layer": la.layer,
            "every_layer_alike": flags.derived.same_everywhere,
            "layer_type": la.layer_type,
            "derived": [{"setting": d.setting, "value": d.value, "from": d.field} for d in la.derived],
            "replaced": replaced(flags),
        }
    }


def rope_from(flags: AttentionFlags, derived: Rope | None) -> Rope | None:
    """RoPE from --rope and its options, over the RoPE --model derived (each option
    given replaces its part; --rope none turns it off)."""
    from attncli.core.rope import Rope

    parts = {
        "theta": ("rope_theta", flags.rope_theta, flags.rope_theta != 10000.0),
        "dim": ("rope_dim", flags.rope_dim, flags.rope_dim is not None),
        "offset": ("rope_offset", flags.rope_offset, flags.rope_offset is not None),
        "scaling": ("rope_scaling", flags.rope_scaling, flags.rope_scaling is not None),
        "features": (
            "rope_features",
            None if flags.rope_features is None else flags.rope_features.value,
            flags.rope_features is not None,
        ),
    }
    chosen: dict[str, Any] = {
        part: value
        for part, (name, value, changed) in parts.items()
        if (name in flags.typed if flags.derived else changed)
    }
    style = None if flags.rope is None else flags.rope.value
    if style == "none" or (style is None and derived is None):
        if chosen:
            name = parts[next(iter(chosen))][0]
            raise UsageError(f"--{name.replace('_', '-')} goes with --rope", hint="add --rope neox or --rope gptj")
        return None
    if derived is not None:
        return replace(derived, **({"style": style} if style else {}), **chosen)
    if chosen.get("features") is None:
        chosen.pop("features", None)
    return Rope(style, **chosen)  # type: ignore[arg-type]
