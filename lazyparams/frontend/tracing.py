"""`trace(fn, inputs)`: run a Python transform over symbolic tensors and build its IRModule.

The result holds one Relax function taking every input as one tuple param: a block of
`w = params[i]` bindings for the inputs the function used, in input order, then the traced
operations in the order they ran (a plain binding block, so numpy kernels' impure calls are
allowed), then the output tuple. Imports `ir`, `tir` and the frontend's own modules.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from lazyparams.frontend.location import SourceLocation, trace_error
from lazyparams.frontend.params import Params, input_specs
from lazyparams.frontend.tensor import Tensor
from lazyparams.frontend.tracer import Tracer
from lazyparams.frontend.values import BadValue, constant_array
from lazyparams.ir.expr import (
    BaseFunc,
    BindingBlock,
    Constant,
    Expr,
    Function,
    GlobalVar,
    SeqExpr,
    Tuple,
)
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.module import IRModule
from lazyparams.ir.struct_info import TupleStructInfo

TransformFn = Callable[[Mapping[str, Tensor]], Mapping[str, Any]]


def trace(fn: TransformFn, inputs: Any, *, name: str = "transform_params") -> IRModule:
    """Trace `fn(params) -> {output name: tensor}` into a module with one function `name`.

    `inputs` maps input names to `(shape, dtype)` or is a checkpoint source. Outputs may be
    traced tensors (inputs passed through included) or numpy arrays (kept as constants). The
    function's attrs record `input_names` and `output_names`; numpy kernels it called are
    recorded in the module attrs under `numpy_kernels`.
    """
    if not callable(fn):
        raise trace_error("trace", f"expected a function of params, got {type(fn).__name__}")
    with collection_paused():
        tracer = Tracer(input_specs(inputs), name)
        with tracer.running_scope():
            result = fn(Params(tracer))
            names, fields = _outputs(tracer, result, _definition(fn))
            out_var = tracer.emit(Tuple(fields), "gv", "return")
        return _module(tracer, names, out_var)


_promote = [False]


def promote_after_tracing(on: bool) -> None:
    """Whether `collection_paused` moves what was built to the oldest generation on leaving
    (`on`: the command line, which owns its process), or leaves the collector's generations
    as they were (a library call)."""
    _promote[0] = on


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while IR is built (its state restored on leaving,
    nested uses included).

    Tracing and planning a large model allocate millions of long-lived, acyclic nodes; each
    allocation burst would trigger a collection scanning all of them again (a quarter of a
    671B plan's time). Reference counting still frees everything at once. Where the process
    opted in (`promote_after_tracing`) and froze nothing itself, what was made joins the
    oldest generation unscanned on leaving (`freeze` then `unfreeze`), as if it had survived
    the collections skipped, so the first allocation after does not scan it all.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if _promote[0] and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def _definition(fn: Callable[..., Any]) -> SourceLocation | None:
    """Where `fn` is defined: output errors are reported there, as the return has no frame."""
    try:
        file, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return None
    return SourceLocation(file or "<unknown>", line, "") if file else None


def _outputs(
    tracer: Tracer, result: object, where: SourceLocation | None
) -> tuple[tuple[str, ...], tuple[Expr, ...]]:
    if not isinstance(result, Mapping) or not result:
        raise trace_error(
            "return",
            f"expected a non-empty mapping of output name -> tensor, got {result!r:.60}",
            where,
        )
    names: list[str] = []
    fields: list[Expr] = []
    for key, value in result.items():
        if not isinstance(key, str):
            raise trace_error("return", f"expected output names as str, got {key!r}", where)
        names.append(key)
        fields.append(_output_field(tracer, key, value, where))
    return tuple(names), tuple(fields)


def _output_field(tracer: Tracer, key: str, value: object, where: SourceLocation | None) -> Expr:
    if isinstance(value, Tensor):
        if value.tracer is not tracer:
            raise trace_error("return", f"output {key!r}: expected a tensor of this trace", where)
        return value.var
    try:
        return Constant(constant_array(value))
    except BadValue as err:
        reason = (
            f"output {key!r}: expected a traced tensor or a numpy array, got {type(value).__name__}"
        )
        raise trace_error("return", reason, where) from err


def _module(tracer: Tracer, names: tuple[str, ...], out_var: Any) -> IRModule:
    inputs = tuple(tracer.input_bindings[i] for i in sorted(tracer.input_bindings))
    emitted = tuple(b for block in tracer.bb.take_blocks() for b in block.bindings)
    body = SeqExpr((BindingBlock(inputs + emitted),), out_var)
    attrs = {
        "input_names": tuple(spec.name for spec in tracer.specs),
        "output_names": names,
    }
    ret = struct_info_of(out_var)
    assert isinstance(ret, TupleStructInfo)
    func = Function((tracer.params_var,), body, ret, tracer.is_pure, attrs)
    functions: dict[str | GlobalVar, BaseFunc] = {tracer.func_name: func}
    for gvar, prim_func in tracer.prim_funcs.items():
        functions[gvar] = prim_func
    module_attrs = {"numpy_kernels": dict(tracer.numpy_kernels)} if tracer.numpy_kernels else {}
    return IRModule(functions, module_attrs)
