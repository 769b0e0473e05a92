"""`Tensor`: a symbolic array that records numpy-style operations as Relax bindings.

Shapes are static ints; every method binds one or a few operator calls through the tracer and
returns new tensors. numpy functions and ufuncs called on a Tensor dispatch here too.
Imports `ir` and the frontend's own modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from lazyparams.frontend.location import trace_error
from lazyparams.frontend.tracer import Tracer, located
from lazyparams.frontend.values import (
    BadValue,
    DType,
    constant_array,
    dtype_name,
    is_scalar,
    scalar_array,
)
from lazyparams.ir.describe import describe
from lazyparams.ir.dtype import is_float, nbytes
from lazyparams.ir.expr import Constant, Expr, Var
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.struct_info import StructInfo, TensorStructInfo


def _layout(sinfo: StructInfo) -> tuple[tuple[int, ...], DType]:
    """The static shape and dtype of a traced tensor's struct info, or a located error."""
    shape = sinfo.static_shape if isinstance(sinfo, TensorStructInfo) else None
    if not isinstance(sinfo, TensorStructInfo) or shape is None:
        raise trace_error("trace", f"expected a tensor of static shape, got {describe(sinfo)}")
    return shape, DType(sinfo.dtype)


_BINARY = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "divide",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
    "&": "logical_and",
    "|": "logical_or",
}
"""Python's binary operators on tensors and the ops they bind (`&` and `|` of bool masks)."""
_NO_EQUALITY = "== and != keep Python's identity meaning; use ops.equal / ops.not_equal"


_Method = Callable[["Tensor", Any], "Tensor"]


def _arithmetic(symbol: str) -> tuple[_Method, _Method]:
    """The operator methods `self <symbol> other` and its reflection `other <symbol> self`."""

    def reflected(self: Tensor, other: Any) -> Tensor:
        return binary(symbol, other, self)

    return _forward(symbol), reflected


def _forward(symbol: str) -> _Method:
    """The operator method `self <symbol> other` (a comparison's reflection is Python's own:
    `2 < t` is `t > 2`)."""

    def forward(self: Tensor, other: Any) -> Tensor:
        return binary(symbol, self, other)

    return forward


def _reduction(name: str) -> Callable[..., Tensor]:
    """The method `t.<name>(axis=None, keepdims=False)` of `ops.<name>` (its arguments in
    ndarray's order: `t.sum(0, np.float32)` sums in float32)."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from lazyparams.frontend import ops

        return getattr(ops, name)(self, *args, **kwargs)  # type: ignore[no-any-return]

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"numpy's `{name}(axis=None, keepdims=False)`: `ops.{name}` of this tensor."
    return method


def _refused(symbol: str, why: str) -> Callable[[Tensor, object], NoReturn]:
    """An operator method that refuses `symbol` at the user's line, saying why."""

    def method(self: Tensor, other: object) -> NoReturn:
        _unsupported(symbol, why)

    return method


class Tensor:
    """A traced value of static shape and dtype; it holds the Relax var bound to it."""

    __slots__ = ("_shape", "dtype", "tracer", "var")

    def __init__(self, tracer: Tracer, var: Var) -> None:
        sinfo = struct_info_of(var)
        # vars of one struct info object (a layer's experts, their ops' results) share a layout
        layout = tracer.layouts.get(id(sinfo))
        if layout is None or layout[0] is not sinfo:
            layout = tracer.layouts[id(sinfo)] = (sinfo, *_layout(sinfo))
        self.tracer = tracer
        self.var = var
        self._shape: tuple[int, ...] = layout[1]
        self.dtype: str = layout[2]

    # numpy attributes ------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        return nbytes(self.dtype, self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise trace_error("len()", "expected a tensor of rank >= 1, got a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Tensor({self.var.name_hint}, shape={self._shape}, dtype={self.dtype!r})"

    # Layout ----------------------------------------------------------------------------------

    @property
    def T(self) -> Tensor:
        return self.transpose()

    def transpose(self, *axes: Any) -> Tensor:
        """numpy's `transpose()`, `transpose(1, 0)` and `transpose((1, 0))`."""
        from lazyparams.frontend import ops

        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            return ops.transpose(self, axes[0])
        return ops.transpose(self, axes or None)

    def reshape(self, *shape: Any) -> Tensor:
        """numpy's `reshape(2, 3)` and `reshape((2, 3))`, with at most one -1."""
        from lazyparams.frontend import ops

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            return ops.reshape(self, shape[0])
        return ops.reshape(self, shape)

    def astype(self, dtype: object) -> Tensor:
        from lazyparams.frontend import ops

        return ops.cast(self, dtype)

    def squeeze(self, axis: int | tuple[int, ...] | None = None) -> Tensor:
        from lazyparams.frontend import ops

        return ops.squeeze(self, axis)

    def __getitem__(self, key: Any) -> Tensor:
        from lazyparams.frontend.indexing import index

        return index(self, key)

    # Arithmetic ------------------------------------------------------------------------------

    __add__, __radd__ = _arithmetic("+")
    __sub__, __rsub__ = _arithmetic("-")
    __mul__, __rmul__ = _arithmetic("*")
    __truediv__, __rtruediv__ = _arithmetic("/")

    def __matmul__(self, other: Any) -> Tensor:
        from lazyparams.frontend import ops

        return ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        from lazyparams.frontend import ops

        return ops.matmul(other, self)

    __lt__ = _forward("<")
    __le__ = _forward("<=")
    __gt__ = _forward(">")
    __ge__ = _forward(">=")
    __and__, __rand__ = _arithmetic("&")
    __or__, __ror__ = _arithmetic("|")

    def __abs__(self) -> Tensor:
        from lazyparams.frontend import ops

        return ops.abs(self)

    sum = _reduction("sum")
    max = _reduction("max")
    min = _reduction("min")
    mean = _reduction("mean")

    def __neg__(self) -> Tensor:
        # -x is x * -1: the same bits as numpy's negative, zeros' signs included.
        return binary("*", self, -1)

    def __pos__(self) -> Tensor:
        return self

    # Refused operations: say so at the user's line rather than fail deep inside numpy.

    def __bool__(self) -> bool:
        _unsupported("bool()", "a traced tensor has no value; branch on shapes or names instead")

    def __array__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _unsupported("np.asarray()", "a traced tensor has no data while tracing")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from lazyparams.frontend.dispatch import ufunc_call

        return ufunc_call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from lazyparams.frontend.dispatch import function_call

        return function_call(func, args, kwargs)

    # Identity hashing stays, so tensors can key dicts; == would mean an elementwise mask.
    __hash__ = object.__hash__

    __eq__ = _refused("==", _NO_EQUALITY)
    __ne__ = _refused("!=", _NO_EQUALITY)
    __floordiv__ = _refused("//", "floor division is not among the traceable operations")
    __mod__ = _refused("%", "modulo is not among the traceable operations")
    __pow__ = _refused("**", "powers are not among the traceable operations")

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        _unsupported("item assignment", "traced tensors are immutable; build a new one")


def _unsupported(what: str, why: str) -> NoReturn:
    raise trace_error(what, f"unsupported operation: {why}")


def binary(symbol: str, left: Any, right: Any) -> Tensor:
    """Trace `left <symbol> right` where at least one side is a Tensor."""
    return binary_op(_BINARY[symbol], left, right, f"operator {symbol}")


def binary_op(op: str, left: Any, right: Any, what: str) -> Tensor:
    """Bind `R.<op>(left, right)` where at least one side is a Tensor: the other may be a
    numpy array (a constant) or a scalar, which takes the tensor's dtype."""
    tracer, like = _owner(left, right, what)
    lhs = operand(tracer, left, like.dtype, what)
    rhs = operand(tracer, right, like.dtype, what)
    if op == "divide" and not is_float(like.dtype):
        _unsupported(what, f"expected float tensors for true division, got {like.dtype}")
    return Tensor(tracer, tracer.emit_op(op, (lhs, rhs), {}, what))


def _owner(left: Any, right: Any, what: str) -> tuple[Tracer, Tensor]:
    like = tensor_operand(left if isinstance(left, Tensor) else right, what)
    return like.tracer, like


def operand(tracer: Tracer, value: Any, dtype: str, what: str) -> Expr:
    """An operand for an op next to tensors of `dtype`: a var, or a constant for plain values."""
    if isinstance(value, Tensor):
        if value.tracer is not tracer:
            raise trace_error(what, "expected tensors of the same trace, got tensors of two")
        value.tracer.check_running(what)
        return value.var
    if not is_scalar(value):
        return constant_expr(value, what)
    try:
        return Constant(scalar_array(value, dtype))
    except BadValue as err:
        raise located(what, err) from None


def constant_expr(value: Any, what: str) -> Constant:
    """A numpy array (or numpy scalar) as a constant, or a located error for anything else."""
    try:
        return Constant(constant_array(value))
    except BadValue as err:
        raise located(what, err) from None


def tensor_operand(value: Any, what: str) -> Tensor:
    """`value` itself when it is a Tensor of a running trace, else a located TraceError."""
    if not isinstance(value, Tensor):
        raise trace_error(what, f"expected a traced tensor, got {type(value).__name__}")
    value.tracer.check_running(what)
    return value


def checked_dtype(dtype: object, what: str) -> str:
    """`dtype_name(dtype)` with a located error."""
    try:
        return dtype_name(dtype)
    except BadValue as err:
        raise located(what, err) from None
