"""Passes over IRModules, one module per pass; every pass maps a module to a new module.

Imports `ir`, `tir`, `op` and `analysis`.
"""

from lazyparams.transform.base import FunctionPass, Pass, Sequential
from lazyparams.transform.bundle_model_params import BundleModelParams
from lazyparams.transform.chunk_rows import ChunkRows
from lazyparams.transform.dead_code_elimination import DeadCodeElimination
from lazyparams.transform.fuse_layout_cast import FuseLayoutCast
from lazyparams.transform.kill_after_last_use import KillAfterLastUse
from lazyparams.transform.lazy_get_input import LazyGetInput
from lazyparams.transform.lazy_set_output import LazySetOutput
from lazyparams.transform.lazy_transform_params import LazyTransformParams
from lazyparams.transform.lift_transform_params import LiftTransformParams
from lazyparams.transform.pipeline import standard_pipeline
from lazyparams.transform.schedule_for_memory import ScheduleForMemory
from lazyparams.transform.to_non_dataflow import ToNonDataflow

__all__ = [
    "BundleModelParams",
    "ChunkRows",
    "DeadCodeElimination",
    "FunctionPass",
    "FuseLayoutCast",
    "KillAfterLastUse",
    "LazyGetInput",
    "LazySetOutput",
    "LazyTransformParams",
    "LiftTransformParams",
    "Pass",
    "ScheduleForMemory",
    "Sequential",
    "ToNonDataflow",
    "standard_pipeline",
]
