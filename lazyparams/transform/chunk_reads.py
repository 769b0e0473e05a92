"""What a binding is to a row-separable chain (see `chunk_chains`): a load, a step of some
op, a row store and where it starts, a reduction over the rows, a gather that cuts a whole
table per block, and along which axis an operand's rows line up with a step's result. Imports
`ir` and `chunk_splits` only.
"""

from __future__ import annotations

from lazyparams.ir import Binding, Call, Constant, ExternFunc, Op, PrimValue, Var
from lazyparams.ir.prim import IntImm
from lazyparams.transform.chunk_splits import GATHERS, REDUCTIONS, shape_of

SET_ROWS = "set_item_rows"
"""`set_item_rows(j, start, block)`: write `block` as rows [start, start + len) of output j
(rows of its flat view when the block has fewer axes: see `io.partial.flat_block`). A chain
may end in one, from the rows at `start` on (a part of a streamed concatenation)."""


def same_rows(operand: Var, var: Var, axis: int = 0) -> bool:
    """Whether `operand` has as many indices along `axis` as `var` has rows (so it runs in
    the same blocks)."""
    a, b = shape_of(operand), shape_of(var)
    return bool(a) and bool(b) and len(a) > axis and a[axis] == b[0]  # type: ignore[arg-type,index]


def cuts_rows(call: Call) -> bool:
    """Whether `call` gathers the rows of a table by one constant index per row of its result
    (`take_along_axis(x, index, 0)`), so that each block gathers its own rows of a whole x."""
    if not isinstance(call.op, Op) or call.op.name not in GATHERS:
        return False
    indices, out = call.args[1], shape_of(call)
    if not isinstance(indices, Constant) or not out or call.attrs.get("axis") != 0:
        return False
    return bool(indices.data.ndim) and indices.data.shape[0] == out[0] > 1


def row_axis(value: object) -> int:
    """The operand axis that becomes a step's rows: 0, but for a transpose the axis it moves
    to the front (the columns of a matrix whose transpose the chain writes)."""
    if not isinstance(value, Call) or not isinstance(value.op, Op):
        return 0
    if value.op.name != "permute_dims":
        return 0
    axes = value.attrs.get("axes")
    return shape_len(value.args[0]) - 1 if axes is None else int(axes[0]) % shape_len(value.args[0])


def reduces_rows(value: object) -> bool:
    """Whether `value` is a reduction over axis 0 (every axis, or a list holding 0)."""
    if not isinstance(value, Call) or not isinstance(value.op, Op):
        return False
    if value.op.name not in REDUCTIONS:
        return False
    axis = value.attrs.get("axis")
    return axis is None or 0 in axis or -shape_len(value.args[0]) in axis


def shape_len(expr: object) -> int:
    """The rank of a tensor expression (0 when unknown)."""
    shape = shape_of(expr)
    return 0 if shape is None else len(shape)


def is_op(binding: Binding, name: str) -> bool:
    """Whether `binding` calls the op `name`."""
    value = binding.value
    return isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == name


def calls(call: Call, name: str) -> bool:
    return isinstance(call.op, ExternFunc) and call.op.global_symbol == name


def store_offset(call: Call) -> int | None:
    """The first row a chain's store writes: 0 for `set_item(j, v)`, `start` for
    `set_item_rows(j, start, v)` of a var at constant indices; None for anything else."""
    if len(call.args) == 2:
        return 0 if store_index(call) is not None else None
    index, start, value = call.args if len(call.args) == 3 else (None, None, None)
    if not isinstance(value, Var) or not all(int_of(a) is not None for a in (index, start)):
        return None
    return int_of(start)


def int_of(expr: object) -> int | None:
    """The value of a constant int prim value, else None."""
    if isinstance(expr, PrimValue) and isinstance(expr.value, IntImm):
        return expr.value.value
    return None


def store_index(call: Call) -> int | None:
    """The output index of a `set_item(j, value)` hand-off of a var, else None."""
    if len(call.args) != 2 or not isinstance(call.args[1], Var):
        return None
    index = call.args[0]
    if isinstance(index, PrimValue) and isinstance(index.value, IntImm):
        return index.value.value
    return None
