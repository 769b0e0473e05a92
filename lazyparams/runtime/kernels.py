"""numpy kernels of the Relax ops: the registry the VM dispatches `R.<op>(...)` calls through.

Each kernel takes the evaluated operands and the static attrs (ints, tuples of ints, dtype
names) and returns arrays that own their memory, so that freeing an operand really frees it.
Transposes, casts and concat run the loops of `runtime.fast` (and their fusion those of
`runtime.fused`), into outputs from the buffer pool.
Imports `ir` (dtypes), `runtime.memory`, `runtime.pool`, `runtime.fast` and `runtime.fused`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.errors import LazyParamsError, RuntimeExecError
from lazyparams.ir.dtype import to_numpy
from lazyparams.runtime import fast, fused
from lazyparams.runtime.memory import array_leaves
from lazyparams.runtime.pool import BUFFERS

Array = np.ndarray[Any, Any]
Kernel = Callable[[Sequence[Any], Mapping[str, Any]], Any]

KERNELS: dict[str, Kernel] = {}
"""Op name -> kernel(operands, attrs). `call_tir` and `vm.kill_object` are the VM's own."""

_NATIVE_FLOATS = (np.float16, np.float32, np.float64)


def kernel(*names: str) -> Callable[[Kernel], Kernel]:
    """Register a function as the kernel of the ops `names`."""

    def register(fn: Kernel) -> Kernel:
        for name in names:
            KERNELS[name] = fn
        return fn

    return register


def run_kernel(name: str, operands: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """Run op `name`; numpy's complaints become `RuntimeExecError`s naming the op."""
    if name not in KERNELS:
        raise RuntimeExecError(f"R.{name}: expected an op with a numpy kernel, got one without")
    try:
        with np.errstate(all="ignore"):  # IEEE results (inf, nan) rather than warnings
            result = KERNELS[name](operands, attrs)
    except LazyParamsError:
        raise
    except (ValueError, IndexError, TypeError) as err:
        raise RuntimeExecError(f"R.{name}: {err}") from None
    return owned(result, list(array_leaves(tuple(operands))))


def owned(result: Any, inputs: Sequence[Array]) -> Any:
    """`result` with every array copied that would share memory with an input or pin a larger
    buffer: a value has one owner, and dropping an input must release its memory. A view of
    the whole of an input's buffer (a reshape) is kept as it is where nothing can write that
    buffer (a read-only load, or a kernel output from the pool): it pins no more than the
    input did, and the meter counts it as a value of its own, as the memory model does, so
    the bytes held never exceed the bytes counted."""
    if isinstance(result, tuple):
        return tuple(owned(r, inputs) for r in result)
    if not isinstance(result, np.ndarray):
        return result
    root = _root(result)
    if _passes_on(result, root, inputs):
        return result
    shared = any(result is a or np.may_share_memory(result, a) for a in inputs)
    foreign = root.base is not None and not BUFFERS.owns(root)
    if shared or root.nbytes != result.nbytes or foreign:
        return result.copy()
    return result


def _passes_on(result: Array, root: Array, inputs: Sequence[Array]) -> bool:
    """Whether `result` views the whole buffer `root` of an input that nothing writes: the
    buffer then passes on to it, uncopied."""
    if root.nbytes != result.nbytes or not any(_root(a) is root for a in inputs):
        return False
    return not root.flags.writeable or BUFFERS.owns(root)


def _root(array: Array) -> Array:
    """The array at the bottom of `array`'s chain of views: the one holding its buffer."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise RuntimeExecError(f"expected an axis in [{-ndim}, {ndim}), got {axis}")
    return axis % max(ndim, 1)


def _compute_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """Where numpy's matmul has no loop for a dtype (bfloat16, float8), compute in float32."""
    if dtype.kind in "iub" or dtype.type in _NATIVE_FLOATS:
        return dtype
    return np.dtype(np.float32)


# Layout --------------------------------------------------------------------------------------


@kernel("permute_dims")
def _permute_dims(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    return fast.permute_dims(np.asarray(ops[0]), attrs.get("axes"))


@kernel("reshape")
def _reshape(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    return np.reshape(ops[0], tuple(attrs["shape"]))


@kernel("expand_dims")
def _expand_dims(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    return np.expand_dims(ops[0], attrs["axis"])


@kernel("builtin.stop_lift_params")
def _stop_lift_params(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    return ops[0]  # an identity; `owned` gives the result its own buffer


@kernel("assert_op")
def _assert_op(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """Nothing when the condition holds; else the error, its message `format` with the values."""
    if bool(np.asarray(ops[0])):
        return ()
    values = tuple(ops[1]) if len(ops) > 1 else ()
    text = str(attrs.get("format") or "")
    try:
        message = text.format(*values) if text else ", ".join(map(str, values))
    except (IndexError, KeyError, ValueError):
        message = f"{text} {values}"
    raise RuntimeExecError(f"assert_op: the condition does not hold: {message or 'no message'}")


@kernel("astype")
def _astype(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    return fast.cast(np.asarray(ops[0]), to_numpy(attrs["dtype"]))


# Indexing ------------------------------------------------------------------------------------


@kernel("concat")
def _concat(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    tensors = ops[0]
    if not isinstance(tensors, tuple) or not tensors:
        raise RuntimeExecError(f"expected a non-empty tuple of tensors, got {type(tensors)}")
    return fast.concat([np.asarray(t) for t in tensors], attrs.get("axis", 0))


@kernel("layout_cast")
def _layout_cast(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    tensors = ops[0] if isinstance(ops[0], tuple) else (ops[0],)
    if not tensors:
        raise RuntimeExecError("expected a tensor or a non-empty tuple of tensors, got ()")
    parts = [np.asarray(t) for t in tensors]
    axis = _norm_axis(attrs.get("axis", 0), parts[0].ndim)
    axes = [_norm_axis(a, parts[0].ndim) for a in attrs["axes"]]
    return fused.layout_cast(parts, axis, axes, to_numpy(attrs["dtype"]))


@kernel("split")
def _split(ops: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[Array, ...]:
    sections = attrs["indices_or_sections"]
    if not isinstance(sections, int):
        sections = list(sections)
    return tuple(np.split(ops[0], sections, axis=attrs.get("axis", 0)))


@kernel("strided_slice")
def _strided_slice(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    x = ops[0]
    axes, begin, end = attrs["axes"], attrs["begin"], attrs["end"]
    strides = attrs.get("strides") or (1,) * len(axes)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise RuntimeExecError(
            f"expected axes, begin, end and strides of one length, got {len(axes)}, "
            f"{len(begin)}, {len(end)} and {len(strides)}"
        )
    index: list[slice] = [slice(None)] * x.ndim
    for axis, b, e, s in zip(axes, begin, end, strides, strict=True):
        if s == 0:
            raise RuntimeExecError(f"expected non-zero strides, got 0 on axis {axis}")
        index[_norm_axis(axis, x.ndim)] = slice(b, e, s)
    return np.asarray(x[tuple(index)])


@kernel("take")
def _take(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    x, indices = ops
    if np.asarray(indices).dtype.kind not in "iu":
        raise RuntimeExecError(f"expected integer indices, got {np.asarray(indices).dtype}")
    return np.asarray(np.take(x, indices, axis=attrs.get("axis"), mode="raise"))


@kernel("take_along_axis")
def _take_along_axis(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    x, indices = ops
    if np.asarray(indices).dtype.kind not in "iu":
        raise RuntimeExecError(f"expected integer indices, got {np.asarray(indices).dtype}")
    x = np.asarray(x)
    return np.asarray(np.take_along_axis(x, indices, axis=_norm_axis(attrs["axis"], x.ndim)))


@kernel("unpack_bits")
def _unpack_bits(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    """Each int32 of x as 32 / bits fields along `axis`, lowest bits first: field k of a word
    is (word >> bits * k) & (2**bits - 1), placed at index word_index * (32 / bits) + k."""
    x = np.asarray(ops[0])
    if x.dtype != np.int32:
        raise RuntimeExecError(f"R.unpack_bits: expected x of dtype int32, got {x.dtype}")
    bits, axis = int(attrs["bits"]), _norm_axis(attrs["axis"], x.ndim)
    shifts = np.arange(0, 32, bits, dtype=np.int32)
    moved = np.moveaxis(x, axis, -1)[..., None]
    fields = (moved >> shifts) & np.int32((1 << bits) - 1)
    fields = fields.reshape(*moved.shape[:-2], moved.shape[-2] * len(shifts))
    return np.ascontiguousarray(np.moveaxis(fields, -1, axis).astype(attrs["dtype"]))


# Arithmetic ----------------------------------------------------------------------------------


def same_dtype(a: Array, b: Array, op: str = "") -> np.dtype[Any]:
    """The dtype two operands share, or the error (naming `op` where given)."""
    if a.dtype != b.dtype:
        where = f"R.{op}: " if op else ""
        raise RuntimeExecError(
            f"{where}expected operands of one dtype, got {a.dtype} and {b.dtype}"
        )
    return np.dtype(a.dtype)


def _elementwise(ufunc: np.ufunc) -> Kernel:
    """The kernel of a broadcasting binary op whose operands share one dtype."""

    def run(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
        a, b = np.asarray(ops[0]), np.asarray(ops[1])
        return np.asarray(ufunc(a, b)).astype(same_dtype(a, b), copy=False)

    return run


_ARITHMETIC = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
for _name, _ufunc in _ARITHMETIC.items():
    kernel(_name)(_elementwise(_ufunc))


@kernel("divide")
def _divide(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    a, b = np.asarray(ops[0]), np.asarray(ops[1])
    dtype = same_dtype(a, b)
    if dtype.kind not in "iu":
        return np.asarray(np.true_divide(a, b)).astype(dtype, copy=False)
    if np.any(b == 0):
        raise RuntimeExecError("expected non-zero integer divisors, got a zero")
    quotient = np.floor_divide(np.abs(a), np.abs(b))  # truncating division, as C and TIR do
    return np.asarray(np.where((a < 0) != (b < 0), -quotient, quotient)).astype(dtype)


@kernel("matmul")
def _matmul(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    a, b = np.asarray(ops[0]), np.asarray(ops[1])
    out = to_numpy(attrs["out_dtype"]) if attrs.get("out_dtype") else same_dtype(a, b)
    work = _compute_dtype(out)
    return np.asarray(np.matmul(a.astype(work), b.astype(work))).astype(out, copy=False)


# Creation ------------------------------------------------------------------------------------


@kernel("zeros")
def _zeros(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    return np.zeros(tuple(attrs["shape"]), to_numpy(attrs["dtype"]))


@kernel("ones")
def _ones(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    return np.ones(tuple(attrs["shape"]), to_numpy(attrs["dtype"]))
