"""Analyses of Relax functions: well-formedness, liveness and peak memory.

Imports `ir`, `tir` and `op`, each public name's module on first use, so that planning a
checkpoint (liveness and memory only) does not load `well_formed` and the TIR it checks.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lazyparams.analysis.liveness import PARAM, RESULT, Liveness, liveness, used_vars
    from lazyparams.analysis.memory import (
        MemoryProfile,
        check_budget,
        estimate_peak_memory,
        weight_struct_info,
    )
    from lazyparams.analysis.well_formed import well_formed

_MODULE_OF: dict[str, str] = {
    **dict.fromkeys(("PARAM", "RESULT", "Liveness", "liveness", "used_vars"), "liveness"),
    **dict.fromkeys(
        ("MemoryProfile", "check_budget", "estimate_peak_memory", "weight_struct_info"), "memory"
    ),
    "well_formed": "well_formed",
}

__all__ = ["PARAM", "RESULT", "Liveness", "liveness", "used_vars", "well_formed"]
__all__ += ["MemoryProfile", "check_budget", "estimate_peak_memory", "weight_struct_info"]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'lazyparams.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lazyparams.analysis.{_MODULE_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


class _AnalysisModule(types.ModuleType):
    """The package, whose public `liveness` and `well_formed` are the functions even though
    modules of the same names exist: importing such a module binds it on the package, and this
    binding keeps the function of that name instead (as an eager `from ... import` would)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _MODULE_OF:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _AnalysisModule
