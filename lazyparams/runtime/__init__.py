"""The runtime: a virtual machine that runs Relax functions on numpy arrays, its numpy kernels
per op (with optional compiled loops for transposes, casts and quantization), the extern
registry and the memory meter.

Imports `ir`, `tir`, `op` and `analysis`.
"""

from lazyparams.runtime import gguf_quants as _gguf_quants  # noqa: F401  (registers block kernels)
from lazyparams.runtime import math_kernels as _math_kernels  # noqa: F401  (registers math kernels)
from lazyparams.runtime import mt_kernels as _mt_kernels  # noqa: F401  (registers R.mt_* kernels)
from lazyparams.runtime import nn_kernels as _nn_kernels  # noqa: F401  (registers R.nn kernels)
from lazyparams.runtime import quant as _quant  # noqa: F401  (registers the quantization kernels)
from lazyparams.runtime import rank_kernels as _rank_kernels  # noqa: F401  (sort_rank, rank_mask)
from lazyparams.runtime.kernels import KERNELS, kernel, run_kernel
from lazyparams.runtime.memory import MemoryMeter, MemoryStats, TimelineEntry
from lazyparams.runtime.registry import (
    get_global_func,
    global_func_names,
    register_func,
    remove_global_func,
)
from lazyparams.runtime.vm import DEFAULT_HANDOFF, VirtualMachine

__all__ = [
    "DEFAULT_HANDOFF",
    "KERNELS",
    "MemoryMeter",
    "MemoryStats",
    "TimelineEntry",
    "VirtualMachine",
    "get_global_func",
    "global_func_names",
    "kernel",
    "register_func",
    "remove_global_func",
    "run_kernel",
]
