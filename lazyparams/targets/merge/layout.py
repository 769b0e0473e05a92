"""Which tensors a merge writes and what each is made of, from the configuration alone.

Without `slices`, every tensor of the reference model (the base, else the first model) is merged
from the same tensor of every model. With `slices`, the layers of each slice follow those of the
one before (layer `START + i` of its sources becomes output layer `offset + i`), a slice of one
source copies them, a slice of several merges them; the tensors outside the layers come from the
base (else the first slice's first source). Every input must exist with the reference's shape.
Imports the io layer and the merge parameters' name helpers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.io.merge_config import MergeConfig, MergeSlice, ModelRef
from lazyparams.io.source_set import SourceSet
from lazyparams.targets.merge.parameters import layer_of, with_layer

FLOATS = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True, slots=True)
class OutputTensor:
    """One output tensor: its name and dtype, the (alias, name) it is read from in each model
    (`refs` the matching configuration entries), the base's, and its resolved parameters."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    models: tuple[tuple[str, str], ...]
    refs: tuple[ModelRef, ...]
    base: tuple[str, str] | None = None
    merged: bool = True
    """False where the tensor is copied from one model (a slice of one source, a non-float)."""
    slice_parameters: Mapping[str, Any] = field(default_factory=dict)
    per_model: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def layer(self) -> int | None:
        """The output layer the tensor belongs to (None outside the layers)."""
        return layer_of(self.name)

    @property
    def source_name(self) -> str:
        """The name the tensor has in its first model (what parameter filters match)."""
        return self.models[0][1] if self.models else self.name

    def with_parameters(
        self, per_model: Mapping[str, Sequence[Any]], values: Mapping[str, Any]
    ) -> OutputTensor:
        """This tensor with its parameters resolved."""
        return replace(self, per_model=per_model, values=values)


def lay_out_outputs(config: MergeConfig, method: Any, sources: SourceSet) -> list[OutputTensor]:
    """Every output tensor of the merge `config` describes, checked against `sources`."""
    if config.slices:
        return _sliced(config, sources)
    reference = config.base or config.models[0].alias
    refs = tuple(m for m in config.models if m.alias != config.base)
    outputs = []
    for name in sources.member_names(reference):
        outputs.append(_merged(config, sources, name, name, refs, reference, config.base, {}))
    return outputs


def _merged(
    config: MergeConfig,
    sources: SourceSet,
    out_name: str,
    layer_names: str | Sequence[str],
    refs: Sequence[ModelRef],
    reference: str,
    base: str | None,
    slice_parameters: Mapping[str, Any],
) -> OutputTensor:
    """Output `out_name`, read as `layer_names` (one per ref, or one for all) in each model."""
    names = [layer_names] * len(refs) if isinstance(layer_names, str) else list(layer_names)
    first = names[0] if names else str(layer_names)
    info = sources.member_info(reference, first if base is None else _base_name(layer_names))
    models = tuple((ref.alias, name) for ref, name in zip(refs, names, strict=True))
    base_input = None if base is None else (base, _base_name(layer_names))
    for alias, name in (*models, *([base_input] if base_input else [])):
        _check_same(config, sources, reference, info.name, info.shape, alias, name)
    floating = info.dtype in FLOATS
    dtype = (config.out_dtype or config.dtype or info.dtype) if floating else info.dtype
    if not floating:  # integer buffers (position ids) are copied from the reference
        return OutputTensor(
            out_name, dtype, info.shape, ((reference, info.name),), (), merged=False
        )
    return OutputTensor(
        out_name, dtype, info.shape, models, tuple(refs), base_input, True, slice_parameters
    )


def _base_name(layer_names: str | Sequence[str]) -> str:
    return layer_names if isinstance(layer_names, str) else layer_names[0]


def _check_same(
    config: MergeConfig,
    sources: SourceSet,
    reference: str,
    ref_name: str,
    shape: tuple[int, ...],
    alias: str,
    name: str,
) -> None:
    """Refuse an input that is missing, or whose shape differs from the reference's."""
    if name not in set(sources.member_names(alias)):
        raise ConvertError(
            f"{config.where('models')}: tensor {name!r} is not in model {alias!r} "
            f"({config.folders[alias]}); expected every merged model to hold it"
        )
    other = sources.member_info(alias, name).shape
    if other != shape:
        raise ConvertError(
            f"{config.where('models')}: tensor {ref_name!r} is {list(shape)} in {reference!r} "
            f"but {name!r} is {list(other)} in {alias!r}; expected the same shape in every "
            "model (models of different sizes or vocabularies cannot be merged)"
        )


def _sliced(config: MergeConfig, sources: SourceSet) -> list[OutputTensor]:
    """The outputs of a `slices` merge: each slice's layers in turn, the rest around them."""
    first = config.slices[0].sources[0].alias
    reference = config.base or first
    names = sources.member_names(reference)
    layered = [n for n in names if layer_of(n) is not None]
    before = [
        _copied(config, sources, reference, n)
        for n in names
        if layer_of(n) is None and (not layered or names.index(n) < names.index(layered[0]))
    ]
    after = [
        _copied(config, sources, reference, n)
        for n in names
        if layer_of(n) is None and layered and names.index(n) > names.index(layered[0])
    ]
    middle: list[OutputTensor] = []
    offset = 0
    for piece in config.slices:
        middle += _slice_outputs(config, sources, piece, offset)
        offset += _length(piece)
    return [*before, *middle, *after]


def _copied(config: MergeConfig, sources: SourceSet, alias: str, name: str) -> OutputTensor:
    info = sources.member_info(alias, name)
    floating = info.dtype in FLOATS
    dtype = (config.out_dtype or config.dtype or info.dtype) if floating else info.dtype
    return OutputTensor(name, dtype, info.shape, ((alias, name),), (), merged=False)


def _length(piece: MergeSlice) -> int:
    lengths = {
        end - start for start, end in (s.layer_range for s in piece.sources if s.layer_range)
    }
    if len(lengths) != 1:
        ranges = ", ".join(f"{s.alias} {list(s.layer_range or ())}" for s in piece.sources)
        raise ConvertError(
            f"{piece.where}: the sources' layer ranges differ in length ({ranges}); expected "
            "ranges of one length"
        )
    return lengths.pop()


def _slice_outputs(
    config: MergeConfig, sources: SourceSet, piece: MergeSlice, offset: int
) -> list[OutputTensor]:
    """The output layers [offset, offset + length) a slice gives."""
    length, lead = _length(piece), piece.sources[0]
    base = piece.base or config.base
    refs = [s for s in piece.sources if s.alias != base] if len(piece.sources) > 1 else [lead]
    base_ref = next((s for s in piece.sources if s.alias == base), None)
    outputs = []
    for i in range(length):
        for name in _layer_names(config, sources, lead, i):
            out_name = with_layer(name, offset + i)
            own = [with_layer(name, (r.layer_range or (0, 0))[0] + i) for r in refs]
            if len(piece.sources) == 1:
                outputs.append(replace(_copied(config, sources, lead.alias, own[0]), name=out_name))
                continue
            base_alias = None if base_ref is None else base_ref.alias
            names = own if base_ref is None else [*own]
            out = _merged(
                config, sources, out_name, names, refs, refs[0].alias, None, piece.parameters
            )
            if base_ref is not None:
                start = (base_ref.layer_range or (0, 0))[0]
                out = replace(out, base=(str(base_alias), with_layer(name, start + i)))
            outputs.append(out)
    return outputs


def _layer_names(config: MergeConfig, sources: SourceSet, ref: ModelRef, i: int) -> list[str]:
    start, end = ref.layer_range or (0, 0)
    names = [n for n in sources.member_names(ref.alias) if layer_of(n) == start + i]
    if not names:
        raise ConvertError(
            f"{ref.where}: model {ref.alias!r} has no layer {start + i} (layer_range "
            f"[{start}, {end}]); expected a range within its layers"
        )
    return names
