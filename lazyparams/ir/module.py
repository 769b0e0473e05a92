"""IRModule: a named collection of Relax functions and TIR PrimFuncs.

Modules are values: passes build new ones (`with_function`) and never change their input.
`script()` calls the printer core (`ir.printer`), loaded on the first print so that importing
the IR stays light. Imports the other `ir` modules only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from lazyparams.errors import LazyParamsError
from lazyparams.ir.expr import BaseFunc, Function, GlobalVar


class IRModule:
    """An ordered mapping from function name to function, plus module attrs."""

    __slots__ = ("_functions", "_global_vars", "attrs")

    def __init__(
        self,
        functions: Mapping[str | GlobalVar, BaseFunc] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self._functions: dict[str, BaseFunc] = {}
        self._global_vars: dict[str, GlobalVar] = {}
        for key, func in (functions or {}).items():
            name = key.name_hint if isinstance(key, GlobalVar) else key
            self._functions[name] = func
            self._global_vars[name] = key if isinstance(key, GlobalVar) else GlobalVar(name)
        self.attrs: dict[str, Any] = dict(attrs or {})

    def __getitem__(self, key: str | GlobalVar) -> BaseFunc:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        if name not in self._functions:
            raise self._missing(name)
        return self._functions[name]

    def __contains__(self, key: object) -> bool:
        name = key.name_hint if isinstance(key, GlobalVar) else key
        return name in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def _missing(self, name: str) -> LazyParamsError:
        have = ", ".join(self.names()) or "none"
        return LazyParamsError(f"module has no function {name!r}; expected one of {have}")

    def names(self) -> list[str]:
        """Function names in module order."""
        return list(self._functions)

    def items(self) -> list[tuple[str, BaseFunc]]:
        """(name, function) pairs in module order."""
        return list(self._functions.items())

    def relax_functions(self) -> list[tuple[str, Function]]:
        """(name, function) pairs of the Relax functions only."""
        return [(n, f) for n, f in self._functions.items() if isinstance(f, Function)]

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar naming function `name` in this module."""
        if name not in self._global_vars:
            raise self._missing(name)
        return self._global_vars[name]

    def with_function(self, name: str, func: BaseFunc) -> IRModule:
        """A new module with `name` bound to `func` (replaced in place, or appended)."""
        functions: dict[str | GlobalVar, BaseFunc] = {
            self._global_vars[n]: f for n, f in self._functions.items()
        }
        functions[self._global_vars.get(name, GlobalVar(name))] = func
        return IRModule(functions, self.attrs)

    def without_function(self, name: str) -> IRModule:
        """A new module without function `name`."""
        functions: dict[str | GlobalVar, BaseFunc] = {
            self._global_vars[n]: f for n, f in self._functions.items() if n != name
        }
        return IRModule(functions, self.attrs)

    def script(self, flavor: str = "lazyparams") -> str:
        """The module in script syntax; parsing it back gives a structurally equal module.
        `flavor="tvm"` spells it as TVM 0.27 does, for TVM's parser."""
        from lazyparams.ir.printer import print_module  # the printer needs numpy: load it late

        return print_module(self, flavor)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"IRModule({self.names()})"
