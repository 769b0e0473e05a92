"""ExprVisitor and ExprMutator: the traversals every analysis and pass subclasses.

Dispatch is by node type to `visit_<kind>_` methods. The mutator rebuilds only what changed and
re-emits bindings through a BlockBuilder, remapping vars whose values were rewritten.
"""

from __future__ import annotations

from lazyparams.errors import LazyParamsError
from lazyparams.ir.block_builder import BlockBuilder
from lazyparams.ir.expr import (
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from lazyparams.ir.infer import struct_info_of

_METHOD = {
    DataflowVar: "visit_dataflow_var_",
    Var: "visit_var_",
    Call: "visit_call_",
    Tuple: "visit_tuple_",
    TupleGetItem: "visit_tuple_getitem_",
    Constant: "visit_constant_",
    PrimValue: "visit_prim_value_",
    ShapeExpr: "visit_shape_expr_",
    StringImm: "visit_string_imm_",
    ExternFunc: "visit_extern_func_",
    GlobalVar: "visit_global_var_",
    Op: "visit_op_",
    SeqExpr: "visit_seq_expr_",
    If: "visit_if_",
    Function: "visit_function_",
}


def _method(expr: Expr) -> str:
    """The name of the `visit_*_` hook for `expr`'s node type."""
    name = _METHOD.get(type(expr))
    if name is None:
        raise LazyParamsError(f"expected a Relax expression, got {type(expr).__name__}")
    return name


class _BindingWalk:
    """The walk over a block's bindings that the visitor and the mutator share."""

    def visit_binding_block(self, block: BindingBlock) -> None:
        """Visit every binding of a block, in order (a mutator re-emits each into its builder)."""
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_binding(self, binding: Binding) -> None:
        """Dispatch on the binding kind."""
        if isinstance(binding, MatchCast):
            self.visit_match_cast_(binding)
        elif isinstance(binding, VarBinding):
            self.visit_var_binding_(binding)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        raise NotImplementedError

    def visit_match_cast_(self, binding: MatchCast) -> None:
        raise NotImplementedError


class ExprVisitor(_BindingWalk):
    """Walks an expression tree in evaluation order; override `visit_*_` hooks to observe."""

    def visit_expr(self, expr: Expr) -> None:
        """Visit `expr` and everything inside it."""
        getattr(self, _method(expr))(expr)

    def visit_var_(self, var: Var) -> None:
        """A use of a var."""

    def visit_dataflow_var_(self, var: DataflowVar) -> None:
        """A use of a dataflow var (defaults to `visit_var_`)."""
        self.visit_var_(var)

    def visit_var_def(self, var: Var) -> None:
        """The definition of a var (a param or a binding's left side)."""

    def visit_call_(self, call: Call) -> None:
        self.visit_expr(call.op)
        for arg in call.args:
            self.visit_expr(arg)

    def visit_tuple_(self, tup: Tuple) -> None:
        for item in tup.fields:
            self.visit_expr(item)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> None:
        self.visit_expr(item.tuple_value)

    def visit_constant_(self, const: Constant) -> None:
        """A tensor constant (a leaf)."""

    def visit_prim_value_(self, value: PrimValue) -> None:
        """A prim value (a leaf)."""

    def visit_shape_expr_(self, shape: ShapeExpr) -> None:
        """A shape expression (a leaf)."""

    def visit_string_imm_(self, value: StringImm) -> None:
        """A string (a leaf)."""

    def visit_extern_func_(self, func: ExternFunc) -> None:
        """An extern function name (a leaf)."""

    def visit_global_var_(self, gvar: GlobalVar) -> None:
        """A reference to a module function (a leaf)."""

    def visit_op_(self, op: Op) -> None:
        """An operator (a leaf)."""

    def visit_function_(self, func: Function) -> None:
        for param in func.params:
            self.visit_var_def(param)
        self.visit_expr(func.body)

    def visit_seq_expr_(self, seq: SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.visit_expr(seq.body)

    def visit_if_(self, node: If) -> None:
        """The condition, then each branch (whose bindings define vars local to it)."""
        self.visit_expr(node.cond)
        self.visit_expr(node.true_branch)
        self.visit_expr(node.false_branch)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)


class ExprMutator(_BindingWalk):
    """Rebuilds an expression, re-emitting bindings through `self.builder`.

    A binding whose value is unchanged keeps its var; one whose value changed gets a new var of
    the same name with inferred struct info, and later uses are remapped to it (`var_remap`).
    """

    def __init__(self) -> None:
        self.builder = BlockBuilder()
        self.var_remap: dict[Var, Expr] = {}

    def visit_expr(self, expr: Expr) -> Expr:
        """The rewritten form of `expr` (the same object when nothing inside changed)."""
        result: Expr = getattr(self, _method(expr))(expr)
        return result

    def visit_var_(self, var: Var) -> Expr:
        return self.var_remap.get(var, var)

    def visit_dataflow_var_(self, var: DataflowVar) -> Expr:
        return self.visit_var_(var)

    def visit_call_(self, call: Call) -> Expr:
        op = self.visit_expr(call.op)
        args = tuple(self.visit_expr(a) for a in call.args)
        if op is call.op and all(a is b for a, b in zip(args, call.args, strict=True)):
            return call
        return Call(op, args, call.attrs, call.sinfo_args)

    def visit_tuple_(self, tup: Tuple) -> Expr:
        fields = tuple(self.visit_expr(f) for f in tup.fields)
        if all(a is b for a, b in zip(fields, tup.fields, strict=True)):
            return tup
        return Tuple(fields)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> Expr:
        value = self.visit_expr(item.tuple_value)
        return item if value is item.tuple_value else TupleGetItem(value, item.index)

    def _leaf(self, expr: Expr) -> Expr:
        return expr

    visit_constant_ = _leaf
    visit_prim_value_ = _leaf
    visit_shape_expr_ = _leaf
    visit_string_imm_ = _leaf
    visit_extern_func_ = _leaf
    visit_global_var_ = _leaf
    visit_op_ = _leaf

    def visit_function_(self, func: Function) -> Expr:
        body = self.visit_expr(func.body)
        if body is func.body:
            return func
        assert isinstance(body, SeqExpr)
        return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)

    def visit_seq_expr_(self, seq: SeqExpr) -> Expr:
        for block in seq.blocks:
            self.builder.begin_block(isinstance(block, DataflowBlock))
            self.visit_binding_block(block)
        self.builder.end_block()
        body = self.visit_expr(seq.body)
        blocks = self.builder.take_blocks()
        if body is seq.body and _same_blocks(blocks, seq.blocks):
            return seq
        return SeqExpr(blocks, body)

    def visit_if_(self, node: If) -> Expr:
        """The condition, then each branch rebuilt in a scope of its own."""
        return node.with_branches(self.visit_branch, self.visit_expr(node.cond))

    def visit_branch(self, branch: SeqExpr) -> SeqExpr:
        """A branch of an If, its blocks built apart from the enclosing function's."""
        with self.builder.nested_scope():
            result = self.visit_expr(branch)
        assert isinstance(result, SeqExpr)
        return result

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self.visit_expr(binding.value)
        if value is binding.value:
            self.builder.emit_binding(binding)
            return
        var = self.builder.new_var(
            binding.var.name_hint,
            struct_info_of(value),
            dataflow=isinstance(binding.var, DataflowVar),
        )
        self.builder.emit_binding(VarBinding(var, value))
        self.var_remap[binding.var] = var

    def visit_match_cast_(self, binding: MatchCast) -> None:
        value = self.visit_expr(binding.value)
        if value is binding.value:
            self.builder.emit_binding(binding)
        else:
            self.builder.emit_binding(MatchCast(binding.var, value, binding.struct_info))


def _same_blocks(new: tuple[BindingBlock, ...], old: tuple[BindingBlock, ...]) -> bool:
    """Whether re-emitted blocks hold exactly the original bindings, in blocks of the same kinds."""
    return len(new) == len(old) and all(
        type(a) is type(b)
        and len(a.bindings) == len(b.bindings)
        and all(x is y for x, y in zip(a.bindings, b.bindings, strict=True))
        for a, b in zip(new, old, strict=True)
    )
