"""The engine: plan and convert real checkpoints in bounded memory.

`plan(transform, src)` traces a transform against a checkpoint's header and predicts its
memory; `convert(transform, src, dst)` streams the checkpoint through the compiled lazy
function into a new one. Built-in recipes live in `recipes`. Imports every layer below, each
public name's module on first use, so that a command loads only what it runs.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lazyparams.engine.convert import Report, convert
    from lazyparams.engine.plan import Plan, plan
    from lazyparams.engine.recipes import RECIPE_NAMES, load_spec, recipe
    from lazyparams.engine.sizes import format_bytes, parse_size

_MODULE_OF: dict[str, str] = {
    **dict.fromkeys(("Report", "convert"), "convert"),
    **dict.fromkeys(("Plan", "plan"), "plan"),
    **dict.fromkeys(("RECIPE_NAMES", "load_spec", "recipe"), "recipes"),
    **dict.fromkeys(("format_bytes", "parse_size"), "sizes"),
}

__all__ = [
    "RECIPE_NAMES",
    "Plan",
    "Report",
    "convert",
    "format_bytes",
    "load_spec",
    "parse_size",
    "plan",
    "recipe",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'lazyparams.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lazyparams.engine.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


class _EngineModule(types.ModuleType):
    """The package, whose public `plan` and `convert` are the functions even though modules of
    the same names exist: importing such a module binds it on the package, and this binding
    keeps the function of that name instead (as an eager `from ... import` in here would)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _MODULE_OF:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _EngineModule
