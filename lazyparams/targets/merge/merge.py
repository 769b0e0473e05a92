"""A merge configuration bound to the models it reads: every output tensor, its inputs and
parameters, checked before any data is read; then the merge itself, traced.

`bind_merge(config, sources)` checks the method (known, its inputs), the dtypes, every
parameter (known to the method, of the right kind, given where it has no default, each model's
values together) and every output tensor (present in each input, with one shape).
`MergeBinding.transform` then maps the source set's tensors (`ALIAS::NAME`) to the merged ones,
named as in the models: each input cast to the merge's dtype, merged, cast to the output dtype,
as mergekit does. Tensors are merged in mergekit's order (by their inputs' greatest name), so
that methods drawing random masks take them from one generator in the same order. Imports the
io layer and the merge methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.merge_config import MergeConfig, ModelRef
from lazyparams.io.source_set import SourceSet, qualified
from lazyparams.targets.merge import REQUIRED, MergeMethod, Parameter, TensorMerge, merge_method
from lazyparams.targets.merge.draws import SEEDS, MaskStream
from lazyparams.targets.merge.layout import FLOATS, Input, OutputTensor, dtype_name, lay_out_outputs
from lazyparams.targets.merge.parameters import evaluate

Key = tuple[str | int, ...]
"""The keys of a value in the configuration (for `MergeConfig.where`)."""


@dataclass(frozen=True, slots=True)
class MergeBinding:
    """A checked merge: the method, the outputs and what each reads (see the module)."""

    config: MergeConfig
    method: MergeMethod
    outputs: tuple[OutputTensor, ...]
    seed: int = 0

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The merged tensors, by output name, traced from the source set's `params`."""
        draws = MaskStream(self.seed)
        merged = {out.name: self._merge_one(out, params, draws) for out in self.merge_order()}
        return {out.name: merged[out.name] for out in self.outputs}

    def merge_order(self) -> list[OutputTensor]:
        """The outputs in the order mergekit merges them: by label, then as planned."""
        return sorted(self.outputs, key=lambda out: out.label)

    def _merge_one(
        self, out: OutputTensor, params: Mapping[str, Tensor], draws: MaskStream
    ) -> Tensor:
        if not out.merged:
            return params[qualified(out.inputs[0].alias, out.inputs[0].name)]
        models = [_cast(params[qualified(i.alias, i.name)], out.compute) for i in out.models]
        base = None if out.base is None else params[qualified(out.base.alias, out.base.name)]
        inputs = TensorMerge(
            out.name,
            models,
            None if base is None else _cast(base, out.compute),
            out.per_model,
            out.values,
            draws,
        )
        return _cast(self.method.merge(inputs), out.dtype)

    @property
    def layer_count(self) -> int | None:
        """How many layers the merged model has (None when no output names a layer)."""
        layers = [o.layer for o in self.outputs if o.layer is not None]
        return max(layers) + 1 if layers else None


def bind_merge(config: MergeConfig, sources: SourceSet, seed: int = 0) -> MergeBinding:
    """Check `config` against the models of `sources` and lay out every output tensor."""
    method = merge_method(config.method, config.where("merge_method"))
    if seed not in SEEDS:
        raise ConvertError(
            f"{config.path}: random seed {seed}: expected 0 <= seed < 2**32 (as mergekit's "
            "--random-seed)"
        )
    _check_dtypes(config)
    _check_parameter_names(config, method)
    outputs = lay_out_outputs(config, method, sources)
    resolved = tuple(_with_parameters(config, method, out) for out in outputs)
    return MergeBinding(config, method, resolved, seed)


def _cast(tensor: Tensor, dtype: str) -> Tensor:
    return tensor if tensor.dtype == dtype else tensor.astype(dtype)


def _check_dtypes(config: MergeConfig) -> None:
    for key in ("dtype", "out_dtype"):
        value = getattr(config, key)
        if value is not None and dtype_name(value) not in FLOATS:
            raise ConvertError(
                f"{config.where(key)}: {key} {value!r}: expected one of {', '.join(FLOATS)}"
            )


def _check_parameter_names(config: MergeConfig, method: MergeMethod) -> None:
    """Refuse a parameter the method does not take, and one for the whole merge given under a
    model (where it would have no effect), naming it and its line."""
    for values, at in _parameter_groups(config):
        for name in values:
            parameter = method.parameter(name)
            if parameter is None:
                known = ", ".join(p.name for p in method.parameters) or "none"
                raise ConvertError(
                    f"{config.where(*at, name)}: {method.name} takes no parameter {name!r}; "
                    f"expected one of: {known}"
                )
            under_a_model = at[0] == "models" or "sources" in at
            if under_a_model and not parameter.per_model:
                raise ConvertError(
                    f"{config.where(*at, name)}: {method.name}'s {name!r} is one value for the "
                    "whole merge; expected it under the top-level (or a slice's) parameters, "
                    "not a model's"
                )


def _parameter_groups(config: MergeConfig) -> list[tuple[Mapping[str, Any], Key]]:
    groups: list[tuple[Mapping[str, Any], Key]] = [(config.parameters, ("parameters",))]
    for piece_index, piece in enumerate(config.slices):
        groups.append((piece.parameters, ("slices", piece_index, "parameters")))
    for ref in config.models:
        groups.append((ref.parameters, (*_ref_key(config, ref), "parameters")))
    return groups


def _ref_key(config: MergeConfig, ref: ModelRef) -> Key:
    """Where a model's entry is: under `models`, or under a slice's `sources`."""
    for piece_index, piece in enumerate(config.slices):
        for index, source in enumerate(piece.sources):
            if source is ref:
                return ("slices", piece_index, "sources", index)
    return ("models", next(i for i, m in enumerate(config.models) if m is ref))


def _with_parameters(config: MergeConfig, method: MergeMethod, out: OutputTensor) -> OutputTensor:
    """`out` with every parameter of `method` resolved for it (per model and shared)."""
    if not out.merged:
        return out
    per_model: dict[str, list[Any]] = {}
    values: dict[str, Any] = {}
    for parameter in method.parameters:
        if parameter.per_model:
            per_model[parameter.name] = [
                _value(config, method, parameter, out, item) for item in out.models
            ]
        else:
            values[parameter.name] = _value(config, method, parameter, out, None)
    if method.check_model is not None:
        for index, item in enumerate(out.models):
            _check_model(config, method, out, item, {k: v[index] for k, v in per_model.items()})
    return out.with_parameters(per_model, values)


def _scopes(config: MergeConfig, out: OutputTensor, item: Input | None) -> list[Key]:
    """The settings that may give a parameter its value, the most particular first: the
    model's own entry, the slice's parameters, the top level's."""
    scopes: list[Key] = []
    if item is not None and item.ref is not None:
        scopes.append((*_ref_key(config, item.ref), "parameters"))
    if out.piece is not None:
        scopes.append(("slices", config.slices.index(out.piece), "parameters"))
    return [*scopes, ("parameters",)]


def _settings(config: MergeConfig, key: Key) -> Mapping[str, Any]:
    if key[0] == "parameters":
        return config.parameters
    if key[0] == "models":
        return config.models[int(key[1])].parameters
    piece = config.slices[int(key[1])]
    return piece.parameters if key[2] == "parameters" else piece.sources[int(key[3])].parameters


def _value(
    config: MergeConfig,
    method: MergeMethod,
    parameter: Parameter,
    out: OutputTensor,
    item: Input | None,
) -> Any:
    """A parameter's value for `out` (and input `item`): from the first scope that gives one,
    else the default; a per-model value's filters match the input's own tensor name."""
    tensor = out.name if item is None else item.name
    for key in _scopes(config, out, item):
        settings = _settings(config, key)
        if parameter.name in settings:
            where = config.where(*key, parameter.name)
            found = evaluate(settings[parameter.name], tensor, out.position, parameter, where)
            if found is not None:
                return found
    if parameter.default is REQUIRED:
        model = "" if item is None else f" for model {item.alias!r}"
        raise ConvertError(
            f"{config.where('parameters')}: {method.name} needs parameter {parameter.name!r}"
            f"{model} (tensor {tensor!r}); expected a value"
        )
    return parameter.default


def _check_model(
    config: MergeConfig,
    method: MergeMethod,
    out: OutputTensor,
    item: Input,
    values: Mapping[str, Any],
) -> None:
    assert method.check_model is not None
    problem = method.check_model(values)
    if problem is not None:
        key = _scopes(config, out, item)[0]
        shown = ", ".join(f"{k} {v!r}" for k, v in values.items())
        raise ConvertError(
            f"{config.where(*key)}: model {item.alias!r}, tensor {item.name!r} ({shown}): {problem}"
        )
