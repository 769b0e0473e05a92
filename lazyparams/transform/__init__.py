"""Passes over IRModules, one module per pass; every pass maps a module to a new module.

Imports `ir`, `tir`, `op` and `analysis`, each pass's module on first use of its name, so that
planning a checkpoint loads only the passes it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazyparams.lazy_names import lazy_package

if TYPE_CHECKING:
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

_MODULE_OF: dict[str, str] = {
    "FunctionPass": "base",
    "Pass": "base",
    "Sequential": "base",
    "BundleModelParams": "bundle_model_params",
    "ChunkRows": "chunk_rows",
    "DeadCodeElimination": "dead_code_elimination",
    "FuseLayoutCast": "fuse_layout_cast",
    "KillAfterLastUse": "kill_after_last_use",
    "LazyGetInput": "lazy_get_input",
    "LazySetOutput": "lazy_set_output",
    "LazyTransformParams": "lazy_transform_params",
    "LiftTransformParams": "lift_transform_params",
    "standard_pipeline": "pipeline",
    "ScheduleForMemory": "schedule_for_memory",
    "ToNonDataflow": "to_non_dataflow",
}

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

__getattr__, __dir__ = lazy_package(__name__, _MODULE_OF)
