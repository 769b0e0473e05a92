"""LazySetOutput: the outputs of a function are handed to a callback param as soon as each
exists, and the function returns the unit tuple.

The function takes `fset_output` (`R.Callable([R.Prim("int64"), R.Object], R.Object)`,
impure) where TVM puts it: right after the runtime inputs when `num_input` is declared (which
then counts it), else as the last param (and no `num_input` is added). It calls
`fset_output(R.prim_value(i), value)` after the binding defining output i, and at the very start
for a param returned as it is. Hand-offs are impure, so the function becomes impure and loses
its dataflow blocks. Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from lazyparams.ir import Function, TupleStructInfo, Var
from lazyparams.transform.base import NamedFunctionPass
from lazyparams.transform.lazy_inputs import weight_inputs
from lazyparams.transform.lazy_rewrite import CallStyle, LazyStyle, rewrite_lazy
from lazyparams.transform.to_non_dataflow import to_non_dataflow
from lazyparams.transform.util import CALLBACK_SINFO, num_input


class LazySetOutput(NamedFunctionPass):
    """Hand outputs off through an `fset_output(index, value)` callback param.

    Applies to functions whose name ends with `transform_params`, or to `func_names`. With
    no `num_input` the callback comes last, so a later `LazyGetInput` would take it for a
    weight: run `LazyGetInput` first (it declares `num_input`), as TVM's pipeline does.
    """

    def transform_function(self, name: str, func: Function) -> Function:
        declared = "num_input" in func.attrs
        first = num_input(func, name, self.name) if declared else len(func.params)
        no_weights = weight_inputs(func, len(func.params))
        fset = Var("fset_output", CALLBACK_SINFO)
        params = (*func.params[:first], fset, *func.params[first:])
        style = LazyStyle(None, CallStyle(fset), return_handles=False)
        lazy = rewrite_lazy(func, no_weights, style, params, f"{self.name}: function {name!r}")
        attrs = {**func.attrs, "num_input": first + 1} if declared else dict(func.attrs)
        unit = TupleStructInfo(())
        return to_non_dataflow(Function(params, lazy.body, unit, False, attrs))
