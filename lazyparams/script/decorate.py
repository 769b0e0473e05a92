"""What the decorators do with Python objects: find their source and parse it.

The namespaces `I`, `R` and `T` may be imported under other names; those are learned from the
defining module's globals. Imports `ir` and the parser.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from lazyparams.ir.expr import BaseFunc
from lazyparams.ir.module import IRModule
from lazyparams.script.markers import module_globals
from lazyparams.script.parser import parse_class, parse_function
from lazyparams.script.source import namespace_aliases

_NAMESPACES = {
    "I": "lazyparams.script.ir",
    "R": "lazyparams.script.relax",
    "T": "lazyparams.script.tir",
}


def aliases_for(obj: Any) -> dict[str, str]:
    """Alias -> namespace letter for the module that defines `obj`."""
    modules = {letter: sys.modules.get(name) for letter, name in _NAMESPACES.items()}
    present = {letter: m for letter, m in modules.items() if m is not None}
    return namespace_aliases(module_globals(obj), present)


def parse_standalone(func: Callable[..., Any]) -> BaseFunc:
    """The Function or PrimFunc of a decorated `def` outside any module class."""
    return parse_function(func, aliases_for(func))


def parse_module(cls: type) -> IRModule:
    """The IRModule of an `@I.ir_module` class."""
    return parse_class(cls, aliases_for(cls))
