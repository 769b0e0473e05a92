"""well_formed: checks the invariants every pass must keep, naming the function and binding.

Scoping of vars and symbolic dims, dataflow-block rules, purity, struct info annotations against
op inference, call targets and tuple indices. Imports `ir` and `tir`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, cast

from lazyparams.analysis.describe import binding_text, callee_text, expr_text
from lazyparams.errors import StructInfoError, WellFormedError
from lazyparams.ir.describe import describe
from lazyparams.ir.expr import (
    Binding,
    Call,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.infer import is_pure_call, struct_info_of
from lazyparams.ir.module import IRModule
from lazyparams.ir.prim import PrimExpr, PrimVar
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.op.dims import dims_differ
from lazyparams.tir.nodes import PrimFunc


def well_formed(mod_or_func: IRModule | Function, check_purity: bool = True) -> None:
    """Raise `WellFormedError` naming the function and binding of the first broken invariant.

    Checked: a var used before its definition or outside its scope; a var defined twice; a
    DataflowVar used after its dataflow block, or bound outside one; an impure call inside a
    dataflow block; a binding var whose annotated struct info contradicts what the op infers
    (the annotation must equal the inferred struct info or be a less specific form of it); a
    call to a GlobalVar the module lacks (`call_tir` must name a PrimFunc); a tuple index out
    of range; a symbolic dim used before a param's or match_cast's struct info defines it; an
    If inside a dataflow block or on a condition that is not a boolean scalar (vars bound in a
    branch are visible only there).

    The seed's lazy output binds `R.call_packed("get_item", ...)` inside `R.dataflow()`, which
    the purity rule flags: externs are impure. Pass `check_purity=False` only for such
    seed-style output. A bare Function is checked without a module, so its GlobalVar targets
    are not looked up. Returns None when every invariant holds.
    """
    if isinstance(mod_or_func, Function):
        name = str(mod_or_func.attrs.get("global_symbol", "main"))
        _FunctionChecker(name, None, check_purity).check(mod_or_func)
        return
    if not isinstance(mod_or_func, IRModule):
        raise WellFormedError(
            f"well_formed: expected an IRModule or a Function, got {type(mod_or_func).__name__}"
        )
    for name, func in mod_or_func.relax_functions():
        _FunctionChecker(name, mod_or_func, check_purity).check(func)


class _FunctionChecker:
    """Checks one Relax function (and the functions nested in it) binding by binding."""

    def __init__(self, name: str, module: IRModule | None, check_purity: bool) -> None:
        self.name, self.module, self.check_purity = name, module, check_purity
        self.defined: dict[Var, str] = {}
        self.visible: set[Var] = set()
        self.dims: set[PrimVar] = set()
        self.where: str | tuple[int, Binding] = "the signature"
        self.in_dataflow = False

    def fail(self, problem: str) -> WellFormedError:
        """The error naming this function and the binding (or other place) being checked."""
        where = self.where
        if isinstance(where, tuple):  # rendered only on failure: well-formed code pays nothing
            where = f"binding {where[0]} `{binding_text(where[1])}`"
        return WellFormedError(f"function {self.name!r}, {where}: {problem}")

    # Scopes -------------------------------------------------------------------------------

    def check(self, func: Function) -> None:
        """Check params, then every block, then the result and the return struct info."""
        for index, param in enumerate(func.params):
            self.where = f"param {index} `{param.name_hint}`"
            if isinstance(param, DataflowVar):
                raise self.fail(
                    f"DataflowVar {param.name_hint!r} is a function param; "
                    "expected a Var (a DataflowVar may only be bound inside a dataflow block)"
                )
            self.define(param, f"param {index}")
            self.dims.update(_prim_vars(param.struct_info))
        self.check_seq(func.body)
        self.where = "the return struct info"
        self.use_dims(func.ret_struct_info)

    def check_seq(self, seq: SeqExpr) -> None:
        index = 0
        for block in seq.blocks:
            self.in_dataflow = isinstance(block, DataflowBlock)
            local: list[Var] = []
            for binding in block.bindings:
                self.where = (index, binding)
                self.check_binding(binding, local, f"binding {index}")
                index += 1
            self.visible.difference_update(local)
        self.in_dataflow = False
        self.where = f"the result `{expr_text(seq.body)}`"
        self.check_expr(seq.body)

    def define(self, var: Var, place: str) -> None:
        if var in self.defined:
            raise self.fail(
                f"var {var.name_hint!r} is defined twice: first at {self.defined[var]}; "
                "expected each var to be bound once"
            )
        self.defined[var] = place
        self.visible.add(var)

    # Bindings ------------------------------------------------------------------------------

    def check_binding(self, binding: Binding, local: list[Var], place: str) -> None:
        var = binding.var
        if isinstance(var, DataflowVar):
            if not self.in_dataflow:
                raise self.fail(
                    f"DataflowVar {var.name_hint!r} is bound outside a dataflow block; "
                    "expected a Var"
                )
            local.append(var)
        self.check_expr(binding.value)
        if isinstance(binding, MatchCast):
            self.dims.update(_prim_vars(binding.struct_info))
            self.check_annotation(var, binding.struct_info, "the match_cast struct info")
        else:
            self.check_annotation(var, self.infer(binding.value), "the inferred struct info")
        self.use_dims(var.struct_info)
        self.define(var, place)

    def check_annotation(self, var: Var, inferred: StructInfo, source: str) -> None:
        annotated = var.struct_info if var.struct_info is not None else ObjectStructInfo()
        if not sinfo_accepts(annotated, inferred):
            raise self.fail(
                f"var {var.name_hint!r} is annotated {describe(annotated)}, which contradicts "
                f"{source}; expected {describe(inferred)} or a less specific form of it, "
                f"got {describe(annotated)}"
            )

    def infer(self, expr: Expr) -> StructInfo:
        """The struct info of `expr`; a call of a module function returns what that declares."""
        if isinstance(expr, Call) and isinstance(expr.op, GlobalVar) and not expr.sinfo_args:
            name = expr.op.name_hint
            callee = self.module[name] if self.module is not None and name in self.module else None
            if isinstance(callee, Function):
                return callee.ret_struct_info
        try:
            return struct_info_of(expr)
        except StructInfoError as err:
            raise self.fail(f"struct info cannot be inferred: {err}") from err

    # Expressions ---------------------------------------------------------------------------

    def check_expr(self, expr: Expr) -> None:
        """Check every use inside `expr` (nested functions open their own scope)."""
        for node in _subexprs(expr):
            if isinstance(node, Var):
                self.use_var(node)
            elif isinstance(node, Call):
                self.check_call(node)
            elif isinstance(node, TupleGetItem):
                self.check_index(node)
            elif isinstance(node, GlobalVar):
                self.check_global(node)
            elif isinstance(node, (PrimValue, ShapeExpr)):
                self.use_dims(node)
            elif isinstance(node, Function):
                self.check_nested(node)
            elif isinstance(node, If):
                self.check_if(node)

    def use_var(self, var: Var) -> None:
        if var in self.visible:
            return
        if var not in self.defined:
            raise self.fail(f"var {var.name_hint!r} is used before its definition")
        if isinstance(var, DataflowVar):
            raise self.fail(
                f"DataflowVar {var.name_hint!r} is used outside the dataflow block that defines "
                "it; expected a Var bound in the block (an output) to carry it out"
            )
        raise self.fail(f"var {var.name_hint!r} is used outside its scope ({self.defined[var]})")

    def use_dims(self, node: Any) -> None:
        for dim in _prim_vars(node):
            if dim not in self.dims:
                raise self.fail(
                    f"symbolic dim {dim.name!r} is used before its definition; expected it "
                    "defined by a param's or an earlier match_cast's struct info"
                )

    def check_call(self, call: Call) -> None:
        self.use_dims(call.sinfo_args)
        self.use_dims(tuple(call.attrs.values()))
        if isinstance(call.op, Op) and call.op.name == "call_tir":
            self.check_call_tir(call)
        if self.in_dataflow and self.check_purity and not self.is_pure(call):
            raise self.fail(
                f"impure call {callee_text(call.op)} inside a dataflow block; expected only pure "
                "calls there (check_purity=False accepts seed-style lazy output)"
            )

    def is_pure(self, call: Call) -> bool:
        try:
            return is_pure_call(call)
        except StructInfoError as err:
            raise self.fail(str(err)) from err

    def check_call_tir(self, call: Call) -> None:
        target = call.args[0] if call.args else None
        if not isinstance(target, GlobalVar):
            raise self.fail(
                f"R.call_tir needs a GlobalVar naming a PrimFunc as its first operand; "
                f"expected cls.<name>, got {type(target).__name__}"
            )
        self.check_global(target)
        if self.module is not None and not isinstance(self.module[target], PrimFunc):
            raise self.fail(
                f"R.call_tir calls cls.{target.name_hint}; expected a PrimFunc, "
                f"got a {type(self.module[target]).__name__}"
            )

    def check_global(self, gvar: GlobalVar) -> None:
        if self.module is not None and gvar not in self.module:
            raise self.fail(
                f"cls.{gvar.name_hint} is not a function of the module; expected one of "
                f"{self.module.names()}"
            )

    def check_index(self, item: TupleGetItem) -> None:
        sinfo = self.infer(item.tuple_value)
        if isinstance(sinfo, TupleStructInfo) and not 0 <= item.index < len(sinfo.fields):
            raise self.fail(
                f"tuple index out of range: expected 0 <= index < {len(sinfo.fields)}, "
                f"got {item.index}"
            )
        if not isinstance(sinfo, (TupleStructInfo, ObjectStructInfo)):
            raise self.fail(
                f"indexing [{item.index}] needs a tuple; expected R.Tuple, got {describe(sinfo)}"
            )

    def check_if(self, node: If) -> None:
        """Outside dataflow blocks, on a boolean scalar; each branch a scope of its own."""
        if self.in_dataflow:
            raise self.fail("an If inside a dataflow block; expected it in a plain binding block")
        self.check_expr(node.cond)
        cond = self.infer(node.cond)
        if not _is_bool_scalar(cond):
            raise self.fail(
                "the If's condition must be a boolean scalar; expected R.Tensor((), "
                f'"bool") or R.Prim("bool"), got {describe(cond)}'
            )
        for branch in (node.true_branch, node.false_branch):
            saved = (set(self.visible), set(self.dims), self.where)
            self.check_seq(branch)
            self.visible, self.dims, self.where = saved

    def check_nested(self, func: Function) -> None:
        """A nested function sees the enclosing scope; its own names vanish after it."""
        saved = (set(self.visible), set(self.dims), self.where, self.in_dataflow)
        self.check(func)
        self.visible, self.dims, self.where, self.in_dataflow = saved


def _subexprs(expr: Expr) -> Iterator[Expr]:
    """`expr` and the expressions inside it in evaluation order, not entering nested functions."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Call):
            stack.extend(reversed((node.op, *node.args)))
        elif isinstance(node, Tuple):
            stack.extend(reversed(node.fields))
        elif isinstance(node, TupleGetItem):
            stack.append(node.tuple_value)
        elif isinstance(node, SeqExpr):
            raise WellFormedError(
                "a SeqExpr may only be a function body; expected a leaf or a call, got a SeqExpr"
            )


def _is_bool_scalar(sinfo: StructInfo) -> bool:
    if isinstance(sinfo, PrimStructInfo):
        return sinfo.dtype == "bool"
    return isinstance(sinfo, TensorStructInfo) and sinfo.ndim == 0 and sinfo.dtype == "bool"


def _prim_vars(node: Any) -> list[PrimVar]:
    """The symbolic vars inside struct info, prim exprs, shapes and attr values."""
    found: list[PrimVar] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, PrimVar):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, (StructInfo, PrimExpr, PrimValue, ShapeExpr)):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(cast(Any, item)))
    return found


# Struct info compatibility --------------------------------------------------------------------


def sinfo_accepts(annotated: StructInfo, inferred: StructInfo) -> bool:
    """Whether `annotated` equals `inferred` or is a less specific form of it.

    Object accepts anything; an unknown dtype, rank, shape or value accepts any. A dim is
    refused only where it provably differs (`3` vs `4`, `2 * n` vs `3 * n`): symbolic dims the
    annotation and the inference spell differently may still agree at run time.
    """
    if isinstance(annotated, ObjectStructInfo):
        return True
    if type(annotated) is not type(inferred):
        return False
    if isinstance(annotated, TensorStructInfo):
        assert isinstance(inferred, TensorStructInfo)
        return (
            annotated.dtype in ("", inferred.dtype)
            and annotated.ndim in (-1, inferred.ndim)
            and _dims_accept(annotated.shape, inferred.shape)
        )
    if isinstance(annotated, TupleStructInfo):
        assert isinstance(inferred, TupleStructInfo)
        pairs = zip(annotated.fields, inferred.fields, strict=False)
        return len(annotated.fields) == len(inferred.fields) and all(
            sinfo_accepts(a, i) for a, i in pairs
        )
    return _scalar_sinfo_accepts(annotated, inferred)


def _scalar_sinfo_accepts(annotated: StructInfo, inferred: StructInfo) -> bool:
    """The rule for prim, shape and function struct info."""
    if isinstance(annotated, PrimStructInfo) and isinstance(inferred, PrimStructInfo):
        values = None if annotated.value is None else (annotated.value,)
        inferred_values = None if inferred.value is None else (inferred.value,)
        return annotated.dtype == inferred.dtype and _dims_accept(values, inferred_values)
    if isinstance(annotated, ShapeStructInfo) and isinstance(inferred, ShapeStructInfo):
        return annotated.ndim in (-1, inferred.ndim) and _dims_accept(
            annotated.values, inferred.values
        )
    if isinstance(annotated, FuncStructInfo) and isinstance(inferred, FuncStructInfo):
        return sinfo_accepts(annotated.ret, inferred.ret) and (
            inferred.purity or not annotated.purity
        )
    return annotated == inferred


def _dims_accept(
    annotated: tuple[PrimExpr, ...] | None, inferred: tuple[PrimExpr, ...] | None
) -> bool:
    if annotated is None:
        return True
    if inferred is None or len(annotated) != len(inferred):
        return False
    return not any(dims_differ(a, i) for a, i in zip(annotated, inferred, strict=True))


__all__ = ["sinfo_accepts", "well_formed"]
