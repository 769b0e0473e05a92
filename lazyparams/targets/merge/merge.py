"""A merge configuration bound to the models it reads: every output tensor, its inputs and
parameters, checked before any data is read; then the merge itself, traced.

`bind_merge(config, sources)` checks the method (known, its base and model count), every
parameter (known to the method, in range, given where it has no default) and every output
tensor (present in each model it is merged from, with one shape). `MergeBinding.transform`
then maps the source set's tensors (`ALIAS::NAME`) to the merged ones, named as in the models.
Imports the io layer and the merge methods.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.merge_config import MergeConfig, ModelRef
from lazyparams.io.source_set import SourceSet, qualified
from lazyparams.targets.merge import MergeMethod, TensorMerge, merge_method
from lazyparams.targets.merge.layout import OutputTensor, lay_out_outputs
from lazyparams.targets.merge.parameters import value_for

DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes a merge computes in and writes (`dtype`, `out_dtype`)."""


@dataclass(frozen=True, slots=True)
class MergeBinding:
    """A checked merge: the method, the outputs and what each reads (see the module)."""

    config: MergeConfig
    method: MergeMethod
    outputs: tuple[OutputTensor, ...]
    seed: int = 0

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The merged tensors, by output name, traced from the source set's `params`."""
        return {out.name: self._merge_one(out, params) for out in self.outputs}

    def _merge_one(self, out: OutputTensor, params: Mapping[str, Tensor]) -> Tensor:
        if out.base is None and len(out.models) == 1 and not out.merged:
            alias, name = out.models[0]
            return params[qualified(alias, name)].astype(out.dtype)
        compute = self.config.dtype
        tensors = [_cast(params[qualified(a, n)], compute) for a, n in out.models]
        base = None if out.base is None else _cast(params[qualified(*out.base)], compute)
        merged = self.method.merge(
            TensorMerge(out.name, tensors, base, out.per_model, out.values, self._seed(out))
        )
        return merged.astype(out.dtype)

    def _seed(self, out: OutputTensor) -> int:
        return (self.seed * 0x9E3779B1 + zlib.crc32(out.name.encode())) & 0xFFFFFFFF

    @property
    def layer_count(self) -> int | None:
        """How many layers the merged model has (None when no output names a layer)."""
        layers = [o.layer for o in self.outputs if o.layer is not None]
        return max(layers) + 1 if layers else None


def bind_merge(config: MergeConfig, sources: SourceSet, seed: int = 0) -> MergeBinding:
    """Check `config` against the models of `sources` and lay out every output tensor."""
    method = merge_method(config.method, config.where("merge_method"))
    _check_dtypes(config)
    _check_models(config, method)
    _check_parameter_names(config, method)
    outputs = lay_out_outputs(config, method, sources)
    resolved = tuple(_with_parameters(config, method, out, _layers(outputs)) for out in outputs)
    return MergeBinding(config, method, resolved, seed)


def _cast(tensor: Tensor, dtype: str | None) -> Tensor:
    return tensor if dtype is None or tensor.dtype == dtype else tensor.astype(dtype)


def _check_dtypes(config: MergeConfig) -> None:
    for key in ("dtype", "out_dtype"):
        value = getattr(config, key)
        if value is not None and value not in DTYPES:
            raise ConvertError(
                f"{config.where(key)}: {key} {value!r}: expected one of {', '.join(DTYPES)}"
            )


def _check_models(config: MergeConfig, method: MergeMethod) -> None:
    if method.base == "required" and config.base is None and not config.slices:
        raise ConvertError(
            f"{config.where('merge_method')}: {method.name} needs base_model: PATH; expected one"
        )
    if config.slices and not method.layered and method.base == "required":
        for piece in config.slices:
            if (piece.base or config.base) is None:
                raise ConvertError(f"{piece.where}: {method.name} needs a base_model")
    if config.slices:
        return
    count = len([m for m in config.models if m.alias != config.base])
    most = method.max_models
    if count < method.min_models or (most is not None and count > most):
        wanted = f"{method.min_models}" + (
            "" if most == method.min_models else f" to {most}" if most else " or more"
        )
        raise ConvertError(
            f"{config.where('models')}: {method.name} merges {wanted} models besides the base; "
            f"got {count}"
        )


def _check_parameter_names(config: MergeConfig, method: MergeMethod) -> None:
    """Refuse a parameter the method does not take, naming it and its line."""
    groups: list[tuple[Mapping[str, Any], tuple[str | int, ...]]] = [
        (config.parameters, ("parameters",))
    ]
    groups += [(m.parameters, ("models", i, "parameters")) for i, m in enumerate(config.models)]
    groups += [(s.parameters, ("slices", i, "parameters")) for i, s in enumerate(config.slices)]
    for values, at in groups:
        for name in values:
            if method.parameter(name) is None:
                known = ", ".join(p.name for p in method.parameters) or "none"
                raise ConvertError(
                    f"{config.where(*at, name)}: {method.name} takes no parameter {name!r}; "
                    f"expected one of: {known}"
                )


def _layers(outputs: Sequence[OutputTensor]) -> int:
    return max((o.layer + 1 for o in outputs if o.layer is not None), default=0)


def _with_parameters(
    config: MergeConfig, method: MergeMethod, out: OutputTensor, layers: int
) -> OutputTensor:
    """`out` with every parameter of `method` resolved for it (per model and global)."""
    if not out.merged:
        return out
    per_model: dict[str, list[Any]] = {}
    values: dict[str, Any] = {}
    for parameter in method.parameters:
        if parameter.per_model:
            per_model[parameter.name] = [
                _value(config, parameter.name, out, ref, layers, method) for ref in out.refs
            ]
        else:
            values[parameter.name] = _value(config, parameter.name, out, None, layers, method)
    return out.with_parameters(per_model, values)


def _value(
    config: MergeConfig,
    name: str,
    out: OutputTensor,
    ref: ModelRef | None,
    layers: int,
    method: MergeMethod,
) -> Any:
    """A parameter's value for `out` (and model `ref`): the model's own, else the slice's,
    else the top level's, else the default; checked against the method's range."""
    parameter = method.parameter(name)
    assert parameter is not None
    where = ref.where if ref is not None and name in ref.parameters else config.where("parameters")
    scopes = [ref.parameters if ref is not None else {}, out.slice_parameters, config.parameters]
    raw = next((s[name] for s in scopes if name in s), None)
    value = None if raw is None else value_for(raw, out.source_name, layers, where)
    if value is None:
        value = parameter.default
    if value is None:
        model = f" for model {ref.alias!r}" if ref is not None else ""
        raise ConvertError(
            f"{where}: {method.name} needs parameter {name!r}{model} (tensor {out.name!r}); "
            "expected a value"
        )
    problem = parameter.check(value)
    if problem is not None:
        raise ConvertError(f"{where}: parameter {name!r} = {value!r}: {problem}")
    return value
