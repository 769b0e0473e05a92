"""Builds the buffer model of a Relax function in one walk over its bindings.

Each var gets a layout (the buffers its value holds); calls and constants create buffers, loads
create the bytes of an input, hand-offs and kills end them. In the lazy model an eager function
is read as the standard pipeline will run it (see `lazy_model`). Imports `ir` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lazyparams.analysis.lazy_model import KillFacts, kill_group_readers, output_fields
from lazyparams.analysis.liveness import PARAM, liveness
from lazyparams.analysis.memory_model import (
    BufferModel,
    Callees,
    Layout,
    Sizer,
    is_kill,
    is_sized,
    layout_buffers,
    reset_slot,
)
from lazyparams.errors import StructInfoError, TransformError
from lazyparams.ir import (
    Binding,
    Call,
    Constant,
    Expr,
    ExternFunc,
    FuncStructInfo,
    Function,
    If,
    MatchCast,
    PrimValue,
    StringImm,
    StructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    prim,
    struct_info_of,
)


class _ModelBuilder:
    """Walks a function once, giving every var a layout and recording every buffer."""

    def __init__(
        self,
        func: Function,
        sizer: Sizer,
        *,
        as_lazy: bool,
        inputs: Sequence[StructInfo] | None,
        callees: Callees,
    ) -> None:
        self.func, self.sizer, self.as_lazy = func, sizer, as_lazy
        self.inputs, self.callees = inputs, callees
        self.live = liveness(func)
        self.kills = [is_kill(b.value) for b in self.live.bindings]
        self.model = BufferModel(self.live.bindings)
        self.layouts: dict[Var, Layout] = {}
        self.defined_at: dict[Var, int] = {}
        self.pending: dict[int, str] = {}
        self.loaded: dict[tuple[Var, int], Layout] = {}
        # Lazy model: a var bound to a weight read, or copying one, is that weight's load var.
        self.load_of: dict[Var, Var] = {}
        self.load_vars: dict[tuple[Var, int], Var] = {}
        self.inline_users: dict[int, set[int]] = {}
        self.resets: dict[tuple[Var, int], int] = {}
        num_input = int(func.attrs.get("num_input", 0))
        self.weights = set(func.params[num_input:]) if as_lazy else set()

    def build(self) -> BufferModel:
        for param in self.func.params:
            if param not in self.weights:
                self.layouts[param] = self._fresh(struct_info_of(param), param.name_hint, PARAM)
        if self.as_lazy:
            self.model.output_tuple = self._output_tuple_binding()
        for index, binding in enumerate(self.live.bindings):
            self._add_binding(index, binding)
        self._check_pending()
        self._record_users()
        if self.as_lazy:
            self._hand_off_outputs()
        return self.model

    def _add_binding(self, index: int, binding: Binding) -> None:
        reads = self.live.uses[index]
        ignored = index == self.model.output_tuple
        self.model.readers.append(reads)
        self.model.cost_reads.append(() if ignored else reads)
        self.model.loads.append(False)
        self.defined_at[binding.var] = index
        if ignored:  # the returned tuple's fields are handed off one by one: it holds nothing
            self.layouts[binding.var] = None
            return
        if not isinstance(binding.value, TupleGetItem):
            self._load_inline_weights(binding.value, index)
        self._load_unpacked_weights(reads, index)
        self.layouts[binding.var] = self._layout(binding, index)

    def _output_tuple_binding(self) -> int:
        """Index of the binding of the returned tuple var, or -1."""
        result = self.func.body.body
        for index, binding in enumerate(self.live.bindings):
            if binding.var is result and isinstance(binding.value, Tuple):
                return index
        return -1

    def _fresh(self, sinfo: StructInfo, label: str, created_by: int) -> Layout:
        """New buffers for a value of struct info `sinfo`, one per tensor leaf."""
        if isinstance(sinfo, TensorStructInfo):
            nbytes = self.sizer.tensor_bytes(sinfo, label)
            return self.model.new_buffer(nbytes, label, created_by)
        if isinstance(sinfo, TupleStructInfo):
            return tuple(
                self._fresh(f, f"{label}[{i}]", created_by) for i, f in enumerate(sinfo.fields)
            )
        return None

    # Loads of the lazy model ---------------------------------------------------------------

    def _load_weight(self, param: Var, index: int, label: str, at: int) -> Layout:
        """The buffers of weight `param[index]`, loaded at binding `at` on its first read."""
        key = (param, index)
        if key not in self.loaded:
            sinfo = struct_info_of(TupleGetItem(param, index))
            self.loaded[key] = self._fresh(sinfo, label, at)
        return self.loaded[key]

    def _load_inline_weights(self, expr: Expr, index: int) -> None:
        """`params[i]` read inside an expression: loaded before the binding, read by it."""
        if isinstance(expr, Var) and expr in self.weights:
            if isinstance(struct_info_of(expr), TupleStructInfo):
                raise TransformError(
                    f"binding {self.live.bindings[index].var.name_hint}: reads the weight tuple "
                    f"{expr.name_hint} whole; expected only {expr.name_hint}[i] reads"
                )
        elif isinstance(expr, TupleGetItem) and expr.tuple_value in self.weights:
            assert isinstance(expr.tuple_value, Var)
            label = f"{expr.tuple_value.name_hint}[{expr.index}]"
            for buffer in layout_buffers(
                self._load_weight(expr.tuple_value, expr.index, label, index)
            ):
                self.inline_users.setdefault(buffer, set()).add(index)
        elif isinstance(expr, (Call, Tuple, TupleGetItem)):
            for part in _operands(expr):
                self._load_inline_weights(part, index)

    def _load_unpacked_weights(self, reads: tuple[Var, ...], index: int) -> None:
        """A weight param passed unpacked is loaded right before the first binding reading it."""
        for var in reads:
            if var in self.weights and var not in self.layouts:
                sinfo = struct_info_of(var)
                if not isinstance(sinfo, TupleStructInfo):
                    self.layouts[var] = self._fresh(sinfo, var.name_hint, index)

    # Layouts -------------------------------------------------------------------------------

    def _layout(self, binding: Binding, index: int) -> Layout:
        """The layout of a binding's var; a match_cast also sizes a load typed R.Object."""
        layout = self._value_layout(binding, index)
        if isinstance(binding, MatchCast) and isinstance(layout, int) and layout in self.pending:
            label = binding.var.name_hint
            sinfo = _as_tensor(binding.struct_info, label)
            self.model.sizes[layout] = self.sizer.tensor_bytes(sinfo, label)
            del self.pending[layout]
        return layout

    def _value_layout(self, binding: Binding, index: int) -> Layout:
        value, label = binding.value, binding.var.name_hint
        if isinstance(value, Var):
            if value in self.load_of and isinstance(binding, VarBinding):
                self.load_of[binding.var] = self.load_of[value]
            return self.layouts.get(value)
        if isinstance(value, Tuple):
            fields = enumerate(value.fields)
            return tuple(self._field_layout(f, f"{label}[{i}]", index) for i, f in fields)
        if isinstance(value, TupleGetItem):
            return self._item_layout(binding, value, index)
        if isinstance(value, Call):
            return self._call_layout(binding, value, index)
        if isinstance(value, Constant):
            return self._fresh(struct_info_of(value), label, index)
        return None

    def _field_layout(self, expr: Expr, label: str, index: int) -> Layout:
        if isinstance(expr, Var):
            return self.layouts.get(expr)
        if isinstance(expr, Constant):
            return self._fresh(struct_info_of(expr), label, index)
        return None

    def _item_layout(self, binding: Binding, item: TupleGetItem, index: int) -> Layout:
        base = item.tuple_value
        if isinstance(base, Var) and base in self.weights:
            # One load per input, as the lazy pass does: a later read aliases the first.
            key = (base, item.index)
            self.model.loads[index] = key not in self.loaded
            if isinstance(binding, VarBinding):
                self.load_of[binding.var] = self.load_vars.setdefault(key, binding.var)
            return self._load_weight(base, item.index, binding.var.name_hint, index)
        layout = self.layouts.get(base) if isinstance(base, Var) else None
        if isinstance(layout, tuple) and 0 <= item.index < len(layout):
            return layout[item.index]
        return None

    def _call_layout(self, binding: Binding, call: Call, index: int) -> Layout:
        if self.kills[index]:
            return None
        reset = reset_slot(call)
        if reset is not None:
            self._reset(reset, index)
            return None
        if self._callee_name(call) in self.callees.handoff:
            for arg in call.args:
                for buffer in layout_buffers(
                    self.layouts.get(arg) if isinstance(arg, Var) else None
                ):
                    self.model.hand_off(buffer, index, index - 1)
        load_index = self._load_index(call)
        if load_index is not None:
            self.model.loads[index] = True
            return self._load_layout(binding, load_index, index)
        sinfo = struct_info_of(binding.var)
        if not is_sized(sinfo):
            sinfo = struct_info_of(call)
        return self._fresh(sinfo, binding.var.name_hint, index)

    def _reset(self, reset: tuple[Expr, int], index: int) -> None:
        """`tuple_reset_item(t, i)` at `index`: `t` holds the buffers of slot `i` no longer."""
        target, slot = reset
        layout = self.layouts.get(target) if isinstance(target, Var) else None
        if isinstance(target, Var) and isinstance(layout, tuple) and 0 <= slot < len(layout):
            for buffer in layout_buffers(layout[slot]):
                self.resets[(target, buffer)] = index

    def _callee_name(self, call: Call) -> str | None:
        if isinstance(call.op, ExternFunc):
            return call.op.global_symbol
        return call.op.name_hint if isinstance(call.op, Var) else None

    def _load_index(self, call: Call) -> int | None:
        """The input index when `call` loads an input (see `Callees`)."""
        op = call.op
        is_extern = isinstance(op, ExternFunc) and op.global_symbol == self.callees.fget_item
        is_callback = (
            isinstance(op, Var)
            and op in self.func.params
            and isinstance(op.struct_info, FuncStructInfo)
            and any(isinstance(a, StringImm) for a in call.args)
        )
        if not (is_extern or is_callback):
            return None
        for arg in call.args:
            if isinstance(arg, PrimValue) and isinstance(arg.value, prim.IntImm):
                return arg.value.value
        return None

    def _load_layout(self, binding: Binding, load_index: int, index: int) -> Layout:
        label = binding.var.name_hint
        sinfo = struct_info_of(binding.var)
        if not is_sized(sinfo) and self.inputs is not None:
            if not 0 <= load_index < len(self.inputs):
                raise StructInfoError(
                    f"binding {label}: loads input {load_index}; expected an index below "
                    f"{len(self.inputs)}, the number of inputs given, got {load_index}"
                )
            sinfo = self.inputs[load_index]
        if is_sized(sinfo):
            return self._fresh(sinfo, label, index)
        buffer = self.model.new_buffer(0, label, index)
        self.pending[buffer] = f"binding {label} (input {load_index})"
        return buffer

    def _check_pending(self) -> None:
        if self.sizer.default_dim is not None:
            for buffer in self.pending:
                self.model.sizes[buffer] = self.sizer.default_dim**2 * 4
            return
        for what in self.pending.values():
            raise StructInfoError(
                f"cannot size the load at {what}: it is typed R.Object and no match_cast "
                "refines it; expected a tensor struct info, or inputs=[...] giving the struct "
                "info of every input"
            )

    # Users and hand-offs -------------------------------------------------------------------

    def _record_users(self) -> None:
        model = self.model
        for var, layout in self.layouts.items():
            for buffer in layout_buffers(layout):
                model.holders.setdefault(buffer, []).append(var)
        for index, reads in enumerate(model.cost_reads):
            for var in reads:
                model.var_readers.setdefault(var, set()).add(index)
        if self.as_lazy:
            model.kill_groups = self._kill_groups()
            model.var_readers.update(model.kill_groups)
        model.inline_users = self.inline_users
        result_uses = set() if self.as_lazy else set(self.live.result_uses)
        last_of = {var: self._last_hold(uses) for var, uses in model.var_readers.items()}
        for buffer, vars_ in model.holders.items():
            for var in vars_:
                model.pinned[buffer] |= var in result_uses
                last = last_of.get(var, -1)
                if (var, buffer) in self.resets:  # held until just before the reset, as a kill
                    last = min(last, self.resets[(var, buffer)] - 1)
                model.last_use[buffer] = max(model.last_use[buffer], last)
        for buffer, users in self.inline_users.items():
            model.last_use[buffer] = max(model.last_use[buffer], *users)

    def _last_hold(self, uses: set[int]) -> int:
        """The last binding during which a var read at `uses` is held (a kill drops it first)."""
        kills = self.kills
        return max((u - 1 if kills[u] else u for u in uses), default=-1)

    def _kill_groups(self) -> dict[Var, set[int]]:
        """Lazy model: the bindings `KillAfterLastUse` waits for before killing each var."""
        outputs = output_fields(self.func, self.model.output_tuple)
        handed = [o.tuple_value if isinstance(o, TupleGetItem) else o for o in outputs]
        facts = KillFacts(
            self.func.params,
            self.live.bindings,
            self.model.cost_reads,
            self.load_of,
            [v for v in handed if isinstance(v, Var)],
            self.model.output_tuple,
        )
        return kill_group_readers(facts)

    def _hand_off_outputs(self) -> None:
        """Lazy model: each output is handed off right after the binding (or load) making it."""
        for output in output_fields(self.func, self.model.output_tuple):
            var = output.tuple_value if isinstance(output, TupleGetItem) else output
            if not isinstance(var, Var):
                continue
            if var in self.weights:
                self._end_load(var, output)
                continue
            layout = self.layouts.get(var)
            if isinstance(output, TupleGetItem) and isinstance(layout, tuple):
                layout = layout[output.index] if output.index < len(layout) else None
            for buffer in layout_buffers(layout):
                at = self.defined_at.get(var, PARAM)
                if var in self.load_of or at == PARAM:
                    at = self.model.created_by[buffer]
                self.model.hand_off(buffer, at, at)

    def _end_load(self, var: Var, output: Expr) -> None:
        """A weight the result reads directly is loaded (and handed off) after the last binding."""
        if isinstance(output, TupleGetItem):
            key = (var, output.index)
            if key not in self.loaded:
                sinfo = struct_info_of(output)
                label = f"{var.name_hint}[{output.index}]"
                self.model.end_loads.append((label, self._leaf_bytes(sinfo, label)))
        elif var not in self.layouts:
            self.model.end_loads.append((var.name_hint, self._leaf_bytes(var.struct_info, "")))

    def _leaf_bytes(self, sinfo: StructInfo | None, label: str) -> int:
        if isinstance(sinfo, TensorStructInfo):
            return self.sizer.tensor_bytes(sinfo, label)
        if isinstance(sinfo, TupleStructInfo):
            return sum(self._leaf_bytes(f, label) for f in sinfo.fields)
        return 0


def refuse_if(func: Function) -> None:
    """Raise `TransformError` naming the first If binding of `func`, if it has one."""
    for index, binding in enumerate(func.bindings()):
        if isinstance(binding.value, If):
            raise TransformError(
                f"memory model: binding {index} ({binding.var.name_hint}) is an if/else, whose "
                "peak depends on the branch taken at run time, so it cannot be predicted exactly; "
                "expected a transform without If (a model function's If stays out of its lifted "
                "transform)"
            )


def _operands(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Tuple):
        return expr.fields
    return (expr.tuple_value,) if isinstance(expr, TupleGetItem) else ()


def _as_tensor(sinfo: StructInfo, label: str) -> TensorStructInfo:
    if not isinstance(sinfo, TensorStructInfo):
        raise StructInfoError(f"binding {label}: expected a tensor match_cast, got {sinfo!r}")
    return sinfo


def buffer_model(
    func: Function,
    sizes: Mapping[str, int] | None = None,
    *,
    as_lazy: bool = False,
    inputs: Sequence[StructInfo] | None = None,
    callees: Callees | None = None,
    default_dim: int | None = None,
    allow_if: bool = False,
) -> BufferModel:
    """The buffers of `func`; see `estimate_peak_memory` for the arguments.

    `default_dim` stands in for symbolic dims missing from `sizes` (the scheduler only needs
    relative sizes); without it such a dim raises `StructInfoError` naming it. A function with
    an If is refused (its peak depends on the branch taken, so no prediction is exact) unless
    `allow_if`, where the If's value counts as holding nothing of its own (the scheduler, which
    keeps every If in place, only weighs what lies between them).
    """
    if not isinstance(func, Function):
        raise StructInfoError(f"expected a Relax Function, got {type(func).__name__}")
    if not allow_if:
        refuse_if(func)
    sizer = Sizer(dict(sizes or {}), default_dim)
    builder = _ModelBuilder(
        func, sizer, as_lazy=as_lazy, inputs=inputs, callees=callees or Callees()
    )
    return builder.build()
