"""Which tensors a merge writes and what each is made of, from the configuration alone, as
mergekit plans a merge.

A `models` merge is one slice over every layer of every model, the base added as its last
input where it is not listed. A `slices` merge stacks its slices: layer `START + i` of each
source becomes output layer `offset + i`. The tensors outside the layers are merged like the
layers, from the first slice's sources (those before the layers: the embeddings) or the last
slice's (the final norm, the head). Each output gets its gradient position (a layer's place in
its slice, i / (n - 1), or 1 in a slice of one layer; 0 outside the layers), the dtype it is
merged in (`dtype`, else the widest of its inputs') and the dtype written (`out_dtype`, else
the merged one). Imports the io layer, the registry's types and the layer-name helpers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.io.merge_config import MergeConfig, MergeSlice, ModelRef
from lazyparams.io.source_set import SourceSet
from lazyparams.targets.merge import MergeMethod
from lazyparams.targets.merge.parameters import layer_of, with_layer

FLOATS = ("float64", "float32", "float16", "bfloat16")
PRE = re.compile(
    r"(?:^|\.)(?:embed_tokens|embed_in|wte|wpe|word_embeddings|tok_embeddings|embeddings)\."
)
"""The tensors outside the layers that come before them (the first slice gives them)."""


@dataclass(frozen=True, slots=True)
class Input:
    """One input of an output tensor: the model's alias, the tensor's name there, the
    configuration entry that names the model (None for a base the merge adds) and whether it
    is the method's base."""

    alias: str
    name: str
    ref: ModelRef | None
    base: bool = False


@dataclass(frozen=True, slots=True)
class OutputTensor:
    """One output tensor: its name, the dtype written and the dtype merged in, its inputs,
    where its parameters come from (gradient position, slice) and, once bound, their values."""

    name: str
    dtype: str
    compute: str
    shape: tuple[int, ...]
    inputs: tuple[Input, ...]
    position: float = 0.0
    piece: MergeSlice | None = None
    merged: bool = True
    """False where the tensor is copied from its first input (not a float tensor)."""
    per_model: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def layer(self) -> int | None:
        """The output layer the tensor belongs to (None outside the layers)."""
        return layer_of(self.name)

    @property
    def label(self) -> str:
        """The greatest of its inputs' names: mergekit merges tensors in this order."""
        return max(i.name for i in self.inputs)

    @property
    def models(self) -> tuple[Input, ...]:
        """The inputs other than the base, in order."""
        return tuple(i for i in self.inputs if not i.base)

    @property
    def base(self) -> Input | None:
        """The base input, if the method has one here."""
        return next((i for i in self.inputs if i.base), None)

    def with_parameters(
        self, per_model: Mapping[str, Sequence[Any]], values: Mapping[str, Any]
    ) -> OutputTensor:
        """This tensor with its parameters resolved."""
        return replace(self, per_model=per_model, values=values)


@dataclass(frozen=True, slots=True)
class _Group:
    """The inputs of one slice: each source's entry, alias and first layer, and the base."""

    sources: tuple[tuple[ModelRef | None, str, int], ...]
    base: str | None
    piece: MergeSlice | None
    where: str


def dtype_name(value: str | None) -> str | None:
    """A configuration's dtype without mergekit's optional `torch.` prefix."""
    return value.removeprefix("torch.") if value is not None else None


def lay_out_outputs(
    config: MergeConfig, method: MergeMethod, sources: SourceSet
) -> list[OutputTensor]:
    """Every output tensor of the merge `config` describes, checked against `sources`."""
    if not config.slices:
        group = _models_group(config)
        check_inputs(config, method, group)
        return _models_outputs(config, method, sources, group)
    groups = [_slice_group(config, piece) for piece in config.slices]
    for group in groups:
        check_inputs(config, method, group)
    return _sliced_outputs(config, method, sources, groups)


def _models_group(config: MergeConfig) -> _Group:
    listed: list[tuple[ModelRef | None, str, int]] = [(m, m.alias, 0) for m in config.models]
    if config.base is not None and config.base not in {m.alias for m in config.models}:
        listed.append((None, config.base, 0))
    return _Group(tuple(listed), config.base, None, config.where("models"))


def _slice_group(config: MergeConfig, piece: MergeSlice) -> _Group:
    listed = tuple((s, s.alias, (s.layer_range or (0, 0))[0]) for s in piece.sources)
    return _Group(listed, piece.base or config.base, piece, piece.where)


def check_inputs(config: MergeConfig, method: MergeMethod, group: _Group) -> None:
    """Refuse a group of inputs the method does not take: a repeated model, a missing or
    absent base, too few or too many inputs."""
    aliases = [alias for _, alias, _ in group.sources]
    if len(set(aliases)) != len(aliases):
        raise ConvertError(f"{group.where}: a model is listed twice ({', '.join(aliases)})")
    base = None if method.base == "ignored" else group.base
    if base is not None and base not in aliases:
        raise ConvertError(
            f"{group.where}: the base model {base!r} is not among this slice's sources; "
            f"expected it to be one of {', '.join(aliases)}"
        )
    if method.base == "required" and base is None:
        raise ConvertError(
            f"{config.where('merge_method')}: {method.name} needs base_model: PATH; expected one"
        )
    _check_count(group.where, method, "input", len(aliases), "inputs")
    others = len(aliases) - (base is not None)
    _check_count(group.where, method, "model besides the base", others, "others")


def _check_count(where: str, method: MergeMethod, what: str, count: int, key: str) -> None:
    low, high = getattr(method, f"min_{key}"), getattr(method, f"max_{key}")
    if low <= count and (high is None or count <= high):
        return
    wanted = f"{low}" if low == high else f"{low} or more" if high is None else f"{low} to {high}"
    noun = what if wanted == "1" else what.replace("input", "inputs").replace("model ", "models ")
    scope = " (the base included)" if key == "inputs" else ""
    raise ConvertError(f"{where}: {method.name} merges {wanted} {noun}{scope}; got {count}")


def _models_outputs(
    config: MergeConfig, method: MergeMethod, sources: SourceSet, group: _Group
) -> list[OutputTensor]:
    reference = config.base or config.models[0].alias
    names = sources.member_names(reference)
    layers = max((layer + 1 for n in names if (layer := layer_of(n)) is not None), default=0)
    outputs = []
    for name in names:
        layer = layer_of(name)
        position = 0.0 if layer is None else _position(layer, layers)
        inputs = _inputs(method, group, [name] * len(group.sources))
        outputs.append(_output(config, sources, name, inputs, position, None))
    return outputs


def _position(index: int, length: int) -> float:
    """A layer's gradient position in a slice of `length` layers."""
    return index / (length - 1) if length > 1 else 1.0


def _inputs(method: MergeMethod, group: _Group, names: Sequence[str]) -> tuple[Input, ...]:
    base = None if method.base == "ignored" else group.base
    return tuple(
        Input(alias, name, ref, alias == base)
        for (ref, alias, _), name in zip(group.sources, names, strict=True)
    )


def _output(
    config: MergeConfig,
    sources: SourceSet,
    name: str,
    inputs: tuple[Input, ...],
    position: float,
    piece: MergeSlice | None,
) -> OutputTensor:
    """Output `name` from `inputs`, each checked to exist with the first one's shape."""
    first = inputs[0]
    shape = _info(config, sources, first).shape
    dtypes = [_checked_dtype(config, sources, i, first, shape) for i in inputs]
    if any(d not in FLOATS for d in dtypes):  # integer buffers are copied from the first input
        return OutputTensor(name, dtypes[0], dtypes[0], shape, (first,), position, piece, False)
    compute = dtype_name(config.dtype) or _promoted(dtypes)
    dtype = dtype_name(config.out_dtype) or compute
    return OutputTensor(name, dtype, compute, shape, inputs, position, piece)


def _promoted(dtypes: Sequence[str]) -> str:
    """The dtype torch promotes float dtypes to: the widest; float16 with bfloat16 is float32."""
    kinds = set(dtypes)
    if "float64" in kinds:
        return "float64"
    if "float32" in kinds or {"float16", "bfloat16"} <= kinds:
        return "float32"
    return dtypes[0]


def _info(config: MergeConfig, sources: SourceSet, item: Input) -> Any:
    if item.name not in set(sources.member_names(item.alias)):
        raise ConvertError(
            f"{config.where('models')}: tensor {item.name!r} is not in model {item.alias!r} "
            f"({config.folders[item.alias]}); expected every merged model to hold it"
        )
    return sources.member_info(item.alias, item.name)


def _checked_dtype(
    config: MergeConfig, sources: SourceSet, item: Input, first: Input, shape: tuple[int, ...]
) -> str:
    """The input's dtype; refuses it where it is missing or its shape differs from `shape`."""
    info = _info(config, sources, item)
    if info.shape != shape:
        raise ConvertError(
            f"{config.where('models')}: tensor {first.name!r} is {list(shape)} in "
            f"{first.alias!r} but {item.name!r} is {list(info.shape)} in {item.alias!r}; "
            "expected the same shape in every model (models of different sizes or "
            "vocabularies cannot be merged)"
        )
    return str(info.dtype)


def _sliced_outputs(
    config: MergeConfig, method: MergeMethod, sources: SourceSet, groups: Sequence[_Group]
) -> list[OutputTensor]:
    """Each slice's layers in turn, the tensors outside them around them."""
    outputs = _outside(config, method, sources, groups[0], pre=True)
    offset = 0
    for group in groups:
        length = _length(group)
        for i in range(length):
            outputs += _layer_outputs(config, method, sources, group, offset, i, length)
        offset += length
    return outputs + _outside(config, method, sources, groups[-1], pre=False)


def _outside(
    config: MergeConfig, method: MergeMethod, sources: SourceSet, group: _Group, pre: bool
) -> list[OutputTensor]:
    """The tensors outside the layers before them (`pre`) or after them, from `group`."""
    lead = group.sources[0][1]
    names = [n for n in sources.member_names(lead) if layer_of(n) is None]
    chosen = [n for n in names if bool(PRE.search(n)) == pre]
    return [
        _output(
            config, sources, n, _inputs(method, group, [n] * len(group.sources)), 0.0, group.piece
        )
        for n in chosen
    ]


def _length(group: _Group) -> int:
    assert group.piece is not None
    lengths = {end - start for start, end in (s.layer_range or (0, 0) for s in group.piece.sources)}
    if len(lengths) != 1:
        ranges = ", ".join(f"{s.alias} {list(s.layer_range or ())}" for s in group.piece.sources)
        raise ConvertError(
            f"{group.where}: the sources' layer ranges differ in length ({ranges}); expected "
            "ranges of one length"
        )
    return lengths.pop()


def _layer_outputs(
    config: MergeConfig,
    method: MergeMethod,
    sources: SourceSet,
    group: _Group,
    offset: int,
    i: int,
    length: int,
) -> list[OutputTensor]:
    """Output layer `offset + i`: layer `start + i` of each of the slice's sources."""
    lead_ref, lead, start = group.sources[0]
    outputs = []
    for name in _layer_names(sources, lead, start + i, lead_ref):
        names = [with_layer(name, first + i) for _, _, first in group.sources]
        inputs = _inputs(method, group, names)
        out_name = with_layer(name, offset + i)
        outputs.append(
            _output(config, sources, out_name, inputs, _position(i, length), group.piece)
        )
    return outputs


def _layer_names(sources: SourceSet, alias: str, layer: int, ref: ModelRef | None) -> list[str]:
    names = [n for n in sources.member_names(alias) if layer_of(n) == layer]
    if not names:
        where = ref.where if ref is not None else alias
        raise ConvertError(
            f"{where}: model {alias!r} has no layer {layer}; expected a layer_range within "
            "its layers"
        )
    return names
