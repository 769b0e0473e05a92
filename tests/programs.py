"""Hypothesis strategies for random well-typed transform programs, shared by the test suite.

`transform_programs()` draws IRModules holding one `main_transform_params(params: R.Tuple(...))`
built with BlockBuilder and the op constructors; `random_inputs(func, seed)` makes matching
arrays. Property tests of passes, the scheduler and the VM draw from here:

    from tests.programs import SETTINGS, transform_programs, random_inputs

    @SETTINGS
    @given(transform_programs())
    def test_pass_keeps_results(mod): ...
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from lazyparams import op
from lazyparams.ir import (
    BlockBuilder,
    Expr,
    Function,
    IRModule,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
)
from lazyparams.ir.dtype import is_float, to_numpy

FUNC_NAME = "main_transform_params"
FLOAT_DTYPES = ("float32", "float16")
DIMS = (1, 2, 3, 4, 6, 8)
MAX_MAGNITUDE = {"float16": 1000.0, "float32": 1.0e6}
"""Largest |value| a float tensor may reach, so float16 never overflows (and never warns)."""

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Modest settings for property tests over these programs (the suite must stay fast)."""

Draw = Callable[[st.SearchStrategy[Any]], Any]


@dataclass
class _Value:
    """A tensor the program has bound: its var, static shape, dtype and a bound on |element|."""

    var: Var
    shape: tuple[int, ...]
    dtype: str
    bound: float


@dataclass
class _Generator:
    """Draws one program binding by binding into a BlockBuilder."""

    draw: Draw
    bb: BlockBuilder
    params: Var
    inputs: list[TensorStructInfo]
    loads: dict[int, list[_Value]] = field(default_factory=dict)
    pool: list[_Value] = field(default_factory=list)

    # Operands ---------------------------------------------------------------------------------

    def load(self, index: int) -> _Value:
        """Bind `w{index} = params[index]` (again, if already loaded: a param read twice)."""
        sinfo = self.inputs[index]
        var = self.bb.emit(TupleGetItem(self.params, index), f"w{index}")
        shape = sinfo.static_shape
        assert shape is not None
        value = _Value(var, shape, sinfo.dtype, 1.0)
        self.loads.setdefault(index, []).append(value)
        self.pool.append(value)
        return value

    def input_value(self, index: int) -> _Value:
        """A var holding param `index`: an earlier load, or a fresh (maybe second) one."""
        earlier = self.loads.get(index, [])
        if earlier and self.draw(st.integers(0, 5)) > 0:
            return self.draw(st.sampled_from(earlier))  # type: ignore[no-any-return]
        return self.load(index)

    def operand(self, accept: Callable[[_Value], bool] = lambda v: True) -> _Value | None:
        """A bound value or a param (loaded on demand) that `accept`s, or None if none does."""
        params = [i for i, s in enumerate(self.inputs) if accept(_input_value(s))]
        bound = [v for v in self.pool if accept(v)]
        choices: list[Any] = [*bound, *params]
        if not choices:
            return None
        choice = self.draw(st.sampled_from(choices))
        return self.input_value(choice) if isinstance(choice, int) else choice

    def emit(self, value: Expr, shape: tuple[int, ...], dtype: str, bound: float) -> _Value:
        """Bind a tensor-valued expression, checking the inferred shape against the expected."""
        var = self.bb.emit(value)
        sinfo = var.struct_info
        assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape == shape, (sinfo, shape)
        result = _Value(var, shape, dtype, bound)
        self.pool.append(result)
        return result

    # Ops ----------------------------------------------------------------------------------

    def step(self) -> None:
        """Apply one randomly chosen op; an op with no suitable operand does nothing."""
        name = self.draw(st.sampled_from(sorted(_OPS)))
        _OPS[name](self)

    def permute_dims(self) -> None:
        x = self.operand(lambda v: len(v.shape) >= 1)
        if x is not None:
            axes = self.draw(st.permutations(range(len(x.shape))))
            shape = tuple(x.shape[a] for a in axes)
            self.emit(op.permute_dims(x.var, axes=axes), shape, x.dtype, x.bound)

    def astype(self) -> None:
        x = self.operand()
        if x is not None:
            dtype = self.draw(st.sampled_from([d for d in FLOAT_DTYPES if d != x.dtype]))
            if x.bound <= MAX_MAGNITUDE[dtype]:
                self.emit(op.astype(x.var, dtype), x.shape, dtype, x.bound)

    def binary(self) -> None:
        x = self.operand(lambda v: is_float(v.dtype))
        if x is None:
            return
        y = self.operand(lambda v: v.shape == x.shape and v.dtype == x.dtype)
        assert y is not None
        multiply = self.draw(st.booleans())
        bound = x.bound * y.bound if multiply else x.bound + y.bound
        if bound <= MAX_MAGNITUDE[x.dtype]:
            call = op.multiply(x.var, y.var) if multiply else op.add(x.var, y.var)
            self.emit(call, x.shape, x.dtype, bound)

    def concat(self) -> None:
        x = self.operand(lambda v: len(v.shape) >= 1)
        if x is None:
            return
        axis = self.draw(st.integers(0, len(x.shape) - 1))
        parts = [x]
        for _ in range(self.draw(st.integers(1, 2))):
            part = self.operand(lambda v: _joins(v, x, axis))
            assert part is not None
            parts.append(part)
        shape = list(x.shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        bound = max(p.bound for p in parts)
        call = op.concat([p.var for p in parts], axis=axis)
        self.emit(call, tuple(shape), x.dtype, bound)

    def reshape(self) -> None:
        x = self.operand()
        if x is None:
            return
        size = math.prod(x.shape)
        rows = self.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
        shape = self.draw(st.sampled_from([(size,), (rows, size // rows), (1, rows, size // rows)]))
        spelled: list[int] = list(shape)
        if len(shape) > 1 and self.draw(st.booleans()):
            spelled[-1] = -1
        self.emit(op.reshape(x.var, spelled), shape, x.dtype, x.bound)

    def split(self) -> None:
        x = self.operand(lambda v: any(d > 1 for d in v.shape))
        if x is None:
            return
        axis = self.draw(st.sampled_from([a for a, d in enumerate(x.shape) if d > 1]))
        dim = x.shape[axis]
        sections = self.draw(st.sampled_from([s for s in range(1, dim + 1) if dim % s == 0]))
        parts = self.bb.emit(op.split(x.var, sections, axis=axis))
        for index in sorted(self.draw(st.sets(st.integers(0, sections - 1), min_size=1))):
            shape = list(x.shape)
            shape[axis] = dim // sections
            self.emit(TupleGetItem(parts, index), tuple(shape), x.dtype, x.bound)

    def strided_slice(self) -> None:
        x = self.operand(lambda v: len(v.shape) >= 1)
        if x is None:
            return
        axis = self.draw(st.integers(0, len(x.shape) - 1))
        dim = x.shape[axis]
        begin = self.draw(st.integers(0, dim - 1))
        end = self.draw(st.integers(begin + 1, dim))
        stride = self.draw(st.sampled_from([1, 2]))
        shape = list(x.shape)
        shape[axis] = len(range(begin, end, stride))
        call = op.strided_slice(x.var, axes=[axis], begin=[begin], end=[end], strides=[stride])
        self.emit(call, tuple(shape), x.dtype, x.bound)

    def quantize_int8(self) -> None:
        x = self.operand(lambda v: is_float(v.dtype) and len(v.shape) >= 1)
        if x is None:
            return
        axis = self.draw(st.integers(0, len(x.shape) - 1))
        packed = self.bb.emit(op.quantize_int8(x.var, axis=axis))
        self.emit(TupleGetItem(packed, 0), x.shape, "int8", 127.0)
        self.emit(TupleGetItem(packed, 1), (x.shape[axis],), "float32", x.bound / 127.0)

    # Outputs --------------------------------------------------------------------------------

    def output_fields(self) -> list[Expr]:
        """1-5 outputs: bound values (duplicates allowed), pass-throughs, constants, prims."""
        fields: list[Expr] = []
        for _ in range(self.draw(st.integers(1, 5))):
            kind = self.draw(st.sampled_from(["value", "value", "input", "const", "prim"]))
            if kind == "value" and self.pool:
                fields.append(self.draw(st.sampled_from(self.pool)).var)
            elif kind in ("value", "input"):
                index = self.draw(st.integers(0, len(self.inputs) - 1))
                fields.append(self.input_value(index).var)
            elif kind == "const":
                values = self.draw(st.lists(st.integers(-4, 4), min_size=1, max_size=4))
                fields.append(op.const(np.array(values, dtype=np.float32), "float32"))
            else:
                fields.append(op.prim_value(self.draw(st.integers(0, 16))))
        return fields


_OPS: dict[str, Callable[[_Generator], None]] = {
    "permute_dims": _Generator.permute_dims,
    "astype": _Generator.astype,
    "binary": _Generator.binary,
    "concat": _Generator.concat,
    "reshape": _Generator.reshape,
    "split": _Generator.split,
    "strided_slice": _Generator.strided_slice,
    "quantize_int8": _Generator.quantize_int8,
}


def _input_value(sinfo: TensorStructInfo) -> _Value:
    """A stand-in for a not-yet-loaded param, so operand filters see its shape and dtype."""
    shape = sinfo.static_shape
    assert shape is not None
    return _Value(Var("unloaded", sinfo), shape, sinfo.dtype, 1.0)


def _joins(part: _Value, first: _Value, axis: int) -> bool:
    """Whether `part` may be concatenated to `first` along `axis`."""
    if part.dtype != first.dtype or len(part.shape) != len(first.shape):
        return False
    return all(
        a == b for i, (a, b) in enumerate(zip(part.shape, first.shape, strict=True)) if i != axis
    )


def _result(gen: _Generator, draw: Draw, dataflow: bool) -> Expr:
    """The returned expression: a bound output tuple, or an inline tuple of outputs."""
    fields = gen.output_fields()
    if draw(st.booleans()):
        tup = Tuple(tuple(fields))
        return gen.bb.emit_output(tup, "gv") if dataflow else gen.bb.emit(tup, "gv")
    if not dataflow:
        return Tuple(tuple(fields))
    carried: dict[Var, Var] = {}
    for item in fields:
        if isinstance(item, Var) and item not in carried:
            carried[item] = gen.bb.emit_output(item, "gv")
    return Tuple(tuple(carried.get(f, f) if isinstance(f, Var) else f for f in fields))


@st.composite
def _programs(draw: Draw, max_params: int, max_ops: int) -> IRModule:
    shapes = st.tuples(st.sampled_from(DIMS), st.sampled_from(DIMS))
    sinfos = draw(
        st.lists(
            st.builds(TensorStructInfo, shapes, st.sampled_from(FLOAT_DTYPES)),
            min_size=1,
            max_size=max_params,
        )
    )
    bb = BlockBuilder()
    bb.names.reserve("params")
    params = Var("params", TupleStructInfo(tuple(sinfos)))
    dataflow = draw(st.booleans())
    with bb.dataflow() if dataflow else nullcontext():
        gen = _Generator(draw, bb, params, sinfos)
        if draw(st.booleans()):
            for index in range(len(sinfos)):
                gen.load(index)
        for _ in range(draw(st.integers(0, max_ops))):
            gen.step()
        result = _result(gen, draw, dataflow)
    func = bb.finish_function((params,), result)
    return IRModule({FUNC_NAME: func})


def transform_programs(max_params: int = 4, max_ops: int = 8) -> st.SearchStrategy[IRModule]:
    """Random well-typed transform programs: one `main_transform_params` over a params tuple.

    The params are 1..`max_params` float32/float16 2-D tensors; `w{i} = params[i]` bindings
    come all at the top or on demand (a param may be read twice); then up to `max_ops` of
    permute_dims, astype, add/multiply, concat, reshape, split, strided_slice and
    quantize_int8 (with TupleGetItem), optionally inside one dataflow block; the result is a
    bound or inline tuple that may repeat values and hold pass-throughs, constants and prims.
    Float values stay small enough that float16 never overflows on `random_inputs`.
    """
    return _programs(max_params, max_ops)


def random_inputs(func: Function, seed: int) -> tuple[np.ndarray[Any, Any], ...]:
    """Arrays for `func`'s inputs: one per field of a single tuple param, else one per param.

    Floats are uniform in [-1, 1], integers in [-8, 8); shapes must be static.
    """
    rng = np.random.default_rng(seed)
    sinfos: list[Any] = [p.struct_info for p in func.params]
    if len(sinfos) == 1 and isinstance(sinfos[0], TupleStructInfo):
        sinfos = list(sinfos[0].fields)
    arrays = []
    for index, sinfo in enumerate(sinfos):
        shape = sinfo.static_shape if isinstance(sinfo, TensorStructInfo) else None
        if shape is None:
            raise ValueError(f"input {index}: expected a tensor of static shape, got {sinfo}")
        data: np.ndarray[Any, Any]
        if is_float(sinfo.dtype):
            data = rng.uniform(-1.0, 1.0, size=shape)
        else:
            data = rng.integers(-8, 8, size=shape)
        arrays.append(data.astype(to_numpy(sinfo.dtype)))
    return tuple(arrays)


__all__ = ["FUNC_NAME", "SETTINGS", "random_inputs", "transform_programs"]
