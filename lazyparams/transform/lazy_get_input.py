"""LazyGetInput: the weights of a function become loads through a callback param.

The function takes `fget_param` (`R.Callable([R.Prim("int64"), R.Object], R.Object)`, impure)
right after its runtime inputs, and reads weight i as `fget_param(R.prim_value(i), R.str(name))`
at its first use, `match_cast` to the weight's struct info so that a wrong weight is refused
naming its index; `num_input` counts the callback. Loads are impure, so the function becomes
impure and loses its dataflow blocks. Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from lazyparams.errors import TransformError
from lazyparams.ir import FuncStructInfo, Function, Var
from lazyparams.transform.base import NamedFunctionPass
from lazyparams.transform.lazy_inputs import weight_inputs
from lazyparams.transform.lazy_rewrite import CallStyle, LazyStyle, rewrite_lazy
from lazyparams.transform.to_non_dataflow import to_non_dataflow
from lazyparams.transform.util import CALLBACK_SINFO, num_input


class LazyGetInput(NamedFunctionPass):
    """Load weights on demand through an `fget_param(index, name)` callback param.

    Applies to functions whose name ends with `transform_params`, or to `func_names`.
    """

    def transform_function(self, name: str, func: Function) -> Function:
        first = num_input(func, name, self.name)
        inputs = weight_inputs(func, first)
        _refuse_callbacks(func.params[first:], f"{self.name}: function {name!r}")
        fget = Var("fget_param", CALLBACK_SINFO)
        params = (*func.params[:first], fget)
        style = LazyStyle(CallStyle(fget, (), with_name=True), None, check_loads=True)
        lazy = rewrite_lazy(func, inputs, style, params, f"{self.name}: function {name!r}")
        attrs = {**func.attrs, "num_input": first + 1}
        return to_non_dataflow(Function(params, lazy.body, lazy.ret_struct_info, False, attrs))


def _refuse_callbacks(weights: tuple[Var, ...], context: str) -> None:
    """A callable among the weights is a callback param left outside `num_input` (say by
    `LazySetOutput` run first on a function without `num_input`)."""
    for param in weights:
        if isinstance(param.struct_info, FuncStructInfo):
            raise TransformError(
                f"{context}: expected weight params, got the callable {param.name_hint!r} after "
                "the runtime inputs; declare it in num_input or run LazyGetInput before "
                "LazySetOutput"
            )
