"""The `I` namespace of the script syntax: the `@I.ir_module` class decorator.

The class body runs as Python (its decorated `def`s become markers); the module itself is
built from the class's source, read with `ast`. Imports `ir` and the parser.
"""

from __future__ import annotations

from typing import Any

from lazyparams.script.decorate import parse_module


def ir_module(cls: type | None = None, *, s_tir: bool = False) -> Any:
    """`@I.ir_module class Module: ...`: the IRModule the class spells; TVM 0.27's
    `@I.ir_module(s_tir=True)` is accepted (every PrimFunc here is schedulable TIR)."""
    del s_tir
    return parse_module(cls) if cls is not None else parse_module


def module_attrs(attrs: dict[str, Any]) -> None:
    """`I.module_attrs({...})` in a class body; the parser reads the attrs from the source."""
    del attrs


__all__ = ["ir_module", "module_attrs"]
