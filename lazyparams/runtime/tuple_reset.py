"""`vm.builtin.tuple_reset_item`: a function lets go of one slot of a tuple it holds.

LiftTransformParams' `consume_params` frees each weight of the bundled `params` tuple after its
last read this way. The VM's tuples are immutable, so the var is rebound to a copy whose slot is
a `ReleasedSlot` marker: the frame's reference to that value ends there (the memory meter stops
counting it unless another var still holds it), and a later read of the slot is an error naming
the tuple and the index. Imports `ir` and `runtime.values`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.expr import Call, Var
from lazyparams.runtime.values import describe_value

NAME = "vm.builtin.tuple_reset_item"


@dataclass(frozen=True, slots=True)
class ReleasedSlot:
    """What a reset tuple holds in place of the value it let go of."""

    tuple_name: str
    index: int

    def read_error(self, where: str) -> RuntimeExecError:
        return RuntimeExecError(
            f"{where}: {self.tuple_name}[{self.index}] was released by {NAME}; expected no "
            "read of a slot after its reset"
        )


class _Frame(Protocol):
    values: dict[Var, Any]

    def get(self, var: Var, where: str) -> Any: ...


def reset_item(frame: _Frame, call: Call, index: int, release: Any, where: str) -> tuple[()]:
    """Release slot `index` of the tuple var `call.args[1]`; `release(value)` tells the meter
    the frame no longer holds the slot's value."""
    target = call.args[1] if len(call.args) == 3 else None
    if not isinstance(target, Var):
        raise RuntimeExecError(f"{where}: {NAME} expected a tuple var and an index")
    value = frame.get(target, where)
    if not isinstance(value, tuple) or not 0 <= index < len(value):
        raise RuntimeExecError(
            f"{where}: {NAME}({target.name_hint}, {index}) expected a tuple of more than "
            f"{index} values, got {describe_value(value)}"
        )
    slot = value[index]
    if isinstance(slot, ReleasedSlot):
        raise slot.read_error(where)
    marker = ReleasedSlot(target.name_hint, index)
    frame.values[target] = (*value[:index], marker, *value[index + 1 :])
    release(slot)
    return ()
