"""The `T` namespace of the script syntax: `@T.prim_func` and `T.Buffer` for signatures.

Kernel bodies are never run; the parser reads `T.grid`, `T.block`, `T.axis.*` and the scalar
functions from the source. Imports `ir`, `tir` and the parser.
"""

from __future__ import annotations

import typing
from collections import abc

from lazyparams.ir.expr import BaseFunc
from lazyparams.ir.prim import PrimExpr, PrimVar, as_prim
from lazyparams.script.decorate import parse_standalone
from lazyparams.script.markers import ScriptFunction, Unchecked, in_class_body, lenient
from lazyparams.tir.nodes import Buffer as _Buffer

_Def = abc.Callable[..., typing.Any]


def prim_func(
    func: _Def | None = None, *, private: bool = False, s_tir: bool = False
) -> typing.Any:
    """`@T.prim_func`: a TIR function read from its source (a marker inside a module class);
    TVM 0.27's `s_tir=True` (schedulable TIR, which every PrimFunc here is) is accepted."""
    del private, s_tir

    def wrap(f: _Def) -> BaseFunc | ScriptFunction:
        return ScriptFunction("T.prim_func", f) if in_class_body(f) else parse_standalone(f)

    return wrap(func) if func is not None else wrap


def Buffer(
    shape: abc.Sequence[int | str | PrimExpr], dtype: str = "float32"
) -> _Buffer | Unchecked:
    """`T.Buffer((3, 16), "float32")` in a signature; the parser names it after the param."""
    return lenient(
        "T.Buffer",
        lambda: _Buffer(
            "buffer", tuple(PrimVar(d) if isinstance(d, str) else as_prim(d) for d in shape), dtype
        ),
    )


__all__ = ["Buffer", "prim_func"]
