"""BundleModelParams: the weights of a function with `num_input` become one tuple param.

The params after the first `num_input` are replaced by `params: R.Tuple(...)` (an empty tuple
when there are none, so a caller may always pass a transform's output), and each weight is read
as `w = params[i]` right before its first use. `num_input` is unchanged; a function whose
weights are one tuple param already is left as it is. Imports `ir` and `analysis`.
"""

from __future__ import annotations

from lazyparams.analysis.liveness import used_vars
from lazyparams.ir import (
    Binding,
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExprMutator,
    Function,
    MatchCast,
    ObjectStructInfo,
    SeqExpr,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
)
from lazyparams.transform.base import FunctionPass
from lazyparams.transform.util import num_input


class BundleModelParams(FunctionPass):
    """Bundle the weights of every function with `num_input` into one tuple param named
    `param_tuple_name` (see the module docstring)."""

    def __init__(self, param_tuple_name: str = "params") -> None:
        self.param_tuple_name = param_tuple_name

    def transform_function(self, name: str, func: Function) -> Function:
        if "num_input" not in func.attrs:
            return func
        first = num_input(func, name, self.name)
        weights = func.params[first:]
        if len(weights) == 1 and isinstance(weights[0].struct_info, TupleStructInfo):
            return func  # bundled already (a lifted transform takes its weights so)
        sinfo = TupleStructInfo(tuple(w.struct_info or ObjectStructInfo() for w in weights))
        bundle = Var(self.param_tuple_name, sinfo)
        body = _Bundler(func, weights, bundle).run()
        return Function(
            (*func.params[:first], bundle), body, func.ret_struct_info, func.is_pure, func.attrs
        )


class _Bundler(ExprMutator):
    """Re-emits the body, reading each weight from the tuple right before its first use."""

    def __init__(self, func: Function, weights: tuple[Var, ...], bundle: Var) -> None:
        super().__init__()
        self.func, self.bundle = func, bundle
        self.index = {w: i for i, w in enumerate(weights)}
        self.blocks_of: dict[Var, set[int]] = {}
        for block_id, block in enumerate(func.body.blocks):
            for binding in block.bindings:
                for var in used_vars(binding.value):
                    self.blocks_of.setdefault(var, set()).add(block_id)
        for var in used_vars(func.body.body):
            self.blocks_of.setdefault(var, set()).add(-1)

    def run(self) -> SeqExpr:
        blocks: list[BindingBlock] = []
        for block_id, block in enumerate(self.func.body.blocks):
            dataflow = isinstance(block, DataflowBlock)
            bindings: list[Binding] = []
            for binding in block.bindings:
                bindings += self._reads(binding.value, block_id if dataflow else None)
                bindings.append(self._rebuilt(binding))
            blocks.append((DataflowBlock if dataflow else BindingBlock)(tuple(bindings)))
        tail = self._reads(self.func.body.body, None)
        if tail:
            blocks.append(BindingBlock(tuple(tail)))
        return SeqExpr(tuple(blocks), self.visit_expr(self.func.body.body))

    def _reads(self, expr: Expr, dataflow_block: int | None) -> list[Binding]:
        """`w = params[i]` for each weight `expr` reads first; local to a dataflow block when
        nothing outside that block reads it."""
        found: list[Binding] = []
        for var in used_vars(expr):
            if var in self.index and var not in self.var_remap:
                local = dataflow_block is not None and self.blocks_of[var] == {dataflow_block}
                new = (DataflowVar if local else Var)(var.name_hint, var.struct_info)
                self.var_remap[var] = new
                found.append(VarBinding(new, TupleGetItem(self.bundle, self.index[var])))
        return found

    def _rebuilt(self, binding: Binding) -> Binding:
        value = self.visit_expr(binding.value)
        if isinstance(binding, MatchCast):
            return MatchCast(binding.var, value, binding.struct_info)
        return VarBinding(binding.var, value)
