"""A model module as a conversion SPEC: the weight-only work of its model function, lifted.

A user with a model (a Relax function whose params after `num_input` are weights), not a
transform, passes the module as SPEC. LiftTransformParams moves the work that depends only on
weights into a transform (one shared `transform_params` when several public functions have
`num_input`); that transform becomes the traced function the engine plans and runs lazily.
Weights are read from the checkpoint by param name, checked against their declared shape and
dtype (symbolic dims bound by the checkpoint); outputs are named after the params the lifted
model function takes, so the output file holds exactly what the model is then called with.
Imports `ir`, `transform`, `io` and the errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from lazyparams.analysis.liveness import used_vars
from lazyparams.errors import ConvertError
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.ir import (
    BaseFunc,
    BindingBlock,
    ExprMutator,
    Function,
    GlobalVar,
    IRModule,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    struct_info_of,
)
from lazyparams.ir.fresh_vars import substitute_prim_vars
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar
from lazyparams.transform.to_non_dataflow import to_non_dataflow
from lazyparams.transform.util import prim_vars


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model module given as SPEC; `traced(source, name)` is its lifted transform."""

    module: IRModule
    name: str = "model"

    def traced(self, source: CheckpointSource, func_name: str) -> IRModule:
        """The traced form (one function `func_name` over every tensor of `source`)."""
        # the lifting passes load here, so that a recipe or a Python SPEC never pays for them
        from lazyparams.transform.lift_plan import SUFFIX
        from lazyparams.transform.lift_shared import SHARED_NAME, shared_candidates
        from lazyparams.transform.lift_transform_params import LiftTransformParams

        models = shared_candidates(self.module, True, "model SPEC")
        if not models:
            raise ConvertError(
                f"{self.name}: expected a public Relax function with a num_input attribute "
                "(its params after num_input are the weights), found none"
            )
        lifted = LiftTransformParams(shared_transform=len(models) > 1)(self.module)
        transform = lifted[SHARED_NAME if len(models) > 1 else models[0] + SUFFIX]
        original, model = self.module[models[0]], lifted[models[0]]
        assert isinstance(transform, Function) and isinstance(original, Function)
        assert isinstance(model, Function)
        first = len(original.params) - len(_tuple_fields(transform))
        outputs = tuple(p.name_hint for p in model.params[first:])
        _check_unique(self.name, outputs)
        func = _over_checkpoint(self.name, transform, original.params[first:], source)
        attrs = {"input_names": tuple(source.names()), "output_names": outputs}
        func = Function(func.params, func.body, func.ret_struct_info, True, attrs)
        skip = {*models, SHARED_NAME, *(m + SUFFIX for m in models)}
        return IRModule({**_helpers(lifted, skip), func_name: func})


def _tuple_fields(transform: Function) -> tuple[object, ...]:
    sinfo = transform.params[0].struct_info
    assert isinstance(sinfo, TupleStructInfo)
    return sinfo.fields


def _check_unique(name: str, outputs: tuple[str, ...]) -> None:
    seen: set[str] = set()
    for output in outputs:
        if output in seen:
            raise ConvertError(
                f"{name}: two transformed weights would both be named {output!r}; expected the "
                "model's bindings and weights to have distinct names"
            )
        seen.add(output)


def _over_checkpoint(
    name: str, transform: Function, weights: tuple[Var, ...], source: CheckpointSource
) -> Function:
    """`transform` reading its weights from a tuple of every checkpoint tensor, dims bound."""
    names = list(source.names())
    index = {n: i for i, n in enumerate(names)}
    dims: dict[PrimVar, PrimExpr] = {}
    slots = [_bind_weight(name, w, index, source, dims) for w in weights]
    infos = [source.info(n) for n in names]
    params = Var("params", TupleStructInfo(tuple(_sinfo(i) for i in infos)))
    bound = substitute_prim_vars(_with_loads(transform, weights), _dims_by_name(transform, dims))
    rewritten = _Reader(bound.params[0], params, slots).visit_expr(bound.body)
    assert isinstance(rewritten, SeqExpr)
    if bound.params[0] in used_vars(rewritten):
        raise ConvertError(
            f"{name}: the lifted transform uses its weight tuple other than by index; expected "
            "each weight read as weights[i]"
        )
    func = Function((params,), rewritten, struct_info_of(rewritten.body), True, {})
    return to_non_dataflow(func)


def _with_loads(transform: Function, weights: tuple[Var, ...]) -> Function:
    """`transform` with each weight it passes through read by index and bound (a transform
    returning its weight tuple as it is, or an empty tuple, has no bindings to rewrite)."""
    param = transform.params[0]
    if transform.body.blocks or not (
        transform.body.body is param or isinstance(transform.body.body, Tuple)
    ):
        return transform
    loads = [
        VarBinding(Var(w.name_hint, w.struct_info), TupleGetItem(param, i))
        for i, w in enumerate(weights)
    ]
    fields = tuple(b.var for b in loads) if transform.body.body is param else ()
    ret = TupleStructInfo(tuple(struct_info_of(f) for f in fields))
    result = Var("gv", ret)
    block = BindingBlock((*loads, VarBinding(result, Tuple(fields))))
    return Function(transform.params, SeqExpr((block,), result), ret, True, transform.attrs)


def _bind_weight(
    name: str,
    weight: Var,
    index: dict[str, int],
    source: CheckpointSource,
    dims: dict[PrimVar, PrimExpr],
) -> int:
    """The checkpoint index of `weight`, checked for dtype and shape; binds its symbolic dims."""
    if weight.name_hint not in index:
        raise ConvertError(
            f"{name}: weight {weight.name_hint!r} is not in the checkpoint; expected a tensor "
            "of that name (weights are read by the model function's param names)"
        )
    info = source.info(weight.name_hint)
    sinfo = weight.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise ConvertError(f"{name}: weight {weight.name_hint!r}: expected a tensor of known rank")
    if sinfo.dtype != info.dtype or len(sinfo.shape) != len(info.shape):
        raise _mismatch(name, weight, sinfo, info)
    for dim, size in zip(sinfo.shape, info.shape, strict=True):
        if isinstance(dim, PrimVar) and dims.setdefault(dim, IntImm(size)) == IntImm(size):
            continue
        if not (isinstance(dim, IntImm) and dim.value == size):
            raise _mismatch(name, weight, sinfo, info)
    return index[weight.name_hint]


def _mismatch(name: str, weight: Var, sinfo: TensorStructInfo, info: TensorInfo) -> ConvertError:
    return ConvertError(
        f"{name}: weight {weight.name_hint!r}: the model declares {sinfo}, the checkpoint holds "
        f"{list(info.shape)} {info.dtype}"
    )


def _dims_by_name(transform: Function, dims: dict[PrimVar, PrimExpr]) -> dict[PrimVar, PrimExpr]:
    """The transform's own symbolic vars (fresh ones, named as the model's) bound by name."""
    by_name = {var.name: value for var, value in dims.items()}
    own = prim_vars(transform.params[0].struct_info)
    return {var: by_name[var.name] for var in own if var.name in by_name}


def _sinfo(info: TensorInfo) -> TensorStructInfo:
    return TensorStructInfo(tuple(IntImm(d) for d in info.shape), info.dtype)


class _Reader(ExprMutator):
    """Rewrites `weights[i]` of the transform's tuple param into `params[slot i]`."""

    def __init__(self, old: Var, new: Var, slots: list[int]) -> None:
        super().__init__()
        self.old, self.new, self.slots = old, new, slots

    def visit_tuple_getitem_(self, item: TupleGetItem) -> TupleGetItem:
        if item.tuple_value is self.old:
            return TupleGetItem(self.new, self.slots[item.index])
        result = super().visit_tuple_getitem_(item)
        assert isinstance(result, TupleGetItem)
        return result


def _helpers(mod: IRModule, skip: set[str]) -> dict[str | GlobalVar, BaseFunc]:
    """The functions the transform may call: everything but the model functions and transforms."""
    return {mod.get_global_var(n): f for n, f in mod.items() if n not in skip}
