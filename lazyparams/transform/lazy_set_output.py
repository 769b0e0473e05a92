"""LazySetOutput: the outputs of a function are handed to a callback param as soon as each
exists, and the function returns the unit tuple.

The function takes `fset_output` (`R.Callable([R.Prim("int64"), R.Object], R.Object)`,
impure) right after its runtime inputs and calls `fset_output(R.prim_value(i), value)` after
the binding defining output i; `num_input` counts the callback. Hand-offs are impure, so the
function becomes impure and loses its dataflow blocks. Imports `ir`, `op` and `analysis`.
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

    Applies to functions whose name ends with `transform_params`, or to `func_names`.
    """

    def transform_function(self, name: str, func: Function) -> Function:
        first = num_input(func, name, self.name)
        no_weights = weight_inputs(func, len(func.params))
        fset = Var("fset_output", CALLBACK_SINFO)
        params = (*func.params[:first], fset, *func.params[first:])
        style = LazyStyle(None, CallStyle(fset), return_handles=False)
        lazy = rewrite_lazy(func, no_weights, style, params, f"{self.name}: function {name!r}")
        attrs = {**func.attrs, "num_input": first + 1}
        unit = TupleStructInfo(())
        return to_non_dataflow(Function(params, lazy.body, unit, False, attrs))
