"""Load-time checks of Relax functions: everything the VM will be asked to run, it can run.

Every op has a kernel, every `call_tir` names a checked PrimFunc with matching arity and writes
only its outputs, every `kill_object` kills a var, no nested function hides in a binding.
Imports `ir`, `tir`, `op` (messages) and `runtime.kernels`.
"""

from __future__ import annotations

from collections.abc import Mapping

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.describe import describe
from lazyparams.ir.expr import (
    Call,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    Op,
    PrimValue,
    StringImm,
    Tuple,
    Var,
)
from lazyparams.ir.functor import ExprVisitor
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.module import IRModule
from lazyparams.ir.prim import IntImm
from lazyparams.ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from lazyparams.runtime.kernels import KERNELS
from lazyparams.runtime.tuple_reset import NAME as RESET
from lazyparams.tir.kernel import PrimFuncKernel

VM_OPS = ("call_tir", "vm.kill_object", "call_pure_packed")
"""Ops the VM runs itself rather than through a kernel."""


def call_tir_outputs(call: Call) -> tuple[list[TensorStructInfo], bool]:
    """The output tensors a `call_tir` declares, and whether its result is a tuple (several).

    As the op's inference has it: `out_sinfo` is one tensor, or a list of them.
    """
    tensors = [s for s in call.sinfo_args if isinstance(s, TensorStructInfo)]
    if not tensors or len(tensors) != len(call.sinfo_args):
        got = ", ".join(describe(s) for s in call.sinfo_args) or "none"
        raise RuntimeExecError(f"call_tir: expected out_sinfo of tensors, got {got}")
    return tensors, len(tensors) != 1


def check_function(
    mod: IRModule, name: str, func: Function, prims: Mapping[str, PrimFuncKernel]
) -> None:
    """Raise `RuntimeExecError`, naming the binding, for anything the VM could not run."""
    checker = _Checker(mod, prims)
    for index, binding in enumerate(func.bindings()):
        checker.where = f"function {name}, binding {index} ({binding.var.name_hint})"
        checker.visit_expr(binding.value)
    checker.where = f"function {name}: result"
    checker.visit_expr(func.body.body)


class _Checker(ExprVisitor):
    def __init__(self, mod: IRModule, prims: Mapping[str, PrimFuncKernel]) -> None:
        self.mod, self.prims, self.where = mod, prims, ""

    def fail(self, message: str) -> None:
        raise RuntimeExecError(f"{self.where}: {message}")

    def visit_function_(self, func: Function) -> None:
        self.fail("expected no nested function, got one (lift it into the module)")

    def visit_global_var_(self, gvar: GlobalVar) -> None:
        if gvar.name_hint not in self.mod:
            self.fail(f"expected a function of the module, got {gvar.name_hint}")

    def visit_call_(self, call: Call) -> None:
        if isinstance(call.op, Op):
            if call.op.name == "call_tir":
                self._call_tir(call)
            elif call.op.name == "vm.kill_object":
                if len(call.args) != 1 or not isinstance(call.args[0], Var):
                    self.fail("kill_object expected one var, got something else")
            elif call.op.name == "call_pure_packed":
                callee = call.args[0] if call.args else None
                if not (isinstance(callee, ExternFunc) and callee.global_symbol == RESET):
                    self.fail(f"call_pure_packed expected {RESET}, got {name_of(callee)}")
            elif call.op.name not in KERNELS:
                self.fail(f"R.{call.op.name} expected an op with a numpy kernel, got none")
        super().visit_call_(call)

    def _call_tir(self, call: Call) -> None:
        func = call.args[0] if call.args else None
        if not isinstance(func, GlobalVar) or func.name_hint not in self.prims:
            self.fail(f"call_tir expected a PrimFunc of the module, got {name_of(func)}")
        assert isinstance(func, GlobalVar)
        try:
            outputs, _ = call_tir_outputs(call)
        except RuntimeExecError as err:
            self.fail(str(err))
        for sinfo in outputs:
            if sinfo.shape is None or not sinfo.dtype:
                self.fail(
                    f"call_tir expected outputs of known shape and dtype, got {describe(sinfo)}"
                )
        kernel = self.prims[func.name_hint]
        n_inputs = _arity(call)
        n_scalars = _tir_var_count(call)
        if n_inputs is not None and n_inputs + len(outputs) + n_scalars != len(kernel.func.params):
            scalars = (" and tir_vars", f" and {n_scalars} tir_vars") if n_scalars else ("", "")
            self.fail(
                f"call_tir of {func.name_hint} expected {len(kernel.func.params)} inputs "
                f"and outputs{scalars[0]}, got {n_inputs} inputs and {len(outputs)} outputs"
                f"{scalars[1]}"
            )
        if n_inputs is not None and any(i < n_inputs for i in kernel.written):
            self.fail(
                f"call_tir of {func.name_hint}: expected the PrimFunc to write only its "
                "outputs, got one that writes an input"
            )


def _tir_var_count(call: Call) -> int:
    """How many ints `tir_vars=R.shape([...])` passes after the outputs."""
    if len(call.args) < 3:
        return 0
    sinfo = struct_info_of(call.args[2])
    return sinfo.ndim if isinstance(sinfo, ShapeStructInfo) and sinfo.ndim >= 0 else 0


def _arity(call: Call) -> int | None:
    """How many inputs a call_tir passes, when it can be known before running."""
    if len(call.args) < 2:
        return 0
    args = call.args[1]
    if isinstance(args, Tuple):
        return len(args.fields)
    sinfo = struct_info_of(args)
    return len(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else None


def _literal_args(call: Call) -> str:
    """A call's operands for a message: literals (a load's index, a weight's name) as
    written, anything else as `...`."""
    shown = [_literal(arg) for arg in call.args]
    return ", ".join(shown) if shown and "..." not in shown else "..."


def _literal(arg: Expr) -> str:
    if isinstance(arg, PrimValue) and isinstance(arg.value, IntImm):
        return str(arg.value.value)
    if isinstance(arg, StringImm):
        return repr(arg.value)
    return "..."


def name_of(expr: Expr | None) -> str:
    """How a message names an operand or callee: `R.op`, `f(...)`, a var's or extern's name."""
    if expr is None:
        return "nothing"
    if isinstance(expr, Call):
        return f"{name_of(expr.op)}({_literal_args(expr)})"
    if isinstance(expr, Op):
        return f"R.{expr.name}"
    for attr in ("name_hint", "global_symbol"):
        if hasattr(expr, attr):
            return str(getattr(expr, attr))
    return type(expr).__name__
