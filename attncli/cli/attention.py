"""The attention options, declared once: each is one field of ``AttentionFlags``
holding its ``Annotated`` alias (flag, help, type, limits). ``@attention_options()``
gives a command those options, gathered into its parameter ``attention``; a
bundle may set the same ones under the same names (``cli/settings.py``); and
``AttentionFlags.build`` makes the core's ``AttentionOptions`` from them and
the arrays already read (``OptionArrays``), with no reading of its own.

A new option whose core field has the same name is one field here: it is a
flag of every attention command, a bundle setting, and passed to the core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.option_arrays import ARRAY_OPTIONS, OptionArrays, mask_and_bias
from attncli.cli.paths import READS, READS_CONFIG
from attncli.cli.values import ValueParser, rope_scaling_value, window_sides
from attncli.core.options import CAUSAL_ALIGNS, SIMILARITIES
from attncli.core.rope import ROPE_FEATURES, ROPE_STYLES
from attncli.errors import AttnError, UsageError

if TYPE_CHECKING:
    from attncli.cli.model_options import FromModel
    from attncli.cli.settings import BundleSettings
    from attncli.core.options import AttentionOptions, CausalAlign
    from attncli.core.rope import RopeScaling

# The choices Typer offers, made from the core's own names (one Similarity, one alignment).
Similarity = Enum("Similarity", {name: name for name in SIMILARITIES}, type=str)  # type: ignore[misc]
Align = Enum("Align", {name.replace("-", "_"): name for name in CAUSAL_ALIGNS}, type=str)  # type: ignore[misc]
# --rope: the core's styles, and none (Q and K already rotated: turns off a RoPE --model derives).
RopeStyle = Enum("RopeStyle", {**{name: name for name in ROPE_STYLES}, "none": "none"}, type=str)  # type: ignore[misc]
RopeFeatures = Enum("RopeFeatures", {name: name for name in ROPE_FEATURES}, type=str)  # type: ignore[misc]


TemperatureOption = Annotated[
    float,
    typer.Option(  # softmax's too
        "--temperature",
        "-t",
        metavar="T",
        help="Divide the scores by this before softmax: above 1 flattens the weights, below 1 sharpens them.",
    ),
]


def option(alias: Any, default: Any = None) -> Any:
    """A field of AttentionFlags: its default, and the alias its flag is declared by."""
    return field(default=default, metadata={"alias": alias})


@dataclass(frozen=True)
class AttentionFlags:
    """The attention options as typed on the command line (and, through
    ``with_settings``, a bundle's settings), in the order help shows them."""

    model: str | None = option(
        Annotated[
            str | None,
            typer.Option(
                "--model",
                metavar="PATH",
                show_default=False,
                help="Take the attention settings of a model's layer from its config: a config.json, a folder "
                "holding one, or a .gguf file (its metadata). Scale, causal, window, soft-cap, RoPE (style, θ, "
                "features, scaling), ALiBi as that family does them; an option typed as well wins.",
            ),
            READS_CONFIG,
        ]
    )
    layer: int | None = option(
        Annotated[
            int | None,
            typer.Option(
                "--layer",
                min=0,
                metavar="N",
                show_default=False,
                help="With --model: the layer (from 0) whose settings apply. Needed when its layers differ.",
            ),
        ]
    )
    mask: str | None = option(
        Annotated[
            str | None,
            typer.Option(
                "--mask",
                metavar="FILE",
                help="Which keys each query may attend to: an n_q×n_k (or 1×n_k) matrix of booleans, or of "
                "0/1 or true/false cells: 1 = may attend. Numbers to add to the scores go in --bias.",
            ),
            READS,
        ]
    )
    bias: str | None = option(
        Annotated[
            str | None,
            typer.Option(
                "--bias",
                metavar="FILE",
                help="Numbers added to the scaled scores before softmax: an n_q×n_k (or 1×n_k) matrix; -inf "
                "forbids a pair. PyTorch's float attn_mask is such a bias: pass it here, not as --mask.",
            ),
            READS,
        ]
    )
    causal: bool = option(
        Annotated[
            bool,
            typer.Option(
                "--causal/--no-causal",
                help="Query i attends only to keys 0..i (top-left aligned, as PyTorch is_causal and JAX). "
                "--no-causal overrides a bundle's causal: true.",
            ),
        ],
        False,
    )
    causal_align: Align | None = option(
        Annotated[
            Align | None,
            typer.Option(
                "--causal-align",
                show_default=False,
                help="Causal alignment when n_q ≠ n_k (implies --causal). bottom-right: the last query sees "
                "every key, as when new tokens follow cached ones.",
            ),
        ]
    )
    scale: float | None = option(
        Annotated[
            float | None,
            typer.Option(
                "--scale",
                metavar="S",
                show_default=False,
                help="Multiply the scores QKᵀ by this. Default 1/√d_k (1 with --similarity cosine).",
            ),
        ]
    )
    temperature: float = option(TemperatureOption, 1.0)
    similarity: Similarity = option(
        Annotated[
            Similarity,
            typer.Option(
                "--similarity",
                help="dot: QKᵀ. cosine: dot products of unit-length rows, so only directions count "
                "(seed 000's footnote).",
            ),
        ],
        Similarity("dot"),
    )
    window: tuple[int, int] | None = option(
        Annotated[
            Any,
            typer.Option(
                "--window",
                metavar="LEFT,RIGHT",
                show_default=False,
                parser=ValueParser(window_sides, "--window"),
                help="A local window, FlashAttention's window_size: query i sees keys "
                "i+n_k-n_q-LEFT .. i+n_k-n_q+RIGHT "
                "(inclusive); -1, or a side at least as long as the keys, leaves a side unbounded. A sliding window "
                "of W keys with causal is W-1,0.",
            ),
        ]
    )
    softcap: float | None = option(
        Annotated[
            float | None,
            typer.Option(
                "--softcap",
                metavar="C",
                show_default=False,
                help="Soft-cap the scaled scores: C·tanh(scores/C), before any bias or mask (Gemma 2: 50).",
            ),
        ]
    )
    alibi: bool = option(
        Annotated[
            bool,
            typer.Option(
                "--alibi/--no-alibi",
                help="ALiBi: add -m_h·|i+n_k-n_q-j| to head h's scores, slopes m_h = 2^(-8(h+1)/H) (Press et al.). "
                "--no-alibi turns off an ALiBi --model derives.",
            ),
        ],
        False,
    )
    alibi_slopes: str | None = option(
        Annotated[
            str | None,
            typer.Option(
                "--alibi-slopes",
                metavar="FILE",
                show_default=False,
                help="ALiBi with your own slopes: one number per query head (implies --alibi).",
            ),
            READS,
        ]
    )
    rope: RopeStyle | None = option(
        Annotated[
            RopeStyle | None,
            typer.Option(
                "--rope",
                show_default=False,
                help="Rotate Q and K by position first (RoPE). neox: halves, rotate_half "
                "(Hugging Face LLaMA, GPT-NeoX); "
                "gptj: interleaved pairs (GPT-J, Meta's complex form, Cohere). Keys at 0..n_k-1, queries at "
                "n_k-n_q+i. none: Q and K are already rotated (turns off the RoPE --model derives).",
            ),
        ]
    )
    rope_theta: float = option(
        Annotated[
            float,
            typer.Option(
                "--rope-theta",
                metavar="BASE",
                help="RoPE's base: pair i turns by position·BASE^(-2i/dim).",
            ),
        ],
        10000.0,
    )
    rope_dim: int | None = option(
        Annotated[
            int | None,
            typer.Option(
                "--rope-dim",
                metavar="N",
                show_default=False,
                help="Rotate only N features of each head (Pythia, GPT-NeoX's rotary_pct), the first unless "
                "--rope-features last. Default: all.",
            ),
        ]
    )
    rope_offset: int | None = option(
        Annotated[
            int | None,
            typer.Option(
                "--rope-offset",
                metavar="P",
                show_default=False,
                help="The first query's RoPE position (within ±2^32). Default n_k-n_q: the queries are the "
                "last tokens.",
            ),
        ]
    )
    rope_features: RopeFeatures | None = option(
        Annotated[
            RopeFeatures | None,
            typer.Option(
                "--rope-features",
                show_default=False,
                help="Which --rope-dim features turn: the first (default; GPT-NeoX, Phi-3) or the last "
                "(DeepSeek's qk_rope_head_dim).",
            ),
        ]
    )
    rope_scaling: RopeScaling | None = option(
        Annotated[
            Any,
            typer.Option(
                "--rope-scaling",
                metavar="KIND:FIELD=VALUE,…",
                show_default=False,
                parser=ValueParser(rope_scaling_value, "--rope-scaling"),
                help="Stretch RoPE as config.json's rope_scaling does: KIND linear, dynamic, llama3, yarn or "
                "longrope with that object's fields, e.g. yarn:factor=32,original_max_position_embeddings=4096 "
                "(docs/models.md lists each kind's); or the object itself as JSON. none turns a derived one off.",
            ),
        ]
    )
    sinks: str | None = option(
        Annotated[
            str | None,
            typer.Option(
                "--sinks",
                metavar="FILE",
                show_default=False,
                help="Attention sinks (gpt-oss): one logit per query head that joins each row's softmax and is then "
                "dropped, so rows sum to less than 1.",
            ),
            READS,
        ]
    )
    given: frozenset[str] = frozenset()  # the options typed on the command line: they override a bundle
    bundle: frozenset[str] = frozenset()  # the options a bundle's settings set (not typed)
    derived: FromModel | None = None  # what --model derives for --layer (``with_model``)

    def build(self, arrays: OptionArrays | None = None) -> AttentionOptions:
        """The core's AttentionOptions from these flags and the arrays read for them
        (nothing is read here). A bias's -inf forbids its pair as the mask does, and
        is shown so (a dash, not a weight 0). With ``--model``, what it derives
        for the layer is the start, and each option set here replaces its part."""
        from attncli.cli.model_options import rope_from
        from attncli.core.options import AttentionOptions

        arrays = arrays or OptionArrays()
        mask, bias = mask_and_bias(arrays)
        causal: CausalAlign | None = (
            self.causal_align.value if self.causal_align is not None else ("top-left" if self.causal else None)
        )
        same = {
            f.name: getattr(self, f.name)
            for f in fields(AttentionOptions)
            if f.name not in MADE_BY_BUILD and hasattr(self, f.name)
        }
        options = AttentionOptions(
            **same,
            similarity=self.similarity.value,
            causal=causal,
            mask=mask,
            bias=bias,
            alibi_slopes=arrays.alibi_slopes,
            rope=rope_from(self, self.derived.attention.options.rope if self.derived else None),
            sinks=arrays.sinks,
        )
        if self.derived is None:
            return options
        from attncli.cli.model_options import with_derived

        return with_derived(self, options)

    @property
    def typed(self) -> frozenset[str]:
        """The options set by the user: typed, or a bundle's settings."""
        return self.given | self.bundle

    def with_model(self) -> AttentionFlags:
        """These flags with what --model derives for --layer (read here, once)."""
        if self.model is None:
            if self.layer is not None:
                raise UsageError("--layer goes with --model", hint="add --model config.json (or the model's folder)")
            return self
        from attncli.cli.model_options import read_model

        return replace(self, derived=read_model(self.model, self.layer))

    def builds_alone(self, name: str, value: Any) -> bool:
        """Does the one option ``name`` set to ``value`` build on its own? Asked only when
        building with a bundle's settings failed, to say which setting's line the error is on."""
        alone: dict[str, Any] = {"rope": RopeStyle("neox")} if name.startswith("rope_") else {}
        try:
            replace(FROM_OPTIONS, **{**alone, name: value}).build()
        except AttnError:
            return False
        return True

    def with_settings(self, settings: BundleSettings) -> AttentionFlags:
        """These flags with a bundle's settings for the options not given on the command
        line (``settings.settle``: converted by each option's type, limits or parser,
        then checked once by the core, an error naming its setting's line)."""
        from attncli.cli.settings import settle

        return settle(self, settings, {n: ALIASES[n] for n in setting_names()})


# The core's options that build() makes from flags and arrays; every other flag of the same
# name as a core option (scale, window, softcap, ...) is passed to the core as it is.
MADE_BY_BUILD = frozenset({"similarity", "causal", "mask", "bias", "alibi_slopes", "rope", "sinks"})

FROM_OPTIONS = AttentionFlags()  # the placeholder default of ``attention``: @attention_options fills it in

# Each attention option once: its Annotated alias, by name, in the order help shows them.
ALIASES: dict[str, Any] = {f.name: f.metadata["alias"] for f in fields(AttentionFlags) if "alias" in f.metadata}
ATTENTION_OPTIONS: dict[str, tuple[Any, Any]] = {
    f.name: (f.metadata["alias"], f.default) for f in fields(AttentionFlags) if "alias" in f.metadata
}


NOT_SETTINGS = frozenset({"model", "layer"})  # options a bundle may not set: a model is named on the command line


def setting_names() -> list[str]:
    """The attention options a bundle may set: every one but the files."""
    return [name for name in ATTENTION_OPTIONS if name not in ARRAY_OPTIONS and name not in NOT_SETTINGS]


def attention_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the attention options (all, or those ``names``).

    The command declares one parameter ``attention: AttentionFlags``; on the
    command line it becomes these options, in its place, and the command is
    called with the flags gathered into one ``AttentionFlags``::

        @attention_options()
        def run(files: FilesArgument, attention: AttentionFlags = FROM_OPTIONS) -> Result: ...
    """
    from attncli.cli.groups import option_group

    return option_group("attention", AttentionFlags, ATTENTION_OPTIONS, names or tuple(ATTENTION_OPTIONS))
