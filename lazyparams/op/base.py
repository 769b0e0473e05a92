"""Shared machinery of the op layer: op definitions as data, attr normalisers, operand checks.

Every op module declares `OpDef`s and registers them with `register`; `make_call` is the one
place a Call to an op is built, so constructors and the parser normalise attrs identically.
Imports `ir` only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from lazyparams.errors import StructInfoError
from lazyparams.ir.describe import describe, show_dim
from lazyparams.ir.dtype import canonical_dtype, is_block, is_dtype, is_float, is_int
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.op_registry import (
    SINFO_ARG_KEYWORDS,
    OpInfo,
    OpParam,
    get_op,
    op_info,
    register_op,
)
from lazyparams.ir.prim import IntImm, PrimExpr, as_prim
from lazyparams.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo

Normalizer = Callable[[str, str, Any], Any]
"""`(op name, attr name, value) -> canonical value`; raises StructInfoError on a bad value."""


@dataclass(frozen=True, slots=True)
class OpDef(OpInfo):
    """An op as data: the registry's entry (script params, inference, purity) and how each
    attr is normalised, which only the op layer needs."""

    normalize: Mapping[str, Normalizer] = field(default_factory=dict)


_DEFS: dict[str, OpDef] = {}


def register(*defs: OpDef) -> None:
    """Register op definitions in the IR's op registry (and keep their normalisers here)."""
    for d in defs:
        _DEFS[d.name] = d
        register_op(d)


def fail(op: str, message: str) -> NoReturn:
    """Raise the op layer's error, naming the op in its script spelling."""
    raise StructInfoError(f"R.{op}: {message}")


# Attr normalisers ---------------------------------------------------------------------------


def as_int(op: str, name: str, value: Any) -> int:
    """An int attr from a Python int or an integer immediate (bools are refused)."""
    if isinstance(value, IntImm) and value.dtype != "bool":
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    got = f"the symbolic {show_dim(value)}" if isinstance(value, PrimExpr) else repr(value)
    fail(op, f"expected {name} to be an int, got {got}")


def as_ints(op: str, name: str, value: Any) -> tuple[int, ...]:
    """A tuple-of-ints attr from any sequence of ints."""
    if type(value) is tuple and all(type(v) is int for v in value):  # already canonical
        return value
    if not isinstance(value, Sequence) or isinstance(value, str):
        fail(op, f"expected {name} to be a list of ints, got {value!r}")
    return tuple(as_int(op, name, v) for v in value)


def as_optional_ints(op: str, name: str, value: Any) -> tuple[int, ...] | None:
    """A tuple-of-ints attr that may be left as None."""
    return None if value is None else as_ints(op, name, value)


def as_optional_int(op: str, name: str, value: Any) -> int | None:
    """An int attr that may be left as None."""
    return None if value is None else as_int(op, name, value)


def as_int_or_ints(op: str, name: str, value: Any) -> int | tuple[int, ...]:
    """An attr that is either one int or a list of ints (kept as the user chose)."""
    if type(value) is int:  # the common case, ahead of the costlier Sequence check
        return value
    if isinstance(value, Sequence) and not isinstance(value, str):
        return as_ints(op, name, value)
    return as_int(op, name, value)


def as_bool(op: str, name: str, value: Any) -> bool:
    """A flag attr: a Python or numpy bool, or a bool immediate (ints are refused)."""
    if isinstance(value, IntImm) and value.dtype == "bool":
        return bool(value.value)
    np = sys.modules.get("numpy")  # a numpy bool exists only once numpy is imported
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return bool(value)
    fail(op, f"expected {name} to be True or False, got {value!r}")


def as_dtype(op: str, name: str, value: Any) -> str:
    """A dtype attr in its canonical spelling."""
    if not is_dtype(value):
        fail(op, f"expected {name} to be a dtype name, got {value!r}")
    return canonical_dtype(value)


def as_optional_dtype(op: str, name: str, value: Any) -> str | None:
    """A dtype attr that may be left as None."""
    return None if value is None else as_dtype(op, name, value)


def as_shape(op: str, name: str, value: Any) -> tuple[PrimExpr, ...]:
    """A shape attr: a sequence of ints or integer prim expressions (a ShapeExpr too)."""
    values = getattr(value, "values", value)
    if not isinstance(values, Sequence) or isinstance(values, str):
        fail(op, f"expected {name} to be a list of dims, got {value!r}")
    dims = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | PrimExpr):
            fail(op, f"expected {name} dims to be ints or prim expressions, got {v!r}")
        dim = as_prim(v)
        if not is_int(dim.dtype):
            fail(op, f"expected {name} dims of an integer dtype, got {show_dim(dim)}: {dim.dtype}")
        dims.append(dim)
    return tuple(dims)


# Building calls -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Params:
    """An op's params as `typed_call` checks them, worked out once per definition."""

    definition: OpDef
    operands: tuple[str, ...]
    required: int
    attrs: tuple[OpParam, ...]
    known: frozenset[str]


_PARAMS: dict[str, _Params] = {}


def _params(name: str) -> _Params:
    """The checked params of op `name` (recomputed if the op was registered again)."""
    d = _definition(name)
    found = _PARAMS.get(name)
    if found is None or found.definition is not d:
        operands = [p for p in d.params if p.kind == "expr"]
        attrs = tuple(p for p in d.params if p.kind == "attr")
        found = _PARAMS[name] = _Params(
            d,
            tuple(p.name for p in operands),
            sum(1 for p in operands if p.required),  # optional operands come last
            attrs,
            frozenset(p.name for p in attrs),
        )
    return found


def normalize_attrs(name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Every attr of op `name` in canonical form, defaults filled in, unknown names refused."""
    params = _params(name)
    d, known = params.definition, params.known
    unknown = sorted(set(attrs) - known)
    if unknown:
        expected = ", ".join(sorted(known)) or "none"
        fail(name, f"expected attrs among ({expected}), got unknown {', '.join(unknown)}")
    result: dict[str, Any] = {}
    for p in params.attrs:
        if p.name not in attrs and p.required:
            fail(name, f"expected attr {p.name}, got none")
        value = attrs.get(p.name, p.default)
        norm = d.normalize.get(p.name)
        result[p.name] = norm(name, p.name, value) if norm is not None else value
    return result


def make_call(
    name: str,
    args: Sequence[Expr],
    attrs: Mapping[str, Any] | None = None,
    sinfo_args: Sequence[StructInfo] = (),
) -> Call:
    """Build `R.<name>(*args, **attrs)` and run its inference now, so a bad call fails here."""
    return typed_call(name, args, attrs, sinfo_args)[0]


def typed_call(
    name: str,
    args: Sequence[Expr],
    attrs: Mapping[str, Any] | None = None,
    sinfo_args: Sequence[StructInfo] = (),
) -> tuple[Call, StructInfo]:
    """`make_call`, and the struct info its inference gave, so that binding the call need not
    infer it again (tracing a model's worth of ops would otherwise do it twice)."""
    params = _params(name)
    expr_params, required = params.operands, params.required
    if not required <= len(args) <= len(expr_params):
        count = f"{required} to {len(expr_params)}" if required < len(expr_params) else required
        fail(name, f"expected {count} operands ({', '.join(expr_params)}), got {len(args)}")
    for pname, arg in zip(expr_params, args, strict=False):
        if not isinstance(arg, Expr):
            fail(name, f"expected {pname} to be a Relax expression, got {type(arg).__name__}")
    if sinfo_args and name not in SINFO_ARG_KEYWORDS:
        fail(name, f"expected no sinfo_args (the result is inferred), got {len(sinfo_args)}")
    call = Call(get_op(name), tuple(args), normalize_attrs(name, attrs or {}), tuple(sinfo_args))
    return call, struct_info_of(call)


def op_function(name: str, doc: str) -> Callable[..., Call]:
    """The constructor `R.<name>(*operands)` of an op whose params are all operands: one
    function made per op of a family (the unary math, the comparisons) rather than each
    written out."""

    def build(*operands: Expr) -> Call:
        return make_call(name, operands)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = doc
    return build


def attr(call: Call, name: str) -> Any:
    """An attr of an op call, normalised (a Call built by hand may hold lists or omit defaults)."""
    op_name = call_op_name(call)
    d = _definition(op_name)
    param = next(p for p in d.params if p.name == name)
    if name not in call.attrs and param.required:
        fail(op_name, f"expected attr {name}, got none")
    value = call.attrs.get(name, param.default)
    norm = d.normalize.get(name)
    return norm(op_name, name, value) if norm is not None else value


def _definition(name: str) -> OpDef:
    if name not in _DEFS:
        op_info(name)  # raises naming the unknown op
        fail(name, "expected an op defined by lazyparams.op, got one registered elsewhere")
    return _DEFS[name]


def call_op_name(call: Call) -> str:
    """The name of the op a call applies ("" for a call of anything else)."""
    return str(getattr(call.op, "name", ""))


# Operand checks -----------------------------------------------------------------------------


def operand(call: Call, index: int) -> StructInfo:
    """Struct info of operand `index` of an op call."""
    op_name = call_op_name(call)
    if index >= len(call.args):
        fail(op_name, f"expected at least {index + 1} operands, got {len(call.args)}")
    return struct_info_of(call.args[index])


BLOCK_OPS = frozenset({"dequantize_gguf"})
"""The ops that read tensors of GGML block types: their bytes mean nothing to the others."""


def tensor_operand(call: Call, index: int, what: str = "x") -> TensorStructInfo:
    """Operand `index` as a tensor, or raise naming the op and what was found instead."""
    sinfo = operand(call, index)
    if not isinstance(sinfo, TensorStructInfo):
        fail(call_op_name(call), f"expected {what} to be a tensor, got {describe(sinfo)}")
    _refuse_blocks(call, sinfo, what)
    return sinfo


def _refuse_blocks(call: Call, t: TensorStructInfo, what: str) -> None:
    """Refuse a block-typed operand of an op that would read its bytes as numbers."""
    op_name = call_op_name(call)
    if is_block(t.dtype) and op_name not in BLOCK_OPS:
        fail(
            op_name,
            f"expected {what} of an element dtype, got block type {t.dtype}; "
            "R.dequantize_gguf gives its floats",
        )


def tuple_operand(call: Call, index: int, what: str) -> list[TensorStructInfo]:
    """Operand `index` as a tuple of tensors (a Tuple expr or any tuple-typed value)."""
    op_name = call_op_name(call)
    sinfo = operand(call, index)
    if not isinstance(sinfo, TupleStructInfo):
        fail(op_name, f"expected {what} to be a tuple of tensors, got {describe(sinfo)}")
    fields = []
    for i, f in enumerate(sinfo.fields):
        if not isinstance(f, TensorStructInfo):
            fail(op_name, f"expected {what}[{i}] to be a tensor, got {describe(f)}")
        _refuse_blocks(call, f, f"{what}[{i}]")
        fields.append(f)
    return fields


def same_dtype(op: str, dtypes: Sequence[str], what: str = "operands") -> str:
    """The common dtype of several tensors ("" when none is known); refuses a mix."""
    known = sorted({d for d in dtypes if d})
    if len(known) > 1:
        fail(op, f"expected {what} of one dtype, got {' and '.join(known)}")
    return known[0] if known else ""


def norm_axis(op: str, axis: int, ndim: int, what: str = "axis") -> int:
    """`axis` made non-negative for a tensor of rank `ndim` (numpy's range rule)."""
    if not -ndim <= axis < ndim:
        fail(op, f"expected {what} in [{-ndim}, {ndim}) for a rank-{ndim} tensor, got {axis}")
    return axis + ndim if axis < 0 else axis


def norm_axes(op: str, axes: Sequence[int], ndim: int, what: str = "axes") -> list[int]:
    """Several axes made non-negative; a repeated axis is refused."""
    result = [norm_axis(op, a, ndim, what) for a in axes]
    if len(set(result)) != len(result):
        fail(op, f"expected distinct {what}, got {list(axes)}")
    return result


def require_float(op: str, t: TensorStructInfo, what: str = "x") -> None:
    """Refuse a tensor whose (known) dtype is not floating point."""
    if t.dtype and not is_float(t.dtype):
        fail(op, f"expected {what} of a float dtype, got {t.dtype}")


def require_dtype(op: str, t: TensorStructInfo, dtype: str, what: str) -> None:
    """Refuse a tensor whose (known) dtype is not `dtype`."""
    if t.dtype and t.dtype != dtype:
        fail(op, f"expected {what} of dtype {dtype}, got {t.dtype}")


def require_rank(op: str, t: TensorStructInfo, ndim: int, what: str = "x") -> None:
    """Refuse a tensor whose (known) rank is not `ndim`."""
    if t.ndim != -1 and t.ndim != ndim:
        fail(op, f"expected {what} of rank {ndim}, got {describe(t)} of rank {t.ndim}")
