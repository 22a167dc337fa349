"""Q, K, V and the arrays the attention options name, read once.

``read_inputs`` reads three files Q K V or one bundle, the files the flags
name (--mask, --bias, --sinks, --alibi-slopes; --dout for the backward
pass) and a bundle's settings, into one typed ``Inputs``; run, explain,
check and grad share it. ``read_option_arrays`` is the part self shares:
the option arrays from a bundle's entries and the files the flags name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from attncli.cli.attention import FROM_OPTIONS, AttentionFlags
from attncli.cli.io import source_name
from attncli.cli.model_options import check_tensors, replaced
from attncli.cli.notes import note
from attncli.cli.option_arrays import ARRAY_OPTIONS, OptionArrays, allowed_cells, per_head
from attncli.cli.options import Layout
from attncli.cli.reading import read_matrix_named, read_named
from attncli.errors import AttnError, UsageError
from attncli.readers.base import BY_FILE

if TYPE_CHECKING:
    import numpy as np

    from attncli.core.options import AttentionOptions
    from attncli.readers import Matrix, TextSettings


# What a bundle may hold besides q, k, v and the option arrays, and what it means.
UNUSED = {"dout": "the output's gradient, for a backward pass: attn grad computes it"}
BUNDLE_META: dict[str, Any] = {"description": str, "rgb": bool}  # plain settings that are not options


@dataclass(frozen=True)
class Inputs:
    """Q, K, V as read, the options they are attended with, and how to show them.

    Tensors are held as [..., heads, seq, dim] whatever ``layout`` the files
    use; ``to_file_layout`` turns a result back. ``flags`` are the attention
    flags with the bundle's settings; ``arrays`` the option arrays read."""

    q: Matrix
    k: Matrix
    v: Matrix
    options: AttentionOptions
    flags: AttentionFlags = FROM_OPTIONS
    arrays: OptionArrays = OptionArrays()
    layout: Layout = Layout.bhsd
    dout: Matrix | None = None  # the output's gradient, from a bundle (--dout is read by output_gradient)
    description: str | None = None  # a bundle's description
    rgb: bool = False  # the bundle says rows of 3 numbers are RGB colours
    head: tuple[int, int] | None = None  # the (batch, head) of tensors these were cut to (explain)

    @property
    def masked(self) -> bool:
        """Was a mask given (rather than only causal or a window)?"""
        return self.arrays.mask is not None

    @property
    def tensors(self) -> bool:
        """Has any input more than two axes (batch, heads)?"""
        return max(self.q.values.ndim, self.k.values.ndim, self.v.values.ndim) > 2

    def to_file_layout(self, values: np.ndarray) -> np.ndarray:
        """A result [..., heads, seq, dim] in the files' layout (bshd: [..., seq, heads, dim])."""
        return to_layout(values, self.layout)

    @property
    def queries(self) -> list[str]:
        return self.q.row_labels or [f"q{i}" for i in range(self.q.shape[-2])]

    @property
    def keys(self) -> list[str]:
        return self.k.row_labels or self.v.row_labels or [f"k{i}" for i in range(self.k.shape[-2])]

    @property
    def columns(self) -> list[str]:
        from attncli.output.labels import value_columns

        return self.v.col_labels or value_columns(self.v.shape[-1])

    @property
    def query_colours(self) -> Any:
        """Each query's colour (hex labels, or RGB rows when the bundle says ``rgb: true``), or None."""
        from attncli.output.colours import row_colours

        return row_colours(self.q.row_labels, self.q.values, self.rgb)

    @property
    def key_colours(self) -> Any:
        """Each key's colour, or None when the keys are not colours."""
        from attncli.output.colours import row_colours

        return row_colours(self.k.row_labels or self.v.row_labels, self.k.values, self.rgb)

    def but(self, **changes: Any) -> Inputs:
        return replace(self, **changes)


def to_layout(values: np.ndarray, layout: Layout) -> np.ndarray:
    """[..., a, b, d] -> [..., b, a, d] for bshd (its own inverse); bhsd and 2-D arrays unchanged."""
    import numpy as np

    return np.swapaxes(values, -3, -2) if layout is Layout.bshd and values.ndim >= 3 else values


def layout_shape(shape: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    """A shape [..., a, b, d] as ``to_layout`` would make it."""
    if layout is Layout.bshd and len(shape) >= 3:
        return shape[:-3] + (shape[-2], shape[-3], shape[-1])
    return shape


def read_inputs(
    files: list[str],
    flags: AttentionFlags = FROM_OPTIONS,
    text: TextSettings = BY_FILE,
    layout: Layout = Layout.bhsd,
    wanted: tuple[str, ...] = (),
) -> Inputs:
    """Read one bundle or three files and the files the flags name, and gather the
    options: the command line's, else the bundle's settings. NPY, NPZ and safetensors
    inputs may be tensors of any rank ≥ 2, in ``layout``. ``wanted``: entries of
    UNUSED this command uses (``dout`` for the backward pass)."""
    from attncli.cli.settings import BundleSettings
    from attncli.readers import NotABundle

    if len(files) not in (1, 3):
        raise UsageError(f"expected one bundle file or three files Q K V, got {len(files)}")
    flags = flags.with_model()
    entries: dict[str, Matrix] = {}
    meta: dict[str, Any] = {}
    source = source_name(files[0])
    if len(files) == 1:
        from attncli.cli.attention import setting_names

        names = [*BUNDLE_META, *setting_names()]
        try:
            bundle = read_named(files[0], text, bundle=True, tensors=True, settings=names)
        except NotABundle as e:
            e.hint = "give three files Q K V, or one YAML/JSON/NPZ/safetensors bundle with q, k and v"
            raise
        entries = {name.lower(): m for name, m in bundle.matrices.items()}
        missing = [n for n in ("q", "k", "v") if n not in entries]
        extra = sorted(set(entries) - {"q", "k", "v", *ARRAY_OPTIONS, *UNUSED})
        if missing or extra:
            what = f"has no {', '.join(missing)}" if missing else f"has an unexpected entry {extra[0]!r}"
            raise AttnError(
                f"the bundle {what}",
                source=source,
                hint="a bundle holds q, k and v, and optionally " + ", ".join(ARRAY_OPTIONS),
            )
        for name in sorted(set(entries) & set(UNUSED) - set(wanted)):
            note(f"{name} is not used: {UNUSED[name]}", source)
        settings = BundleSettings.of(bundle.meta, source, bundle.lines, names)
        flags = flags.with_settings(settings)
        meta = settings.fill({}, BUNDLE_META, frozenset())
        q, k, v = entries["q"], entries["k"], entries["v"]
    else:
        read = [read_named(f, text, tensors=True) for f in files]
        q, k, v = (bundle.matrix() for bundle in read)
        meta = {"description": next((b.meta["description"] for b in read if "description" in b.meta), None)}
    arrays = read_option_arrays(flags, text, entries, source, tensors=True)
    q, k, v = (replace(m, values=to_layout(m.values, layout)) for m in (q, k, v))
    check_tensors(flags, q.values, k.values, v.values)
    for line in replaced(flags):
        note(line)
    return Inputs(
        q,
        k,
        values_per_key(v, k),
        flags.build(arrays),
        flags,
        arrays,
        layout,
        dout=entries.get("dout") if "dout" in wanted else None,
        description=meta.get("description"),
        rgb=meta.get("rgb") is True,
    )


def read_option_arrays(
    flags: AttentionFlags, text: TextSettings, entries: dict[str, Matrix], source: str, tensors: bool = False
) -> OptionArrays:
    """The mask, bias, sinks and ALiBi slopes: a bundle's entries (by lowercase name, from
    ``source``), or the files the flags name, which win."""
    read: dict[str, Any] = {}
    for name in ARRAY_OPTIONS:
        path = getattr(flags, name)
        if path is not None:
            matrix = read_matrix_named(path, text, mask=name == "mask", bias=name == "bias", tensors=tensors)
            read[name] = allowed_cells(matrix.values, source_name(path), "file") if name == "mask" else matrix.values
        elif name in entries:
            values = entries[name].values
            read[name] = allowed_cells(values, source, "entry") if name == "mask" else values
    for name in ("sinks", "alibi_slopes"):
        if name in read:
            read[name] = per_head(read[name])
    return OptionArrays(**read)


def output_gradient(inputs: Inputs, dout: str | None, text: TextSettings = BY_FILE) -> np.ndarray:
    """dO for a backward pass (``attn grad``, ``attn check --grad``, ``explain --grad``): the file
    --dout names, else the bundle's ``dout``; [..., heads, n_q, d_v] whatever the layout."""
    if dout is not None:
        values = read_matrix_named(dout, text, tensors=True).values
    elif inputs.dout is not None:
        values = inputs.dout.values
    else:
        raise UsageError(
            "the backward pass needs the output's gradient dO", hint="give --dout FILE, or a bundle entry dout"
        )
    return to_layout(values, inputs.layout)


def values_per_key(v: Matrix, k: Matrix) -> Matrix:
    """V written as a flat list (or a 1-D array) of one number per key, as
    seed 000's ``v: [10, 5, 2]`` and the Python API's 1-D v: a column, n_k×1."""
    from attncli.readers import Matrix

    n_k = k.shape[0]
    if v.vector and k.values.ndim == 2 and n_k > 1 and v.shape == (1, n_k):
        return Matrix(v.values.T, v.col_labels, None)
    return v
