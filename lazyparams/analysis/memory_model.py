"""The buffer model under memory prediction: which binding creates which bytes, who reads them.

A computed value or a loaded input owns new buffers, while a var, tuple or tuple item only
aliases buffers that exist; a buffer is held until every var holding it is dead (or has had
its slot reset by `vm.builtin.tuple_reset_item`) or it is handed to a sink. `memory_builder`
builds the model; the estimate and the scheduler read it.
Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from lazyparams.errors import StructInfoError
from lazyparams.ir import (
    Binding,
    Call,
    Expr,
    ExternFunc,
    Op,
    PrimValue,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
    prim,
)
from lazyparams.ir.dtype import nbytes

Layout = int | None | tuple["Layout", ...]
"""Where a value's bytes live: a buffer id, nothing (scalars, objects), or one layout per field."""

KILL_OP = "vm.kill_object"


def is_kill(expr: Expr) -> bool:
    """Whether `expr` is a `R.vm.kill_object(...)` call: it frees, it computes nothing."""
    return isinstance(expr, Call) and isinstance(expr.op, Op) and expr.op.name == KILL_OP


def reset_slot(expr: Expr) -> tuple[Expr, int] | None:
    """(tuple, index) when `expr` is `R.call_pure_packed("vm.builtin.tuple_reset_item", t, i)`:
    from then on `t` no longer holds its slot `i`."""
    if not (isinstance(expr, Call) and isinstance(expr.op, Op)):
        return None
    if expr.op.name != "call_pure_packed" or len(expr.args) != 3:
        return None
    callee, target, index = expr.args
    is_reset = isinstance(callee, ExternFunc) and callee.global_symbol == TUPLE_RESET
    if not is_reset or not isinstance(index, PrimValue):
        return None
    value = index.value
    return (target, value.value) if isinstance(value, prim.IntImm) else None


TUPLE_RESET = "vm.builtin.tuple_reset_item"


_PRIM_EVAL: dict[type[prim.BinaryOp], Callable[[int, int], int]] = {
    prim.Add: lambda a, b: a + b,
    prim.Sub: lambda a, b: a - b,
    prim.Mul: lambda a, b: a * b,
    prim.FloorDiv: lambda a, b: a // b,
    prim.FloorMod: lambda a, b: a % b,
    prim.Min: min,
    prim.Max: max,
}


# Sizes of struct info ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sizer:
    """Turns struct info into bytes; symbolic dims come from `sizes`, else `default_dim`."""

    sizes: Mapping[str, int]
    default_dim: int | None

    def dim(self, expr: prim.PrimExpr, where: str) -> int:
        if isinstance(expr, prim.IntImm):
            return expr.value
        if isinstance(expr, prim.PrimVar):
            if expr.name in self.sizes:
                return self.sizes[expr.name]
            if self.default_dim is not None:
                return self.default_dim
            raise StructInfoError(
                f"{where}: symbolic dim {expr.name!r} has no value; expected it in sizes="
                f"{{{expr.name!r}: <int>}}, got sizes={dict(self.sizes)}"
            )
        fold = _PRIM_EVAL.get(type(expr)) if isinstance(expr, prim.BinaryOp) else None
        if fold is not None and isinstance(expr, prim.BinaryOp):
            return fold(self.dim(expr.a, where), self.dim(expr.b, where))
        raise StructInfoError(f"{where}: cannot evaluate dim {expr!r}; expected integer arithmetic")

    def tensor_bytes(self, sinfo: TensorStructInfo, where: str) -> int:
        if sinfo.shape is None:
            if self.default_dim is not None:
                dims = [self.default_dim] * max(sinfo.ndim, 1)
                return tensor_nbytes(sinfo.dtype, dims)
            raise StructInfoError(
                f"{where}: tensor of unknown shape; expected a known shape, got ndim={sinfo.ndim}"
            )
        # constant dims, nearly all of them, without a call each
        dims = [d.value if type(d) is prim.IntImm else self.dim(d, where) for d in sinfo.shape]
        return tensor_nbytes(sinfo.dtype, dims)


def tensor_nbytes(dtype: str, shape: Sequence[int]) -> int:
    """Bytes of a tensor in memory; int4 counts a whole byte, as ml_dtypes stores it, a
    block type its blocks' bytes, and an unknown dtype 4 bytes an element."""
    return nbytes(dtype or "float32", shape)


# The buffer model ----------------------------------------------------------------------------


@dataclass(slots=True)
class BufferModel:
    """Every buffer of one function: its size, where it appears, who keeps it alive.

    `created_by[b]` is a binding index (`PARAM` for inputs held from the start). `holders[b]`
    are the vars holding b, `var_readers[v]` the bindings keeping v alive, so `users(b)` are
    those keeping b alive; `last_use[b]` is the last binding during which some var still holds
    it (a `kill_object` drops its var before its own step); `pinned[b]` means the result holds
    it to the end; `handoff[b]` is the last binding during which b counts once `handoff_by[b]`
    gives it to a sink. `loads[i]` marks bindings that load an input; `readers[i]` are the
    vars binding i reads and `cost_reads[i]` those that keep a value alive (in the lazy model
    the returned tuple, bound at `output_tuple`, keeps nothing: its fields are handed off).
    `end_loads` are the inputs the lazy form loads for the result after the last binding, as
    (label, bytes). `kill_groups[v]` (lazy model) are the bindings the pipeline's kill of `v`
    waits for.
    """

    bindings: tuple[Binding, ...]
    output_tuple: int = -1
    sizes: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    created_by: list[int] = field(default_factory=list)
    holders: dict[int, list[Var]] = field(default_factory=dict)
    var_readers: dict[Var, set[int]] = field(default_factory=dict)
    inline_users: dict[int, set[int]] = field(default_factory=dict)
    last_use: list[int] = field(default_factory=list)
    pinned: list[bool] = field(default_factory=list)
    handoff: dict[int, int] = field(default_factory=dict)
    handoff_by: dict[int, int] = field(default_factory=dict)
    loads: list[bool] = field(default_factory=list)
    readers: list[tuple[Var, ...]] = field(default_factory=list)
    cost_reads: list[tuple[Var, ...]] = field(default_factory=list)
    end_loads: list[tuple[str, int]] = field(default_factory=list)
    kill_groups: dict[Var, set[int]] = field(default_factory=dict)

    def new_buffer(self, nbytes: int, label: str, created_by: int) -> int:
        self.last_use.append(created_by)
        self.sizes.append(nbytes)
        self.labels.append(label)
        self.created_by.append(created_by)
        self.pinned.append(False)
        return len(self.sizes) - 1

    def users(self, buffer: int) -> set[int]:
        """The bindings reading a var that holds `buffer` (built on demand: a tuple param's
        buffers share thousands of readers)."""
        found = set(self.inline_users.get(buffer, ()))
        for var in self.holders.get(buffer, ()):
            found |= self.var_readers.get(var, set())
        return found

    def hand_off(self, buffer: int, by: int, last: int) -> None:
        """Binding `by` hands `buffer` to a sink: it stops counting after binding `last`."""
        if last < self.handoff.get(buffer, last + 1):
            self.handoff[buffer], self.handoff_by[buffer] = last, by

    def end_of(self, buffer: int) -> int:
        """Index of the last binding during which `buffer` counts (`len(bindings)`: to the end)."""
        if self.pinned[buffer]:
            end = len(self.bindings)
        else:
            end = max(self.last_use[buffer], self.created_by[buffer])
        return min(end, self.handoff.get(buffer, end))


@dataclass(frozen=True, slots=True)
class Callees:
    """Names of the calls that load inputs and that hand values off to a sink.

    A load is a call of the extern `fget_item`, or of a function-typed param that is also
    given the input's name (the `fget_param(i, name)` callback); the input index is its first
    integer prim value. A hand-off is a call of an extern or a callback param named in
    `handoff`: its operands stop counting once it is made, as the VM meters them.
    """

    fget_item: str = "get_item"
    handoff: tuple[str, ...] = ("set_item", "fset_output")


def is_sized(sinfo: StructInfo) -> bool:
    """Whether values of this struct info hold tensor bytes the model can count."""
    return isinstance(sinfo, (TensorStructInfo, TupleStructInfo))


def layout_buffers(layout: Layout) -> set[int]:
    """Every buffer id inside a layout."""
    if layout is None:
        return set()
    if isinstance(layout, int):
        return {layout}
    return set().union(*(layout_buffers(f) for f in layout)) if layout else set()
