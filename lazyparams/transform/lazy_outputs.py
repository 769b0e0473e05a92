"""Where a transform function's outputs are, and where each one is handed off.

The outputs are the fields of the returned tuple (bound to a var or written inline), the fields
of a returned tuple-typed value, or one returned value. Each output index is set right after the
binding that defines its value, right after the load of the weight it passes through, at the
very start for a param it returns as it is (as TVM does: the param exists before anything
runs), or, for constants, where the output tuple is built. Imports `ir` and `analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lazyparams.analysis.liveness import used_vars
from lazyparams.ir import (
    Binding,
    Expr,
    Function,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
)
from lazyparams.transform.lazy_inputs import WeightInputs


@dataclass(frozen=True, slots=True)
class OutputSite:
    """The outputs of a function.

    `fields[i]` is output i; `single` says the function returns one bare value;
    `tuple_binding` is the binding of the returned tuple when it can be rebuilt in place (the
    result var is read by nothing else); `opaque` is that binding or the inline result, whose
    fields may take an opaque loaded object.
    """

    fields: tuple[Expr, ...]
    single: bool
    tuple_binding: VarBinding | None
    opaque: Binding | Expr | None


def output_site(func: Function) -> OutputSite:
    """Find the outputs of `func` from its result expression."""
    result = func.body.body
    if isinstance(result, Tuple):
        return OutputSite(result.fields, False, None, result)
    if not isinstance(result, Var):
        return OutputSite((result,), True, None, result)
    binding = next((b for b in func.bindings() if b.var is result), None)
    if isinstance(binding, VarBinding) and isinstance(binding.value, Tuple):
        if _read_by_bindings(func, result):
            return OutputSite(binding.value.fields, False, None, None)
        return OutputSite(binding.value.fields, False, binding, binding)
    if isinstance(result.struct_info, TupleStructInfo):
        count = len(result.struct_info.fields)
        return OutputSite(tuple(TupleGetItem(result, i) for i in range(count)), False, None, None)
    return OutputSite((result,), True, None, result)


def _read_by_bindings(func: Function, var: Var) -> bool:
    return any(var in used_vars(b.value) for b in func.bindings())


@dataclass(slots=True)
class OutputAnchors:
    """Where each output index is set: at the start (a param kept as one), after a binding (by
    its var), after a weight's load, or at the output point (where the output tuple is built)."""

    at_start: list[int] = field(default_factory=list)
    after_binding: dict[Var, list[int]] = field(default_factory=dict)
    after_load: dict[int, list[int]] = field(default_factory=dict)
    at_point: list[int] = field(default_factory=list)


def output_anchors(
    func: Function, site: OutputSite, inputs: WeightInputs, aliases: dict[Var, int]
) -> OutputAnchors:
    """Anchor every output index of `site` (see `OutputAnchors`)."""
    bound = {b.var for b in func.bindings()} - set(aliases)
    anchors = OutputAnchors()
    for index, value in enumerate(site.fields):
        weight = inputs.index_of(value)
        if weight is None and isinstance(value, Var):
            weight = aliases.get(value)
        if isinstance(value, TupleGetItem) and value.tuple_value in bound:
            value = value.tuple_value
        if weight is not None:
            anchors.after_load.setdefault(weight, []).append(index)
        elif isinstance(value, Var) and value in bound:
            anchors.after_binding.setdefault(value, []).append(index)
        elif isinstance(value, Var) and value in func.params:
            anchors.at_start.append(index)
        else:
            anchors.at_point.append(index)
    return anchors
