"""Compiling a transform against a checkpoint: trace it, keep the outputs wanted, lower it.

Tracing against the source's header checks every input the transform reads (name, shape,
dtype) before any data exists. The stages are those `lazyparams show` prints: `traced` (the
eager function), `scheduled` (reordered for memory) and `lazy` (the standard pipeline's
output, which the VM runs). Imports `ir`, `analysis`, `transform`, `io` and `frontend`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from lazyparams.analysis.liveness import used_vars
from lazyparams.engine.model_spec import ModelSpec
from lazyparams.errors import ConvertError
from lazyparams.frontend import trace
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Function,
    IRModule,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    struct_info_of,
)
from lazyparams.transform.pipeline import standard_pipeline
from lazyparams.transform.schedule_for_memory import ScheduleForMemory

FUNC = "transform_params"
"""The name of the transform function in traced and lazy modules."""

STAGES = ("traced", "scheduled", "lazy")


def trace_transform(fn: Callable[..., Any] | ModelSpec, source: CheckpointSource) -> IRModule:
    """The eager module of `fn` over the tensors `source` lists (header only, no data); a model
    module's is its lifted transform."""
    if isinstance(fn, ModelSpec):
        return fn.traced(source, FUNC)
    return trace(fn, source, name=FUNC)


def function_of(mod: IRModule) -> Function:
    """The transform function of a traced or lazy module."""
    func = mod[FUNC]
    assert isinstance(func, Function)
    return func


def names_of(func: Function, key: str) -> tuple[str, ...]:
    """The `input_names` or `output_names` a traced function records."""
    return tuple(func.attrs[key])


def output_infos(traced: IRModule) -> tuple[TensorInfo, ...]:
    """Name, shape and dtype of every output of a traced module, in output order."""
    func = function_of(traced)
    sinfo = func.ret_struct_info
    assert isinstance(sinfo, TupleStructInfo)
    infos = []
    for name, field in zip(names_of(func, "output_names"), sinfo.fields, strict=True):
        shape = field.static_shape if isinstance(field, TensorStructInfo) else None
        if shape is None or not isinstance(field, TensorStructInfo):
            raise ConvertError(f"output {name!r}: expected a tensor of static shape, got {field}")
        infos.append(TensorInfo.of(name, shape, field.dtype))
    return tuple(infos)


def used_inputs(traced: IRModule) -> tuple[int, ...]:
    """Indices of the inputs a traced function reads (its `params[i]` bindings), sorted."""
    func = function_of(traced)
    params = func.params[0]
    return tuple(
        sorted(
            b.value.index
            for b in func.bindings()
            if isinstance(b.value, TupleGetItem) and b.value.tuple_value is params
        )
    )


def select_outputs(traced: IRModule, keep: Collection[str]) -> IRModule:
    """The traced module computing only the outputs named in `keep`, in their original order.

    Bindings no kept output needs are dropped, input reads included, so the plan loads only
    what the kept outputs read. Numpy kernels count as pure here, as the frontend requires.
    """
    func = function_of(traced)
    names = names_of(func, "output_names")
    result = func.body.body
    bindings = func.bindings()
    out_binding = next(b for b in bindings if b.var is result)
    assert isinstance(out_binding.value, Tuple)
    chosen = [i for i, name in enumerate(names) if name in keep]
    fields = tuple(out_binding.value.fields[i] for i in chosen)
    ret = TupleStructInfo(tuple(struct_info_of(f) for f in fields))
    out_var = Var(out_binding.var.name_hint, ret)
    kept = [*_needed(bindings, Tuple(fields)), VarBinding(out_var, Tuple(fields))]
    attrs = {**func.attrs, "output_names": tuple(names[i] for i in chosen)}
    body = SeqExpr((BindingBlock(tuple(kept)),), out_var)
    new_func = Function(func.params, body, ret, func.is_pure, attrs)
    return traced.with_function(FUNC, new_func)


def _needed(bindings: list[Binding], result: Tuple) -> list[Binding]:
    """The bindings `result` depends on, in their order."""
    wanted = set(used_vars(result))
    kept: list[Binding] = []
    for binding in reversed(bindings):
        if binding.var in wanted:
            kept.append(binding)
            wanted.update(used_vars(binding.value))
    return kept[::-1]


def lower(traced: IRModule) -> IRModule:
    """The lazy module the VM runs: the standard pipeline applied to the transform function."""
    return standard_pipeline(func_names=[FUNC])(traced)


def stage(traced: IRModule, name: str) -> IRModule:
    """One of `STAGES` of a traced module."""
    if name == "traced":
        return traced
    if name == "scheduled":
        return ScheduleForMemory(func_names=[FUNC])(traced)
    if name == "lazy":
        return lower(traced)
    raise ConvertError(f"unknown stage {name!r}; expected one of {', '.join(STAGES)}")
