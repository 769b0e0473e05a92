"""The printer core: an IRModule as `@I.ir_module class Module:` text that parses back.

`IRModule.script()` calls it. Relax functions are printed here; a function kind defined by a
later layer (TIR's PrimFunc) is printed by the function that layer registers in
`FUNCTION_PRINTERS` when it is imported, before any such function can exist. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Callable

from lazyparams.errors import LazyParamsError
from lazyparams.ir.expr import BaseFunc, Function
from lazyparams.ir.module import IRModule
from lazyparams.ir.print_prim import Names, PrimPrinter, identifier
from lazyparams.ir.print_relax import RelaxPrinter
from lazyparams.ir.print_text import INDENT, attrs_lines
from lazyparams.ir.spelling import SEED, Spelling, spelling_of

HEADER = SEED.header
MODULE_NAME = "Module"

FunctionPrinter = Callable[[str, BaseFunc, Spelling], list[str]]
FUNCTION_PRINTERS: dict[type, FunctionPrinter] = {}
"""Printers of function kinds other than Relax's, by type: (name, func, spelling) -> lines."""


def function_lines(
    name: str, func: BaseFunc, module_name: str = MODULE_NAME, spelling: Spelling = SEED
) -> list[str]:
    """The lines of one decorated `def` (unindented), in `spelling`."""
    if identifier(name) != name:
        raise LazyParamsError(f"cannot print function {name!r}; expected a Python identifier")
    if isinstance(func, Function):
        return RelaxPrinter(name, func, module_name, spelling).print()
    if type(func) in FUNCTION_PRINTERS:
        return FUNCTION_PRINTERS[type(func)](name, func, spelling)
    raise LazyParamsError(f"cannot print {type(func).__name__}; expected a Function or PrimFunc")


def print_module(mod: IRModule, flavor: str = "lazyparams") -> str:
    """`mod` in script syntax; deterministic, and parsing it gives a structurally equal module.

    `flavor="tvm"` spells it as TVM 0.27 does (`T.sblock`, `out_ty`, `ty_args`, `R.Any`), for
    TVM's parser; lazyparams reads both.
    """
    spelling = spelling_of(flavor)
    body = attrs_lines("I.module_attrs", mod.attrs, PrimPrinter(Names()))
    for name, func in mod.items():
        body += ([""] if body else []) + function_lines(name, func, spelling=spelling)
    if all(not line or line.startswith("#") for line in body):
        body.append("pass")
    lines = [spelling.header, "", "@I.ir_module", f"class {MODULE_NAME}:"]
    lines += [INDENT + line if line else "" for line in body]
    return "\n".join(lines) + "\n"


def print_function(func: BaseFunc, name: str = "main") -> str:
    """One function as a standalone decorated `def`."""
    return "\n".join([HEADER, "", *function_lines(name, func)]) + "\n"
