"""User kernels inside a trace: TIR PrimFuncs (via `call_tir`) and Python functions over numpy.

A numpy kernel is `R.call_packed("numpy_kernel.<name>", *args)`, its function recorded under
that extern name in `mod.attrs["numpy_kernels"]` for the runner to register. The function
takes one array per argument (not to be modified) and returns the declared output(s) exactly.
Imports `ir`, `tir`, `op` and the frontend's own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lazyparams import op
from lazyparams.frontend.location import trace_error
from lazyparams.frontend.tensor import Tensor, checked_dtype, operand, tensor_operand
from lazyparams.frontend.tracer import Tracer, active_tracer, checked
from lazyparams.ir.describe import show_shape
from lazyparams.ir.dtype import is_integer
from lazyparams.ir.expr import Var
from lazyparams.ir.prim import IntImm, PrimVar
from lazyparams.ir.struct_info import TensorStructInfo, tensor

if TYPE_CHECKING:  # loaded by `call_tir`, so that a trace without TIR kernels needs no TIR
    from lazyparams.tir.nodes import Buffer, PrimFunc

Results = Tensor | tuple[Tensor, ...]


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(is_integer(d) for d in value)


def declared_outputs(out_shape: Any, out_dtype: Any, what: str) -> list[TensorStructInfo]:
    """Struct info of declared outputs: one shape and dtype, or lists of them."""
    if _is_shape(out_shape):
        shapes = [out_shape]
    elif isinstance(out_shape, (tuple, list)) and out_shape and all(map(_is_shape, out_shape)):
        shapes = list(out_shape)
    else:
        raise trace_error(
            what, f"expected out_shape as a shape or a list of shapes, got {out_shape!r}"
        )
    dtypes = list(out_dtype) if isinstance(out_dtype, (tuple, list)) else [out_dtype] * len(shapes)
    if len(dtypes) != len(shapes):
        raise trace_error(
            what, f"expected {len(shapes)} output dtypes, one per out_shape, got {len(dtypes)}"
        )
    if any(d < 0 for shape in shapes for d in shape):
        raise trace_error(what, f"expected non-negative output dims, got {out_shape!r}")
    return [
        tensor(tuple(int(d) for d in s), checked_dtype(t, what))
        for s, t in zip(shapes, dtypes, strict=True)
    ]


def _results(tracer: Tracer, var: Var, count: int, what: str) -> Results:
    if count == 1:
        return Tensor(tracer, var)
    return tuple(Tensor(tracer, v) for v in tracer.emit_fields(var, what))


# Numpy kernels ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NumpyKernel:
    """A Python function over numpy arrays with declared outputs; call it with tensors."""

    fn: Callable[..., Any]
    outputs: tuple[TensorStructInfo, ...]
    name: str

    def __call__(self, *args: Any) -> Results:
        what = f"numpy kernel {self.name}"
        first = tensor_operand(next((a for a in args if isinstance(a, Tensor)), None), what)
        tracer = first.tracer
        exprs = tuple(operand(tracer, a, first.dtype, what) for a in args)
        extern = tracer.extern_name(self.fn, self.name)
        call = checked(what, lambda: op.call_packed(extern, *exprs, sinfo_args=self.outputs))
        var = tracer.emit(call, self.name, what)
        return _results(tracer, var, len(self.outputs), what)


def numpy_kernel(
    fn: Callable[..., Any], out_shape: Any, out_dtype: Any, *, name: str | None = None
) -> NumpyKernel:
    """Wrap `fn(*arrays) -> array(s)` as a traceable kernel with the declared output(s).

    `out_shape` is one shape, or a list of shapes for a kernel returning a tuple; `out_dtype`
    is one dtype (for every output) or a list of them. At run time `fn` receives numpy arrays,
    must not modify them, and must return arrays of exactly the declared shapes and dtypes (a
    tuple of them for several outputs).
    """
    if not callable(fn):
        raise trace_error("numpy_kernel", f"expected a function, got {type(fn).__name__}")
    outputs = tuple(declared_outputs(out_shape, out_dtype, "numpy_kernel"))
    return NumpyKernel(fn, outputs, name or str(getattr(fn, "__name__", "kernel")))


# TIR kernels ------------------------------------------------------------------------------------


def call_tir(
    func: PrimFunc,
    args: Tensor | Sequence[Tensor],
    out_shape: Any = None,
    out_dtype: Any = None,
    *,
    name: str | None = None,
) -> Results:
    """Call a TIR kernel in destination-passing style: its last params are its outputs.

    Output shapes and dtypes come from those buffers (symbolic dims resolved from the
    arguments); `out_shape`/`out_dtype` are needed only where a dim cannot be resolved.
    """
    from lazyparams.tir.nodes import PrimFunc

    what = "call_tir"
    if not isinstance(func, PrimFunc):
        raise trace_error(what, f"expected a TIR PrimFunc, got {type(func).__name__}")
    inputs = [args] if isinstance(args, Tensor) else list(args)
    tensors = [tensor_operand(a, what) for a in inputs]
    tracer = tensors[0].tracer if tensors else active_tracer(what)
    if len(func.buffers) != len(func.params):
        raise trace_error(what, "expected a PrimFunc of buffer params only, got scalar params")
    if len(func.params) <= len(tensors):
        raise trace_error(
            what,
            f"expected fewer than {len(func.params)} arguments (outputs are the last "
            f"params), got {len(tensors)}",
        )
    dims = _bind_inputs(func.buffers[: len(tensors)], tensors, what)
    outputs = _kernel_outputs(func.buffers[len(tensors) :], dims, out_shape, out_dtype, what)
    symbol = func.attrs.get("global_symbol")
    gvar = tracer.kernel_var(func, name or (symbol if isinstance(symbol, str) else "kernel"))
    call = checked(what, lambda: op.call_tir(gvar, [t.var for t in tensors], outputs))
    return _results(tracer, tracer.emit(call, gvar.name_hint, what), len(outputs), what)


def _bind_inputs(buffers: Sequence[Buffer], tensors: list[Tensor], what: str) -> dict[PrimVar, int]:
    """Check each argument against its buffer; return the values of the symbolic dims."""
    bound: dict[PrimVar, int] = {}
    for i, (buf, arg) in enumerate(zip(buffers, tensors, strict=True)):
        if buf.dtype != arg.dtype or len(buf.shape) != arg.ndim:
            raise trace_error(
                what,
                f"argument {i} ({buf.name}): expected {_describe(buf)}, got "
                f"{arg.shape} {arg.dtype}",
            )
        for dim, size in zip(buf.shape, arg.shape, strict=True):
            if isinstance(dim, PrimVar):
                dim_value = bound.setdefault(dim, size)
            else:
                dim_value = dim.value if isinstance(dim, IntImm) else size
            if dim_value != size:
                raise trace_error(
                    what,
                    f"argument {i} ({buf.name}): expected {_describe(buf, bound)}, got "
                    f"{arg.shape} {arg.dtype}",
                )
    return bound


def _kernel_outputs(
    buffers: Sequence[Buffer], bound: dict[PrimVar, int], out_shape: Any, out_dtype: Any, what: str
) -> list[TensorStructInfo]:
    resolved = [_resolve(buf, bound) for buf in buffers]
    if out_shape is None:
        missing = [buf.name for buf, shape in zip(buffers, resolved, strict=True) if shape is None]
        if missing:
            raise trace_error(
                what,
                f"expected out_shape for outputs whose dims the arguments do not fix, "
                f"got none for {', '.join(missing)}",
            )
        return [tensor(s, b.dtype) for s, b in zip(resolved, buffers, strict=True) if s is not None]
    dtypes = out_dtype if out_dtype is not None else [b.dtype for b in buffers]
    declared = declared_outputs(out_shape, dtypes, what)
    if len(declared) != len(buffers):
        raise trace_error(
            what,
            f"expected {len(buffers)} output shapes, one per output buffer, got {len(declared)}",
        )
    for buf, shape, sinfo in zip(buffers, resolved, declared, strict=True):
        if sinfo.dtype != buf.dtype or (shape is not None and sinfo.static_shape != shape):
            raise trace_error(
                what,
                f"output {buf.name}: expected {_describe(buf, bound)}, got "
                f"{sinfo.static_shape} {sinfo.dtype}",
            )
    return declared


def _resolve(buf: Buffer, bound: dict[PrimVar, int]) -> tuple[int, ...] | None:
    dims: list[int] = []
    for dim in buf.shape:
        if isinstance(dim, IntImm):
            dims.append(dim.value)
        elif isinstance(dim, PrimVar) and dim in bound:
            dims.append(bound[dim])
        else:
            return None
    return tuple(dims)


def _describe(buf: Buffer, bound: dict[PrimVar, int] | None = None) -> str:
    """`(4, 6) float32`, with the dims the arguments fixed filled in and the rest by name."""
    bound = bound or {}
    dims = tuple(
        IntImm(bound[d]) if isinstance(d, PrimVar) and d in bound else d for d in buf.shape
    )
    return f"{show_shape(dims)} {buf.dtype}"
