"""The tracing state: one BlockBuilder, the inputs loaded so far, kernels and their names.

Every traced operation goes through `Tracer.emit`, which turns an operator's StructInfoError
into a TraceError located at the user's line. Imports `ir`, `tir` and `op`.
"""

from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from lazyparams.errors import LazyParamsError, StructInfoError, TraceError
from lazyparams.frontend.location import trace_error
from lazyparams.frontend.values import BadValue
from lazyparams.ir.block_builder import BlockBuilder, NameTable
from lazyparams.ir.describe import describe
from lazyparams.ir.expr import Call, Expr, GlobalVar, TupleGetItem, Var, VarBinding
from lazyparams.ir.infer import is_pure_call, struct_info_of
from lazyparams.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, tensor
from lazyparams.op import typed_call

if TYPE_CHECKING:  # a trace without call_tir needs no TIR
    from lazyparams.tir.nodes import PrimFunc


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input of the traced function: its checkpoint name, static shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def struct_info(self) -> TensorStructInfo:
        return tensor(self.shape, self.dtype)


@functools.lru_cache(maxsize=4096)  # an op's name is asked for at each of its calls
def identifier(name: str, fallback: str = "w") -> str:
    """A Python identifier derived from a checkpoint or function name, for readable var names."""
    dotted = name.replace(".", "_")
    if name.isascii() and ".." not in name and dotted.isidentifier():
        text = dotted.strip("_")  # what the substitution below gives, found faster
    else:
        text = re.sub(r"\W+", "_", name).strip("_")
    if not text:
        return fallback
    if keyword.iskeyword(text):
        return f"{text}_"
    return f"{fallback}_{text}" if text[0].isdigit() else text


def _shared_struct_infos(specs: Sequence[InputSpec]) -> tuple[TensorStructInfo, ...]:
    """The inputs' struct infos, one object per (shape, dtype): inputs alike (a layer's
    experts) then share their ops' inferred results too (see `ir.infer`)."""
    made: dict[tuple[tuple[int, ...], str], TensorStructInfo] = {}
    result = []
    for spec in specs:
        key = (spec.shape, spec.dtype)
        sinfo = made.get(key)
        if sinfo is None:
            sinfo = made[key] = spec.struct_info
        result.append(sinfo)
    return tuple(result)


T = TypeVar("T")
_ACTIVE: list[Tracer] = []


def checked(what: str, build: Callable[[], T]) -> T:
    """`build()`, with an operator's StructInfoError re-raised as a TraceError at the user's line.

    A plain call rather than a context manager: the located frame must be the user's, and a
    context manager's exit would be the innermost frame outside the frontend.
    """
    try:
        return build()
    except StructInfoError as err:
        raise trace_error(what, str(err)) from None


def active_tracer(what: str) -> Tracer:
    """The tracer of the innermost running `trace`, for ops that take no tensor operand."""
    if not _ACTIVE:
        raise trace_error(what, "expected to be called inside a function run by trace(), got none")
    return _ACTIVE[-1]


class Tracer:
    """Collects the bindings of one traced function and the kernels it calls."""

    def __init__(self, specs: Sequence[InputSpec], func_name: str) -> None:
        self.specs = tuple(specs)
        self.func_name = func_name
        self.bb = BlockBuilder()
        self.bb.names.reserve("params")
        self.input_sinfos = _shared_struct_infos(self.specs)
        self.params_var = Var("params", TupleStructInfo(self.input_sinfos))
        self.input_bindings: dict[int, VarBinding] = {}
        self.kernel_vars: dict[int, GlobalVar] = {}
        self.prim_funcs: dict[GlobalVar, PrimFunc] = {}
        self.numpy_kernels: dict[str, Callable[..., Any]] = {}
        self._extern_names: dict[int, str] = {}
        self._function_names = NameTable()
        self._function_names.reserve(func_name)
        self._extern_table = NameTable()
        self.is_pure = True
        self.running = False
        self.layouts: dict[int, tuple[Any, ...]] = {}
        """(struct info, static shape, dtype) by the struct info's id, for `Tensor`."""

    @contextmanager
    def running_scope(self) -> Iterator[None]:
        """Make this tracer the active one while the user's function runs."""
        _ACTIVE.append(self)
        self.running = True
        try:
            yield
        finally:
            self.running = False
            _ACTIVE.remove(self)

    def check_running(self, what: str) -> None:
        """Refuse work on a tensor whose trace has already returned."""
        if not self.running:
            raise trace_error(
                what, "expected a tensor of a running trace, got one whose trace has ended"
            )

    # Inputs ---------------------------------------------------------------------------------

    def input_var(self, index: int) -> Var:
        """The var bound to `params[index]`, bound on first use (unused inputs are never loaded)."""
        binding = self.input_bindings.get(index)
        if binding is None:
            spec = self.specs[index]
            var = Var(self.bb.names.fresh(identifier(spec.name)), self.input_sinfos[index])
            binding = VarBinding(var, TupleGetItem(self.params_var, index))
            self.input_bindings[index] = binding
        return binding.var

    # Emission -------------------------------------------------------------------------------

    def emit(self, value: Expr, hint: str, what: str, sinfo: StructInfo | None = None) -> Var:
        """Bind `value` (of struct info `sinfo` when known); an operator rejecting its operands
        becomes a located TraceError."""
        var = checked(what, lambda: self.bb.emit(value, identifier(hint, "v"), sinfo))
        if isinstance(value, Call) and not is_pure_call(value):
            self.is_pure = False
        return var

    def emit_op(self, op: str, args: Sequence[Expr], attrs: Mapping[str, Any], what: str) -> Var:
        """Bind a call of the registered operator `op` (attrs normalised by the op layer)."""
        call, sinfo = checked(what, lambda: typed_call(op, args, attrs))
        return self.emit(call, op, what, sinfo)

    def emit_op_each(
        self, op: str, operands: Sequence[Var], attrs: Mapping[str, Any], what: str
    ) -> list[Var]:
        """`emit_op(op, (x,), attrs, what)` for each operand x, in order (the vars of a stack).

        The call is checked and inferred once per operand struct info object; the others are
        built as that call was, with its normalised attrs, so the bindings come out as
        `emit_op` binds them, in a fraction of the time (a 671B model stacks 90k experts).
        """
        made: dict[int, tuple[StructInfo | None, Call, StructInfo]] = {}
        hint = identifier(op, "v")
        result = []
        for x in operands:
            found = made.get(id(x.struct_info))
            if found is None or found[0] is not x.struct_info:
                call, sinfo = checked(what, functools.partial(typed_call, op, (x,), attrs))
                made[id(x.struct_info)] = found = (x.struct_info, call, sinfo)
                if not is_pure_call(call):
                    self.is_pure = False
            else:  # calls never change their attrs: the members share the first one's
                call = Call(found[1].op, (x,), found[1].attrs)
            result.append(self.bb.emit(call, hint, found[2]))
        return result

    def emit_fields(self, tuple_var: Var, what: str) -> tuple[Var, ...]:
        """Bind each field of a tuple-valued var, so every result is a tensor var of its own."""
        sinfo = struct_info_of(tuple_var)
        if not isinstance(sinfo, TupleStructInfo):
            raise LazyParamsError(f"{what}: expected a tuple result, got {describe(sinfo)}")
        hint = tuple_var.name_hint
        return tuple(
            self.emit(TupleGetItem(tuple_var, i), f"{hint}_{i}", what)
            for i in range(len(sinfo.fields))
        )

    # Kernels --------------------------------------------------------------------------------

    def kernel_var(self, func: PrimFunc, name: str) -> GlobalVar:
        """The GlobalVar of a TIR kernel, adding it to the module on first use."""
        gvar = self.kernel_vars.get(id(func))
        if gvar is None:
            gvar = GlobalVar(self._function_names.fresh(identifier(name, "kernel")))
            self.kernel_vars[id(func)] = gvar
            self.prim_funcs[gvar] = func
        return gvar

    def extern_name(self, fn: Callable[..., Any], name: str) -> str:
        """The extern name under which a numpy kernel is recorded in the module attrs."""
        extern = self._extern_names.get(id(fn))
        if extern is None:
            # An extern name is a string, not an identifier: keywords need no escaping.
            stem = re.sub(r"\W+", "_", name).strip("_") or "kernel"
            extern = self._extern_table.fresh(f"numpy_kernel.{stem}")
            self._extern_names[id(fn)] = extern
            self.numpy_kernels[extern] = fn
        return extern


def located(what: str, error: BadValue) -> TraceError:
    """Turn a value conversion failure into a TraceError at the user's line."""
    return trace_error(what, str(error))
