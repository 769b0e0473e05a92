"""Analyses of Relax functions: well-formedness, liveness and peak memory.

Imports `ir`, `tir` and `op`.
"""

from lazyparams.analysis.liveness import PARAM, RESULT, Liveness, liveness, used_vars
from lazyparams.analysis.memory import (
    MemoryProfile,
    check_budget,
    estimate_peak_memory,
    weight_struct_info,
)
from lazyparams.analysis.well_formed import well_formed

__all__ = ["PARAM", "RESULT", "Liveness", "liveness", "used_vars", "well_formed"]
__all__ += ["MemoryProfile", "check_budget", "estimate_peak_memory", "weight_struct_info"]
