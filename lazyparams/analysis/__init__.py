"""Analyses of Relax functions: well-formedness, liveness and peak memory.

Imports `ir`, `tir` and `op`, each public name's module on first use, so that planning a
checkpoint (liveness and memory only) does not load `well_formed` and the TIR it checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazyparams.lazy_names import keep_public_functions, lazy_package

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

__getattr__, __dir__ = lazy_package(__name__, _MODULE_OF)
keep_public_functions(__name__, _MODULE_OF)
