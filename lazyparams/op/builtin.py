"""Calls that leave the op world: call_tir, vm.kill_object, the builtin.stop_lift_params
barrier, the runtime check assert_op, and extern calls (call_packed, call_pure_packed).

`call_tir` has two operands, the PrimFunc's GlobalVar and a tuple of arguments; its
`out_sinfo` is not an attr but the call's `sinfo_args` (one struct info per output; several
make the result a tuple). `call_packed` is no op at all: it is a Call of an `ExternFunc`;
`call_pure_packed` is the op whose first operand is the `ExternFunc`, declared pure.
Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.ir.describe import describe
from lazyparams.ir.expr import Call, Expr, ExternFunc, GlobalVar, Tuple
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.op_registry import OpParam, get_op
from lazyparams.ir.struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.op.base import OpDef, fail, make_call, operand, register

# call_tir -----------------------------------------------------------------------------------


def _infer_call_tir(call: Call) -> StructInfo:
    """The declared `out_sinfo`: one tensor, or a tuple of them when several are declared."""
    func = call.args[0] if call.args else None
    if not isinstance(func, GlobalVar):
        got = type(func).__name__ if func is not None else "nothing"
        fail("call_tir", f"expected a PrimFunc's GlobalVar (cls.f) as first operand, got {got}")
    sinfo = operand(call, 1)
    if not isinstance(sinfo, TupleStructInfo):
        fail("call_tir", f"expected the arguments as a tuple, got {describe(sinfo)}")
    for i, f in enumerate(sinfo.fields):
        if not isinstance(f, TensorStructInfo | ObjectStructInfo | PrimStructInfo):
            fail("call_tir", f"expected argument {i} to be a tensor or prim, got {describe(f)}")
    if len(call.args) > 2 and not isinstance(operand(call, 2), ShapeStructInfo):
        fail("call_tir", f"expected tir_vars as R.shape([...]), got {describe(operand(call, 2))}")
    if not call.sinfo_args:
        fail("call_tir", "expected out_sinfo, got none")
    for s in call.sinfo_args:
        if not isinstance(s, TensorStructInfo):
            fail(
                "call_tir", f"expected out_sinfo of tensors (a list for several), got {describe(s)}"
            )
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


def call_tir(
    func: GlobalVar, args: Expr | Sequence[Expr], out_sinfo: StructInfo | Sequence[StructInfo]
) -> Call:
    """`R.call_tir(cls.f, (x, y), out_sinfo=...)`: run a PrimFunc into fresh output tensors
    (`tir_vars=R.shape([n])` in script passes ints to the PrimFunc's trailing scalar params).

    A list of operands becomes a Tuple, as does a single operand that is not tuple-typed.
    """
    if isinstance(args, Expr):
        is_tuple = isinstance(args, Tuple) or isinstance(struct_info_of(args), TupleStructInfo)
        args_expr = args if is_tuple else Tuple((args,))
    else:
        args_expr = Tuple(tuple(args))
    outs = (out_sinfo,) if isinstance(out_sinfo, StructInfo) else tuple(out_sinfo)
    return make_call("call_tir", [func, args_expr], {}, outs)


# vm.kill_object -----------------------------------------------------------------------------


def _infer_kill_object(call: Call) -> TupleStructInfo:
    """The unit tuple: killing a value yields nothing."""
    operand(call, 0)
    return TupleStructInfo(())


def kill_object(x: Expr) -> Call:
    """`R.vm.kill_object(x)`: release `x` now; impure, so no pass drops or moves it freely."""
    return make_call("vm.kill_object", [x])


# builtin.stop_lift_params --------------------------------------------------------------------


def _infer_stop_lift_params(call: Call) -> StructInfo:
    """Its operand's struct info: the barrier is an identity."""
    return operand(call, 0)


def stop_lift_params(x: Expr) -> Call:
    """`R.builtin.stop_lift_params(x)`: `x` itself, marking where LiftTransformParams stops:
    `x` may be lifted, what reads the call's result is not."""
    return make_call("builtin.stop_lift_params", [x])


# call_packed --------------------------------------------------------------------------------


def call_packed(
    name: str, *args: Expr, sinfo_args: StructInfo | Sequence[StructInfo] | None = None
) -> Call:
    """`R.call_packed("name", *args, sinfo_args=(R.Object,))`: call an extern by name.

    The result is typed by `sinfo_args` (R.Object when left out).
    """
    if not isinstance(name, str) or not name:
        fail("call_packed", f"expected a non-empty function name, got {name!r}")
    for i, a in enumerate(args):
        if not isinstance(a, Expr):
            fail("call_packed", f"expected argument {i} to be a Relax expression, got {a!r}")
    if sinfo_args is None:
        sinfo: tuple[StructInfo, ...] = (ObjectStructInfo(),)
    elif isinstance(sinfo_args, StructInfo):
        sinfo = (sinfo_args,)
    else:
        sinfo = tuple(sinfo_args)
    for s in sinfo:
        if not isinstance(s, StructInfo):
            fail("call_packed", f"expected sinfo_args of struct info, got {s!r}")
    return Call(ExternFunc(name), tuple(args), {}, sinfo)


# call_pure_packed ---------------------------------------------------------------------------

PURE_EXTERNS = frozenset({"vm.builtin.tuple_reset_item"})
"""The externs a `call_pure_packed` may call: those whose purity the VM itself guarantees."""


def _infer_call_pure_packed(call: Call) -> StructInfo:
    """The declared `sinfo_args`: one struct info, or a tuple of several."""
    func = call.args[0] if call.args else None
    if not isinstance(func, ExternFunc):
        fail("call_pure_packed", "expected an extern function name as first operand")
    if not call.sinfo_args:
        fail("call_pure_packed", "expected sinfo_args, got none")
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


def call_pure_packed(name: str, *args: Expr, sinfo_args: StructInfo | Sequence[StructInfo]) -> Call:
    """`R.call_pure_packed("name", *args, sinfo_args=...)`: an extern call declared pure, so it
    may sit in a dataflow block (TVM's spelling of `vm.builtin.tuple_reset_item`).

    Only the VM's own builtins (`PURE_EXTERNS`) are accepted: a user extern's purity is not
    something the compiler can take on trust.
    """
    if name not in PURE_EXTERNS:
        fail(
            "call_pure_packed",
            f"expected one of the VM's pure builtins ({', '.join(sorted(PURE_EXTERNS))}), "
            f"got {name!r}; call other externs with R.call_packed in an impure function",
        )
    base = call_packed(name, *args, sinfo_args=sinfo_args)
    call = Call(get_op("call_pure_packed"), (base.op, *base.args), {}, base.sinfo_args)
    _infer_call_pure_packed(call)
    return call


# assert_op ----------------------------------------------------------------------------------


def _infer_assert_op(call: Call) -> StructInfo:
    """A check with no value (`R.tuple()`): the condition a bool scalar, the message's values
    a tuple."""
    condition = operand(call, 0)
    scalar = isinstance(condition, PrimStructInfo) or (
        isinstance(condition, TensorStructInfo) and condition.ndim in (0, -1)
    )
    if not scalar or getattr(condition, "dtype", "bool") not in ("bool", ""):
        fail("assert_op", f"expected a bool scalar condition, got {describe(condition)}")
    if len(call.args) > 1 and not isinstance(operand(call, 1), TupleStructInfo):
        fail("assert_op", f"expected format_args as a tuple, got {describe(operand(call, 1))}")
    if not isinstance(call.attrs.get("format", ""), str):
        fail("assert_op", f"expected format as a string, got {call.attrs['format']!r}")
    return TupleStructInfo(())


register(
    OpDef(
        "call_tir",
        (
            OpParam("func", "expr"),
            OpParam("args", "expr"),
            OpParam("tir_vars", "expr", required=False),
        ),
        _infer_call_tir,
    ),
    OpDef("vm.kill_object", (OpParam("x", "expr"),), _infer_kill_object, pure=False),
    OpDef("builtin.stop_lift_params", (OpParam("x", "expr"),), _infer_stop_lift_params),
    OpDef("call_pure_packed", (OpParam("func", "expr"),), _infer_call_pure_packed),
    OpDef(
        "assert_op",
        (
            OpParam("condition", "expr"),
            OpParam("format_args", "expr", required=False),
            OpParam("format", "attr", required=False, default=""),
        ),
        _infer_assert_op,
        pure=False,
    ),
)
