"""Adapters bound to their base: for each base tensor, where it starts (the base's tensor, or
a full copy an adapter brings) and the low-rank updates that follow, adapter by adapter.

PEFT names an adapter's tensors `base_model.model.<module>.<part>`: `lora_A.weight` and
`lora_B.weight` (a linear layer), `lora_embedding_A` and `lora_embedding_B` (an embedding),
`lora_magnitude_vector` (DoRA), `base_layer.weight` (the base layer saved beside an embedding
adapter) and, for `modules_to_save`, the module's own tensors. Every check here reads names,
shapes and dtypes only, so a bad adapter is refused before any data is read. Imports the io
layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lazyparams.errors import ConvertError
from lazyparams.io.base import TensorInfo
from lazyparams.io.lora_adapter import BASE_ALIAS, PREFIX, LoraAdapter
from lazyparams.io.source_set import SourceSet, qualified

FLOATS = ("float16", "bfloat16", "float32", "float64")
PARTS = (
    (".lora_A.weight", "A"),
    (".lora_B.weight", "B"),
    (".lora_embedding_A", "embedding_A"),
    (".lora_embedding_B", "embedding_B"),
    (".lora_magnitude_vector.weight", "magnitude"),
    (".lora_magnitude_vector", "magnitude"),
    (".base_layer.weight", "base_layer"),
    (".lora_B.bias", "bias"),
)
"""An adapter tensor's name ending, and what it holds of its module."""


@dataclass(frozen=True, slots=True)
class LoraUpdate:
    """One adapter's update of one base tensor: `W + scaling * B @ A` (names qualified).

    `transposed`: the product is the weight's transpose (fan_in_fan_out, embeddings);
    `embedding`: PEFT's embedding rules (the update is cast to the weight's dtype before the
    add); `magnitude`: DoRA's magnitude vector, when the adapter uses DoRA."""

    adapter: str
    module: str
    a: str
    b: str
    scaling: float
    transposed: bool = False
    embedding: bool = False
    magnitude: str | None = None

    @property
    def norm_axis(self) -> int:
        """The weight's input axis, over which DoRA takes its norms."""
        return 0 if self.transposed else 1


@dataclass(frozen=True, slots=True)
class MergedTensor:
    """One output tensor: `start` (qualified: the base's tensor, or an adapter's full copy of
    it), then `updates` in adapter order; `info` is the output's (the base's shape and dtype)."""

    info: TensorInfo
    start: str
    updates: tuple[LoraUpdate, ...] = ()
    """The adapters' updates of this tensor, applied in the order the adapters were given
    (none for a tensor only copied from an adapter's modules_to_save)."""

    @property
    def name(self) -> str:
        """The tensor's name in the base (and in the output)."""
        return self.info.name


@dataclass(frozen=True, slots=True)
class LoraBinding:
    """The checked merge of `adapters` into the base at `base`: every output tensor, in the
    base's order, with the updates it receives."""

    base: Path
    adapters: tuple[LoraAdapter, ...]
    tensors: tuple[MergedTensor, ...]


def bind_lora(sources: SourceSet) -> LoraBinding:
    """Check every adapter of `sources` (see `io.lora_adapter.open_lora_sources`) against its
    base and lay out the merged tensors, in the base's order."""
    adapters: tuple[LoraAdapter, ...] = sources.lora_adapters  # type: ignore[attr-defined]
    base = _Base(sources)
    starts: dict[str, str] = {}
    updates: dict[str, list[LoraUpdate]] = {}
    for adapter in adapters:
        _check_targets(adapter, base)
        read = _AdapterTensors(adapter, sources, base)
        starts.update(read.copies())
        for update in read.updates():
            updates.setdefault(f"{update.module}.weight", []).append(update)
    tensors = tuple(
        MergedTensor(
            base.infos[name],
            starts.get(name, qualified(BASE_ALIAS, name)),
            tuple(updates.get(name, ())),
        )
        for name in base.infos
    )
    return LoraBinding(base.path, adapters, tensors)


class _Base:
    """The base model's tensors (by own name) and how messages name it."""

    def __init__(self, sources: SourceSet) -> None:
        self.path: Path = sources.lora_base  # type: ignore[attr-defined]
        self.infos = {
            n: sources.member_info(BASE_ALIAS, n) for n in sources.member_names(BASE_ALIAS)
        }

    def tensor(self, adapter: LoraAdapter, module: str, name: str) -> TensorInfo:
        """The base tensor `name` of `module`, or the error naming the module and the base."""
        found = self.infos.get(name)
        if found is None:
            raise ConvertError(
                f"{adapter.folder}: module {module!r} matches no tensor of the base {self.path}; "
                f"expected a tensor {name!r}"
            )
        return found


def _check_targets(adapter: LoraAdapter, base: _Base) -> None:
    """Refuse an adapter whose target_modules name no module of the base."""
    config = adapter.config
    if config.target_modules is None:
        return
    modules = {name.rsplit(".", 1)[0] for name in base.infos if "." in name}
    if not any(config.targets(module) for module in modules):
        named = config.target_modules
        shown = named if isinstance(named, str) else ", ".join(named)
        raise ConvertError(
            f"{config.path}: target_modules {shown} match no tensor of the base {base.path}; "
            "expected the adapter of this base model"
        )


class _AdapterTensors:
    """An adapter's tensors, grouped by module and checked against the base."""

    def __init__(self, adapter: LoraAdapter, sources: SourceSet, base: _Base) -> None:
        self.adapter = adapter
        self.sources = sources
        self.base = base
        self.modules: dict[str, dict[str, str]] = {}
        self.saved: list[str] = []
        for own in sources.member_names(adapter.alias):
            self._sort(own)

    def _sort(self, own: str) -> None:
        if not own.startswith(PREFIX):
            raise ConvertError(
                f"{self.adapter.folder}: tensor {own!r}: expected a PEFT name "
                f"{PREFIX}MODULE.lora_A.weight (or another part of a LoRA module)"
            )
        rest = own.removeprefix(PREFIX)
        for ending, part in PARTS:
            if rest.endswith(ending):
                self.modules.setdefault(rest.removesuffix(ending), {})[part] = own
                return
        self.saved.append(own)

    def info(self, own: str) -> TensorInfo:
        return self.sources.member_info(self.adapter.alias, own)

    def copies(self) -> dict[str, str]:
        """Base tensor -> the adapter's full copy of it (qualified): modules_to_save and the
        base layers PEFT saves beside embedding adapters."""
        found = {}
        for own in self.saved:
            name = own.removeprefix(PREFIX)
            module = name.rsplit(".", 1)[0]
            if not self.adapter.config.saves(module):
                raise ConvertError(
                    f"{self.adapter.folder}: tensor {own!r} is neither a LoRA part (lora_A, "
                    "lora_B, lora_embedding_A/B, lora_magnitude_vector) nor a tensor of "
                    "modules_to_save; expected one of them"
                )
            found[name] = self._copy(module, name, own)
        for module, parts in self.modules.items():
            if "base_layer" in parts:
                name = f"{module}.weight"
                found[name] = self._copy(module, name, parts["base_layer"])
        return found

    def _copy(self, module: str, name: str, own: str) -> str:
        target = self.base.tensor(self.adapter, module, name)
        shape = self.info(own).shape
        if shape != target.shape:
            raise ConvertError(
                f"{self.adapter.folder}: tensor {own!r} is {shape}, the base's {name!r} is "
                f"{target.shape}; expected the same shape"
            )
        return qualified(self.adapter.alias, own)

    def updates(self) -> list[LoraUpdate]:
        """The adapter's low-rank updates, checked (see `LoraUpdate`)."""
        found = []
        for module, parts in self.modules.items():
            if "bias" in parts:
                raise ConvertError(
                    f"{self.adapter.folder}: module {module!r} has a lora_B.bias (lora_bias), "
                    "which lazyparams' LoRA merge does not support; expected none"
                )
            factors = _factors(parts)
            if factors is None:
                self._no_factors(module, parts)
                continue
            found.append(self._update(module, parts, *factors))
        return found

    def _no_factors(self, module: str, parts: Mapping[str, str]) -> None:
        """Refuse a module with one factor, or a magnitude without factors."""
        if set(parts) - {"base_layer"}:
            held = ", ".join(
                sorted(own.removeprefix(f"{PREFIX}{module}.") for own in parts.values())
            )
            raise ConvertError(
                f"{self.adapter.folder}: module {module!r} has {held}; expected both lora_A and "
                "lora_B (or lora_embedding_A and lora_embedding_B)"
            )

    def _update(self, module: str, parts: Mapping[str, str], a: str, b: str) -> LoraUpdate:
        config = self.adapter.config
        weight = self.base.tensor(self.adapter, module, f"{module}.weight")
        embedding = "embedding_A" in parts
        transposed = embedding or config.fan_in_fan_out
        self._check_factors(module, weight, self.info(a), self.info(b), transposed)
        magnitude = self._magnitude(module, parts, weight, transposed)
        return LoraUpdate(
            self.adapter.alias,
            module,
            qualified(self.adapter.alias, a),
            qualified(self.adapter.alias, b),
            config.scaling(module, self.adapter.weight),
            transposed,
            embedding,
            magnitude,
        )

    def _check_factors(
        self, module: str, weight: TensorInfo, a: TensorInfo, b: TensorInfo, transposed: bool
    ) -> None:
        where = f"{self.adapter.folder}: module {module!r}"
        _check_float(where, weight, a, b)
        if a.dtype != b.dtype:
            raise ConvertError(
                f"{where}: lora_A is {a.dtype} and lora_B {b.dtype}; expected one dtype"
            )
        if len(weight.shape) != 2 or len(a.shape) != 2 or len(b.shape) != 2:
            raise ConvertError(
                f"{where}: lora_A is {a.shape}, lora_B {b.shape}, the base weight "
                f"{weight.shape}; expected 2-D tensors (a linear or embedding layer)"
            )
        rank = self.adapter.config.rank_of(module)
        if a.shape[0] != rank or b.shape[1] != rank:
            raise ConvertError(
                f"{where}: lora_A is {a.shape} and lora_B {b.shape}, but "
                f"{self.adapter.config.path.name} gives it r = {rank}; expected rank {rank}"
            )
        product = (b.shape[0], a.shape[1])
        expected = weight.shape[::-1] if transposed else weight.shape
        if product != expected:
            raise ConvertError(
                f"{where}: lora_A is {a.shape} and lora_B {b.shape}, the base weight "
                f"{weight.name!r} is {weight.shape}; expected lora_B @ lora_A of shape {expected}"
            )

    def _magnitude(
        self, module: str, parts: Mapping[str, str], weight: TensorInfo, transposed: bool
    ) -> str | None:
        where = f"{self.adapter.folder}: module {module!r}"
        found = parts.get("magnitude")
        if not self.adapter.config.use_dora:
            if found is not None:
                raise ConvertError(f"{where}: a lora_magnitude_vector without use_dora: true")
            return None
        if found is None:
            raise ConvertError(f"{where}: use_dora is true but it has no lora_magnitude_vector")
        length = weight.shape[0 if not transposed else 1]
        shape = self.info(found).shape
        if shape != (length,):
            raise ConvertError(
                f"{where}: lora_magnitude_vector is {shape}; expected ({length},), one value per "
                f"output feature of {weight.name!r} {weight.shape}"
            )
        _check_float(where, self.info(found))
        return qualified(self.adapter.alias, found)


def _factors(parts: Mapping[str, str]) -> tuple[str, str] | None:
    """(A, B) own names of a module's parts, when it has both of one kind."""
    for a, b in (("A", "B"), ("embedding_A", "embedding_B")):
        if a in parts and b in parts:
            return parts[a], parts[b]
    return None


def _check_float(where: str, *infos: TensorInfo) -> None:
    for info in infos:
        if info.dtype not in FLOATS:
            raise ConvertError(
                f"{where}: {info.name!r} is {info.dtype}; expected a float tensor "
                f"({', '.join(FLOATS)})"
            )
