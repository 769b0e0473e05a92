"""The rewriting engine shared by the lazy passes: weights become loads at their first read,
outputs are handed off right after their definition.

`LazyTransformParams` uses it with `get_item`/`set_item` externs, `LazyGetInput` and
`LazySetOutput` with callback params. Loads and hand-offs go where the data flow puts them:
1. before a binding, every weight it reads that is not loaded yet (a `params[i]` alias
   binding becomes the load itself; a later alias of the same weight is dropped);
2. a load that some read needs typed (every load, when checked) is `R.match_cast(load, sinfo)`,
   which also defines the weight's symbolic dims; a binding using a dim no loaded weight
   defines yet loads it first;
3. at the start, the hand-off of every param returned as it is; after a binding (or a load),
   the hand-off of every output index it defines;
4. where the output tuple was built, the hand-offs of constants, then the result: the tuple
   of hand-off results, or the unit tuple in callback style.
Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lazyparams.errors import StructInfoError, TransformError
from lazyparams.ir import (
    Binding,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExprMutator,
    Function,
    MatchCast,
    ObjectStructInfo,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    StructInfo,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    prim_value,
    struct_info_of,
)
from lazyparams.ir.prim import PrimVar
from lazyparams.transform.lazy_inputs import WeightInputs, weight_reads
from lazyparams.transform.lazy_outputs import OutputAnchors, output_anchors, output_site
from lazyparams.transform.util import erase_dims, packed_call, prim_vars


@dataclass(frozen=True, slots=True)
class CallStyle:
    """How loads or hand-offs are called: the callee (an ExternFunc or a callback param), extra
    operands passed before the index, and whether a load also passes the weight's name."""

    callee: Expr
    extra_args: tuple[Expr, ...] = ()
    with_name: bool = False


@dataclass(frozen=True, slots=True)
class LazyStyle:
    """What to make lazy: loads (`load`), hand-offs (`store`), what the function returns once
    its outputs are handed off (`return_handles`: the hand-off results, else unit), and whether
    every load is checked against its weight's struct info (`check_loads`), not only those a
    read needs typed."""

    load: CallStyle | None
    store: CallStyle | None
    return_handles: bool = True
    check_loads: bool = False


@dataclass(frozen=True, slots=True)
class LazyBody:
    """The rewritten body, its result struct info and the vars bound to loads."""

    body: SeqExpr
    ret_struct_info: StructInfo
    loads: tuple[Var, ...]


def rewrite_lazy(
    func: Function, inputs: WeightInputs, style: LazyStyle, params: tuple[Var, ...], context: str
) -> LazyBody:
    """Rewrite the body of `func` in `style`; `params` are the new function's params and
    `context` names the pass and function in errors."""
    return _LazyRewriter(func, inputs, style, params, context).run()


def _is_leaf(expr: Expr) -> bool:
    return isinstance(expr, Var | Constant | PrimValue | StringImm | ShapeExpr)


class _LazyRewriter(ExprMutator):
    """Re-emits a function's bindings in order, adding loads and hand-offs (module steps)."""

    def __init__(
        self,
        func: Function,
        inputs: WeightInputs,
        style: LazyStyle,
        params: tuple[Var, ...],
        context: str,
    ) -> None:
        super().__init__()
        self.func, self.inputs, self.style, self.context = func, inputs, style, context
        self.site = output_site(func) if style.store is not None else None
        self.reads = weight_reads(func, inputs, self.site.opaque if self.site else None, context)
        self.anchors = (
            output_anchors(func, self.site, inputs, self.reads.aliases)
            if self.site is not None
            else OutputAnchors()
        )
        self.param_dims = prim_vars([p.struct_info for p in params])
        self.defined: set[PrimVar] = set(self.param_dims)
        self.weight_dims = prim_vars(inputs.sinfos)
        self.loaded: dict[int, Var] = {}
        self.handles: dict[int, Var] = {}
        self.point_result: Expr | None = None
        self.block_id, self.point_block = 0, len(func.body.blocks)
        for block_id, block in enumerate(func.body.blocks):
            if self.site is not None and self.site.tuple_binding in block.bindings:
                self.point_block = block_id
        for var in (*func.params, *params, *(b.var for b in func.bindings())):
            self.builder.names.reserve(var.name_hint)

    # Driving --------------------------------------------------------------------------------

    def run(self) -> LazyBody:
        index = 0
        blocks = self.func.body.blocks
        for self.block_id, block in enumerate(blocks):
            self.builder.begin_block(isinstance(block, DataflowBlock))
            if self.block_id == 0:
                self._start_hand_offs()
            for binding in block.bindings:
                self._rewrite_binding(binding, index)
                index += 1
        self.block_id = len(blocks)
        if not blocks or isinstance(blocks[-1], DataflowBlock):
            self.builder.begin_block(False)
        if not blocks:
            self._start_hand_offs()
        result = self._finish()
        body = SeqExpr(self.builder.take_blocks(), result)
        return LazyBody(body, self._ret_struct_info(result), tuple(self.loaded.values()))

    def _rewrite_binding(self, binding: Binding, index: int) -> None:
        weight = self.reads.aliases.get(binding.var)
        if weight is not None:
            if weight not in self.loaded:
                self._load(weight, binding.var.name_hint, keep_name=True)
            return
        self._define_dims(binding)
        for weight in self.reads.reads[index]:
            self._ensure_loaded(weight)
        if self.site is not None and binding is self.site.tuple_binding:
            self._output_point(binding)
            return
        self._emit_rewritten(binding)
        for out in self.anchors.after_binding.get(binding.var, ()):
            self._hand_off(out)

    def _finish(self) -> Expr:
        for weight in self.reads.result_reads:
            self._ensure_loaded(weight)
        if self.site is None:
            return self.visit_expr(self.func.body.body)
        if self.point_result is None:
            self._output_point(None)
        assert self.point_result is not None
        return self.point_result

    def _ret_struct_info(self, result: Expr) -> StructInfo:
        if self.site is None:
            return erase_dims(self.func.ret_struct_info, self.param_dims)
        return struct_info_of(result)

    # Loads ----------------------------------------------------------------------------------

    def _ensure_loaded(self, weight: int) -> None:
        if weight not in self.loaded:
            if self.inputs.tuple_param is None:  # the weight param's own name is free now
                self._load(weight, self.inputs.weights[weight].name_hint, keep_name=True)
            else:
                name = self.inputs.names[weight]
                self._load(weight, name if name.isidentifier() else "lv", keep_name=False)

    def _load(self, weight: int, hint: str, keep_name: bool) -> None:
        load = self.style.load
        assert load is not None
        args = [*load.extra_args, prim_value(weight)]
        if load.with_name:
            args.append(StringImm(self.inputs.names[weight]))
        call = packed_call(load.callee, args)
        sinfo = self.inputs.sinfos[weight]
        dataflow = self._in_dataflow() and self.reads.blocks.get(weight, set()) <= {self.block_id}
        typed = self.style.check_loads or weight in self.reads.typed
        if typed and not isinstance(sinfo, ObjectStructInfo):
            var = self._new_var(hint, sinfo, dataflow, keep_name)
            self.builder.emit_binding(MatchCast(var, call, sinfo))
            self.defined.update(prim_vars(sinfo))
        else:
            var = self._new_var(hint, ObjectStructInfo(), dataflow, keep_name)
            self.builder.emit_binding(VarBinding(var, call))
        self.loaded[weight] = var
        for out in self.anchors.after_load.get(weight, ()):
            self._hand_off(out)

    def _define_dims(self, binding: Binding) -> None:
        """Load the weights defining symbolic dims that `binding` uses but nothing defined."""
        if not self.weight_dims:
            return
        needed = prim_vars(binding.value)
        if isinstance(binding, VarBinding):
            needed += prim_vars(binding.var.struct_info)
        for dim in needed:
            if dim in self.defined:
                continue
            for weight, sinfo in enumerate(self.inputs.sinfos):
                if weight not in self.loaded and dim in prim_vars(sinfo):
                    self._ensure_loaded(weight)
                    break

    def _in_dataflow(self) -> bool:
        return self.builder.in_dataflow

    def _new_var(self, hint: str, sinfo: StructInfo, dataflow: bool, keep_name: bool) -> Var:
        """A new var; `keep_name` reuses the name of a var it replaces (every name of the
        input is reserved, so fresh names never clash with one)."""
        if not keep_name:
            return self.builder.new_var(hint, sinfo, dataflow=dataflow)
        return (DataflowVar if dataflow else Var)(hint, sinfo)

    # Rewriting reads --------------------------------------------------------------------------

    def visit_var_(self, var: Var) -> Expr:
        weight = self.reads.aliases.get(var)
        if weight is None:
            weight = self.inputs.index_of(var)
        return self.loaded[weight] if weight is not None else super().visit_var_(var)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> Expr:
        weight = self.inputs.index_of(item)
        return self.loaded[weight] if weight is not None else super().visit_tuple_getitem_(item)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self.visit_expr(binding.value)
        if value is binding.value:
            self.builder.emit_binding(binding)
            return
        dataflow = isinstance(binding.var, DataflowVar)
        var = self._new_var(binding.var.name_hint, struct_info_of(value), dataflow, True)
        self.builder.emit_binding(VarBinding(var, value))
        self.var_remap[binding.var] = var

    def _emit_rewritten(self, binding: Binding) -> None:
        try:
            self.visit_binding(binding)
        except StructInfoError as err:
            raise TransformError(
                f"{self.context}, binding {binding.var.name_hint!r}: expected operands a lazy "
                f"load can feed, got: {err}"
            ) from err
        if isinstance(binding, MatchCast):
            self.defined.update(prim_vars(binding.struct_info))

    # Hand-offs ------------------------------------------------------------------------------

    def _hand_off(self, out: int) -> None:
        store = self.style.store
        assert store is not None and self.site is not None
        value = self.visit_expr(self.site.fields[out])
        if not _is_leaf(value):
            value = self.builder.emit(value, "lv")
        call = packed_call(store.callee, [*store.extra_args, prim_value(out), value])
        returned = self.style.return_handles
        local = not returned or (
            self.site.tuple_binding is not None and self.block_id == self.point_block
        )
        var = self._new_var("lv", ObjectStructInfo(), self._in_dataflow() and local, False)
        self.builder.emit_binding(VarBinding(var, call))
        self.handles[out] = var

    def _start_hand_offs(self) -> None:
        for out in self.anchors.at_start:
            self._hand_off(out)

    def _output_point(self, binding: Binding | None) -> None:
        assert self.site is not None
        for out in self.anchors.at_point:
            self._hand_off(out)
        if not self.style.return_handles:
            self.point_result = Tuple(())
            return
        handles = tuple(self.handles[i] for i in range(len(self.site.fields)))
        result: Expr = handles[0] if self.site.single else Tuple(handles)
        if binding is not None:
            is_local = isinstance(binding.var, DataflowVar)
            var = self._new_var(binding.var.name_hint, struct_info_of(result), is_local, True)
            self.builder.emit_binding(VarBinding(var, result))
            self.var_remap[binding.var] = var
            result = var
        self.point_result = result
