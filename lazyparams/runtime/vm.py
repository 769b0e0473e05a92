"""The virtual machine: the reference semantics of Relax functions, run on numpy arrays.

Bindings are interpreted in order: ops through the kernel registry, `call_tir` through the
vectorised TIR evaluator, externs resolved by name when called. A value is dropped at its
`kill_object` or right after its last use (the shared liveness analysis), and the memory meter
records what is held after every binding. Imports `ir`, `tir`, `op` and `analysis`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from lazyparams.analysis.liveness import PARAM, liveness
from lazyparams.errors import RuntimeExecError
from lazyparams.ir.dtype import to_numpy
from lazyparams.ir.expr import (
    Binding,
    Call,
    Constant,
    Expr,
    ExternFunc,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.module import IRModule
from lazyparams.ir.op_registry import op_info
from lazyparams.ir.prim import PrimExpr
from lazyparams.ir.struct_info import TensorStructInfo, TupleStructInfo
from lazyparams.runtime.branches import BranchLiveness, truth
from lazyparams.runtime.check import call_tir_outputs, check_function, name_of
from lazyparams.runtime.frame import Frame, FunctionPlan
from lazyparams.runtime.kernels import run_kernel
from lazyparams.runtime.memory import MemoryMeter, MemoryStats
from lazyparams.runtime.pool import BUFFERS
from lazyparams.runtime.registry import get_global_func
from lazyparams.runtime.tuple_reset import ReleasedSlot, reset_item
from lazyparams.runtime.values import (
    Symbols,
    describe_value,
    match_value,
    returns_unit,
    scalar,
    shape_of,
)
from lazyparams.tir.kernel import PrimFuncKernel, compile_prim_func
from lazyparams.tir.nodes import PrimFunc

DEFAULT_HANDOFF: tuple[str, ...] = ("set_item", "fset_output")
"""Callees (extern names, or names of function-typed params) that take ownership of their
arguments: what is passed to them stops counting in the memory meter."""


class VirtualMachine:
    """Runs the functions of a module: `vm["name"](*args)`.

    Every PrimFunc is checked against the vectorisable subset and every Relax function against
    the ops the VM can run when the VM is made, so an unsupported module fails before any data
    is read. Externs resolve when called: the VM's table (`externs=`, `register`) first, then
    `lazyparams.runtime.register_func`'s global table.
    """

    def __init__(
        self,
        mod: IRModule,
        externs: Mapping[str, Callable[..., Any]] | None = None,
        *,
        handoff: Iterable[str] = DEFAULT_HANDOFF,
    ) -> None:
        if not isinstance(mod, IRModule):
            raise RuntimeExecError(f"expected an IRModule, got {type(mod).__name__}")
        self.mod = mod
        self._externs: dict[str, Callable[..., Any]] = {}
        # Traced numpy kernels travel with the module; explicit externs may override them.
        kernels: Mapping[str, Callable[..., Any]] = mod.attrs.get("numpy_kernels", {})
        for name, fn in {**kernels, **(externs or {})}.items():
            self.register(name, fn)
        self._handoff = frozenset(handoff)
        self._meter = MemoryMeter()
        self._depth = 0
        self._prims: dict[str, PrimFuncKernel] = {}
        self._plans: dict[str, FunctionPlan] = {}
        self._branches = BranchLiveness()
        for name, func in mod.items():
            if isinstance(func, PrimFunc):
                self._prims[name] = compile_prim_func(func, name)
        for name, relax_func in mod.relax_functions():
            check_function(mod, name, relax_func, self._prims)
            self._plans[name] = FunctionPlan(name, relax_func, liveness(relax_func))

    @property
    def stats(self) -> MemoryStats:
        """Memory held by the latest top-level call: peak, where it happened, the timeline."""
        return self._meter.stats

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        """Add (or replace) extern `name` in this VM's own table."""
        if not isinstance(name, str) or not callable(fn):
            raise RuntimeExecError(
                f"expected an extern name and a callable, got {name!r} and {type(fn).__name__}"
            )
        self._externs[name] = fn

    def __contains__(self, name: object) -> bool:
        return name in self._plans or name in self._prims

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in self:
            self.call(name)  # raises, naming the functions there are
        return functools.partial(self.call, name)

    def call(self, name: str, *args: Any) -> Any:
        """Run function `name`; a PrimFunc is run in place on `args` (inputs, then outputs)."""
        if name in self._prims:
            self._prims[name](list(args))
            return None
        if name not in self._plans:
            raise RuntimeExecError(
                f"expected a function of the module ({', '.join(self.mod.names())}), got {name!r}"
            )
        if self._depth > 0:
            return self._invoke(self._plans[name], args)
        self._meter.reset()
        with BUFFERS.watch(self._meter.headroom):  # freed outputs are reused within the peak
            return self._invoke(self._plans[name], args)

    # Running a function's bindings from outside: the parallel runner -------------------------

    def bindings(self, name: str) -> tuple[Binding, ...]:
        """The bindings of Relax function `name`, in the order `run_binding` indexes them."""
        return self._plan(name).live.bindings

    def prepare(self, name: str, args: tuple[Any, ...]) -> Frame:
        """A frame for a run of Relax function `name` on `args` driven by the caller: the
        arguments are checked and bound, the VM's meter starts afresh as for a top-level call.
        The frame meters nothing: the caller accounts for the memory its run holds."""
        frame = Frame(self._plan(name), MemoryMeter())
        self._meter.reset()  # hand-offs in the caller's run find nothing of an earlier call
        for param, arg in self._checked_args(frame, args):
            frame.values[param] = arg
        return frame

    def run_binding(self, frame: Frame, index: int) -> Any:
        """The value of binding `index` of the frame's function, checked against its match_cast
        or declared type; binding it (and dropping what dies) is left to the caller."""
        binding = frame.plan.live.bindings[index]
        where = f"function {frame.plan.name}, binding {index} ({binding.var.name_hint})"
        return self._checked_value(frame, binding, index, where)

    def _checked_value(self, frame: Frame, binding: Binding, index: int, where: str) -> Any:
        """Evaluate a binding's value (an If runs its branch, metered at `index`) and check it."""
        if isinstance(binding.value, If):
            value = self._run_if(frame, binding.value, index, where)
        else:
            value = self._eval(frame, binding.value, where)
        if isinstance(binding, MatchCast):
            what = f"{where}: match_cast of {name_of(binding.value)}"
            match_value(value, binding.struct_info, frame.symbols, what)
        elif binding.var.struct_info is not None:
            declared = f"{where}: declared type"
            match_value(value, binding.var.struct_info, frame.symbols, declared)
        return value

    def _run_if(self, frame: Frame, node: If, index: int, where: str) -> Any:
        """Run the branch the condition picks, binding by binding as a function body runs:
        its own values are freed after their last use in it, the rest at the If's binding."""
        taken = truth(self._eval(frame, node.cond, where), where)
        branch, live = self._branches.of(node, taken)
        for inner, binding in enumerate(live.bindings):
            name = f"{where}, branch binding {inner} ({binding.var.name_hint})"
            value = self._checked_value(frame, binding, index, name)
            frame.bind(binding.var, value)
            del value
            frame.meter.record(frame.plan.name, index, binding.var.name_hint)
            for dead in live.dies_at[inner]:
                if dead in live.defined_at:  # the branch's own; outer values die at the If
                    frame.drop(dead)
            if live.is_dead(binding.var):
                frame.drop(binding.var)
        result = self._eval(frame, branch.body, where)
        for var in live.result_uses:
            if var in live.defined_at:
                frame.drop(var)
        return result

    def result(self, frame: Frame) -> Any:
        """The frame's function's result, checked against its declared return type."""
        where = f"function {frame.plan.name}: result"
        result = self._eval(frame, frame.plan.func.body.body, where)
        match_value(result, frame.plan.func.ret_struct_info, frame.symbols, where)
        return result

    def _plan(self, name: str) -> FunctionPlan:
        if name not in self._plans:
            raise RuntimeExecError(
                f"expected a Relax function of the module ({', '.join(self._plans)}), got {name!r}"
            )
        return self._plans[name]

    # Running a function ----------------------------------------------------------------------

    def _invoke(self, plan: FunctionPlan, args: tuple[Any, ...]) -> Any:
        frame = Frame(plan, self._meter)
        self._depth += 1
        try:
            self._bind_params(frame, args)
            for index, binding in enumerate(plan.live.bindings):
                self._step(frame, index, binding)
            return self.result(frame)
        finally:
            frame.clear()
            self._depth -= 1

    @staticmethod
    def _checked_args(frame: Frame, args: tuple[Any, ...]) -> Iterator[tuple[Var, Any]]:
        """Each param with its argument, matched against the param's type (which binds the
        symbolic dims); a list passes for a tuple, a numpy scalar for a 0-d tensor."""
        plan, params = frame.plan, frame.plan.func.params
        if len(args) != len(params):
            names = ", ".join(p.name_hint for p in params)
            raise RuntimeExecError(
                f"function {plan.name}: expected {len(params)} arguments ({names}), got {len(args)}"
            )
        for i, (param, arg) in enumerate(zip(plan.func.params, args, strict=True)):
            sinfo = struct_info_of(param)
            if isinstance(sinfo, TupleStructInfo) and isinstance(arg, list):
                arg = tuple(arg)
            if isinstance(sinfo, TensorStructInfo) and isinstance(arg, np.generic):
                arg = np.asarray(arg)
            what = f"function {plan.name}: argument {i} ({param.name_hint})"
            match_value(arg, sinfo, frame.symbols, what)
            yield param, arg

    def _bind_params(self, frame: Frame, args: tuple[Any, ...]) -> None:
        plan = frame.plan
        for param, arg in self._checked_args(frame, args):
            frame.bind(param, arg)
        self._meter.record(plan.name, PARAM, "(params)")
        for param in plan.func.params:
            if plan.live.is_dead(param):
                frame.drop(param)

    def _step(self, frame: Frame, index: int, binding: Binding) -> None:
        var = binding.var
        value = self.run_binding(frame, index)
        frame.bind(var, value)
        del value  # the frame must hold the only reference, or a kill could not free it
        self._meter.record(frame.plan.name, index, var.name_hint)
        for dead in frame.plan.live.dies_at[index]:
            frame.drop(dead)
        if frame.plan.live.is_dead(var):
            frame.drop(var)

    def _eval(self, frame: Frame, expr: Expr, where: str) -> Any:
        if isinstance(expr, Var):
            return frame.get(expr, where)
        if isinstance(expr, Call):
            return self._call(frame, expr, where)
        if isinstance(expr, Tuple):
            return tuple(self._eval(frame, f, where) for f in expr.fields)
        if isinstance(expr, TupleGetItem):
            return self._tuple_item(frame, expr, where)
        if isinstance(expr, Constant):
            return expr.data
        if isinstance(expr, PrimValue):
            return scalar(expr.value, frame.symbols, where)
        if isinstance(expr, StringImm):
            return expr.value
        if isinstance(expr, ShapeExpr):
            return shape_of(expr.values, frame.symbols, where)
        if isinstance(expr, GlobalVar):
            return functools.partial(self._call_global, expr.name_hint)
        if isinstance(expr, ExternFunc):
            return self._resolve(expr.global_symbol, where)
        raise RuntimeExecError(f"{where}: expected a value expression, got {type(expr).__name__}")

    def _tuple_item(self, frame: Frame, expr: TupleGetItem, where: str) -> Any:
        value = self._eval(frame, expr.tuple_value, where)
        if not isinstance(value, tuple) or not 0 <= expr.index < len(value):
            raise RuntimeExecError(
                f"{where}: [{expr.index}] expected a tuple of more than {expr.index} values, "
                f"got {describe_value(value)}"
            )
        item = value[expr.index]
        if isinstance(item, ReleasedSlot):
            raise item.read_error(where)
        return item

    def _call_global(self, name: str, *args: Any) -> Any:
        if name in self._prims:
            self._prims[name](list(args))
            return None
        return self._invoke(self._plans[name], args)

    def _resolve(self, name: str, where: str) -> Callable[..., Any]:
        fn = self._externs.get(name) or get_global_func(name)
        if fn is None:
            raise RuntimeExecError(
                f"{where}: extern {name!r} is not registered; expected it in the VM's table "
                "(externs= or vm.register) or in lazyparams.runtime.register_func's"
            )
        return fn

    # Calls -----------------------------------------------------------------------------------

    def _call(self, frame: Frame, call: Call, where: str) -> Any:
        if isinstance(call.op, Op):
            return self._call_op(frame, call, call.op.name, where)
        fn = self._eval(frame, call.op, where)
        args = [self._eval(frame, a, where) for a in call.args]
        callee = name_of(call.op)
        if not callable(fn):
            raise RuntimeExecError(
                f"{where}: expected {callee} to be callable, got {describe_value(fn)}"
            )
        try:
            result = fn(*args)
        except Exception as err:
            err.add_note(f"while calling {callee} in {where}")
            raise
        if callee in self._handoff:
            for arg in args:
                self._meter.hand_off(arg)
        return () if result is None and returns_unit(call) else result

    def _call_op(self, frame: Frame, call: Call, name: str, where: str) -> Any:
        if name == "vm.kill_object":
            return self._kill(frame, call, where)
        if name == "call_tir":
            return self._call_tir(frame, call, where)
        if name == "call_pure_packed":  # check_function admits only tuple_reset_item
            index = self._eval(frame, call.args[2], where) if len(call.args) > 2 else -1
            return reset_item(frame, call, int(index), frame.meter.release, where)
        operands = [self._eval(frame, a, where) for a in call.args]
        try:
            return run_kernel(name, operands, self._attrs(frame, call, name))
        except RuntimeExecError as err:
            raise RuntimeExecError(f"{where}: {err}") from None

    def _attrs(self, frame: Frame, call: Call, name: str) -> dict[str, Any]:
        """The op's attrs with defaults filled in and symbolic dims replaced by their values."""
        info = op_info(name)
        return {
            p.name: _static(call.attrs.get(p.name, p.default), frame.symbols, name)
            for p in info.params
            if p.kind == "attr"
        }

    def _kill(self, frame: Frame, call: Call, where: str) -> tuple[()]:
        target = call.args[0]
        assert isinstance(target, Var)  # check_function refuses anything else
        if target not in frame.values:
            raise RuntimeExecError(
                f"{where}: kill_object({target.name_hint}) expected a live value, got one "
                "already freed"
            )
        frame.drop(target)
        return ()

    def _call_tir(self, frame: Frame, call: Call, where: str) -> Any:
        func = call.args[0]
        assert isinstance(func, GlobalVar)  # check_function refuses anything else
        inputs = self._eval(frame, call.args[1], where)
        if not isinstance(inputs, tuple):
            inputs = (inputs,)
        sinfos, as_tuple = call_tir_outputs(call)
        outputs = [self._allocate(s, frame.symbols, where) for s in sinfos]
        scalars = self._eval(frame, call.args[2], where) if len(call.args) > 2 else ()
        try:
            self._prims[func.name_hint]([*inputs, *outputs, *scalars])
        except RuntimeExecError as err:
            raise RuntimeExecError(f"{where}: {err}") from None
        return tuple(outputs) if as_tuple else outputs[0]

    def _allocate(self, sinfo: TensorStructInfo, symbols: Symbols, where: str) -> Any:
        assert sinfo.shape is not None  # check_function refuses outputs without a shape
        shape = shape_of(sinfo.shape, symbols, f"{where}: out_sinfo")
        # zeros, not empty: a kernel that skips elements still gives reproducible outputs
        return np.zeros(shape, to_numpy(sinfo.dtype))


def _static(value: Any, symbols: Symbols, op: str) -> Any:
    """An attr with prim expressions (symbolic dims) evaluated to Python numbers."""
    if isinstance(value, PrimExpr):
        return scalar(value, symbols, f"R.{op}")
    if isinstance(value, ShapeExpr):
        return tuple(scalar(v, symbols, f"R.{op}") for v in value.values)
    if isinstance(value, list | tuple):
        return tuple(_static(v, symbols, op) for v in value)
    return value
