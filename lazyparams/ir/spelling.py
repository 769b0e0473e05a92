"""The spellings the printer writes: the seed's (lazyparams' own) and TVM 0.27's.

A `Spelling` names what differs between them: the header comment, the PrimFunc decorator, the
block statement, the opaque object's struct info, the keywords of a call's struct info,
whether empty `T.reads()` / `T.writes()` are written; and, for messages, where a dtype goes.
Imports only the error types.
"""

from __future__ import annotations

from dataclasses import dataclass

from lazyparams.errors import LazyParamsError


@dataclass(frozen=True, slots=True)
class Spelling:
    """One flavour of the printed script (see the module docstring); the defaults are the
    seed's."""

    header: str = "# from lazyparams.script import ir as I, relax as R, tir as T"
    prim_func: str = "@T.prim_func"
    block: str = "T.block"
    object: str = "R.Object"
    sinfo_args: str = "sinfo_args"
    out_sinfo: str = "out_sinfo"
    empty_regions: bool = True
    tir_vars: bool = True
    """Whether `R.call_tir` has `tir_vars=` (TVM 0.27 passes ints among the operands)."""
    buffer_handles: bool = False
    """Whether a PrimFunc buffer of symbolic shape is a `T.handle` param and a `T.match_buffer`
    (TVM 0.27 reads a quoted dim of `T.Buffer` as an int32 var, unlike the declared int64)."""
    prim_params: bool = False
    """Whether a prim value is written as its dtype (`T.int64`), a param of `R.Prim(value=n)`
    as `n: T.int64` defining `n` (TVM 0.27's `R.Prim` takes no value)."""
    dtype_keyword: bool = True
    """Whether a tensor's dtype is written `dtype="float32"` after a known shape, or positionally
    (as messages write it, and as users mostly do)."""


SEED = Spelling()

TVM = Spelling(
    header="# from tvm.script import ir as I, relax as R, tirx as T",
    prim_func="@T.prim_func(s_tir=True)",
    block="T.sblock",
    object="R.Any",
    sinfo_args="ty_args",
    out_sinfo="out_ty",
    empty_regions=False,
    tir_vars=False,
    buffer_handles=True,
    prim_params=True,
)

MESSAGE = Spelling(dtype_keyword=False)
"""How error messages spell expressions and struct info (not a flavour: text, not a module)."""

FLAVORS = {"lazyparams": SEED, "tvm": TVM}
"""`IRModule.script(flavor=...)`: the seed's spelling (the default) or TVM 0.27's."""


def spelling_of(flavor: str) -> Spelling:
    """The spelling a flavour name selects; an unknown name is an error naming the choices."""
    if flavor not in FLAVORS:
        raise LazyParamsError(
            f"script: expected flavor {' or '.join(map(repr, FLAVORS))}, got {flavor!r}"
        )
    return FLAVORS[flavor]
