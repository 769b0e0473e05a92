"""The standard pipeline: fuse layout chains, schedule for memory, make lazy, kill after last
use, as one Sequential.

Everything above the passes (the engine, the CLI, the benchmarks) compiles a transform module
with it, so the predicted peak of its output is the one the VM meters. Imports `ir` and the
other passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lazyparams.ir import Var
from lazyparams.transform.base import Sequential
from lazyparams.transform.fuse_layout_cast import FuseLayoutCast
from lazyparams.transform.kill_after_last_use import KillAfterLastUse
from lazyparams.transform.lazy_transform_params import LazyTransformParams
from lazyparams.transform.schedule_for_memory import ScheduleForMemory


def standard_pipeline(
    fget_item: str | None = "get_item",
    fset_item: str | None = "set_item",
    extra_get_item_params: Sequence[Var] | None = None,
    extra_set_item_params: Sequence[Var] | None = None,
    func_names: Sequence[str] | None = None,
    sizes: Mapping[str, int] | None = None,
    strict: bool = True,
) -> Sequential:
    """`FuseLayoutCast`, `ScheduleForMemory`, then `LazyTransformParams`, then
    `KillAfterLastUse`.

    0. fuse each concat / permute_dims / astype chain into one op that moves the bytes once;
    1. reorder each transform function for the lowest lazy peak, merging repeated reads and
       moving each load right before its first use (`sizes` weighs symbolic dims);
    2. load each weight at its first read, hand each output off as soon as it exists;
    3. free every other value right after its last use.
    The lazy arguments are those of `LazyTransformParams`, whose checked form (`strict`) is the
    default here: what the engine runs refuses a wrong weight and passes `well_formed`.
    `func_names` selects the functions for both rewriting steps (default: names ending with
    `transform_params`).
    """
    return Sequential(
        [
            FuseLayoutCast(func_names=func_names),
            ScheduleForMemory(sizes=sizes, func_names=func_names),
            LazyTransformParams(
                fget_item,
                fset_item,
                extra_get_item_params=extra_get_item_params,
                extra_set_item_params=extra_set_item_params,
                func_names=func_names,
                strict=strict,
            ),
            KillAfterLastUse(),
        ]
    )
