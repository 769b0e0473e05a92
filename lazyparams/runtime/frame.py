"""A running function's values and what the VM prepared for it: the only references the VM
keeps to the values it computed, each bound, counted by the memory meter and dropped once.
Imports `ir`, `analysis` and the runtime's meter and value helpers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lazyparams.analysis.liveness import Liveness
from lazyparams.errors import RuntimeExecError
from lazyparams.ir.expr import Function, Var
from lazyparams.runtime.memory import MemoryMeter
from lazyparams.runtime.values import Symbols


@dataclass(frozen=True, slots=True)
class FunctionPlan:
    """What the VM prepares once per Relax function: the function and its liveness."""

    name: str
    func: Function
    live: Liveness


class Frame:
    """The values of one running function: the only references the VM keeps to them.

    `VirtualMachine.prepare` hands one to a caller that runs the bindings itself (the parallel
    runner); `values` is then the caller's to fill and empty.
    """

    __slots__ = ("meter", "plan", "symbols", "values")

    def __init__(self, plan: FunctionPlan, meter: MemoryMeter) -> None:
        self.plan, self.meter = plan, meter
        self.values: dict[Var, Any] = {}
        self.symbols: Symbols = {}

    def bind(self, var: Var, value: Any) -> None:
        self.meter.hold(value)
        self.values[var] = value

    def drop(self, var: Var) -> None:
        if var in self.values:
            self.meter.release(self.values.pop(var))

    def get(self, var: Var, where: str) -> Any:
        if var in self.values:
            return self.values[var]
        if var in self.plan.live.defined_at:
            raise RuntimeExecError(
                f"{where}: expected {var.name_hint} to be live, got it already freed "
                "(by kill_object or after its last use)"
            )
        raise RuntimeExecError(f"{where}: expected a var of this function, got {var.name_hint}")

    def clear(self) -> None:
        for var in list(self.values):
            self.drop(var)
