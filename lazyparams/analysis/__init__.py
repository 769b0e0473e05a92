"""Analyses of Relax functions: well-formedness, liveness and peak memory.

Imports `ir`, `tir` and `op`.
"""

from lazyparams.analysis.liveness import PARAM, RESULT, Liveness, liveness, used_vars

__all__ = ["PARAM", "RESULT", "Liveness", "liveness", "used_vars"]
