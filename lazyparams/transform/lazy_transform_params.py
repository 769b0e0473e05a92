"""LazyTransformParams: load each weight on demand, hand each output off at once, and free each
loaded weight right after its last use.

Applied to every function whose name ends with `transform_params` (or to the functions named).
Steps:
1. find the weights (params after `num_input`: one tuple param or one param per weight);
2. replace every weight read by one `get_item(i)` at its first read, and hand every output
   index to `set_item(i, value)` right after its value exists (see `lazy_rewrite`);
3. kill every loaded weight after its last use, hand-offs included;
4. drop the weight params; extra params and runtime inputs stay in front;
5. in the strict form, mark the function impure and drop its dataflow blocks once it holds an
   impure call (the seed's form keeps both). Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from lazyparams.errors import TransformError
from lazyparams.ir import (
    Call,
    DataflowVar,
    ExternFunc,
    Function,
    IRModule,
    MatchCast,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TupleStructInfo,
    Var,
    is_pure_call,
)
from lazyparams.transform.base import Pass
from lazyparams.transform.kill_plan import insert_kills, plan_kills
from lazyparams.transform.lazy_inputs import weight_inputs
from lazyparams.transform.lazy_rewrite import CallStyle, LazyStyle, rewrite_lazy
from lazyparams.transform.lift_plan import without_resets
from lazyparams.transform.to_non_dataflow import to_non_dataflow
from lazyparams.transform.util import func_names_arg, num_input, prim_vars, select_functions


class LazyTransformParams(Pass):
    """Turn transform functions into their lazy form (see the module docstring).

    `fget_item` / `fset_item` name the load and hand-off externs; `None` keeps the weights as
    params (no loads) or returns the outputs (no hand-offs). `extra_get_item_params` and
    `extra_set_item_params` become params of the function and are passed to the externs
    before the index. `func_names` selects the functions instead of the name suffix.

    `strict` picks the form. The default, `strict=False`, is the seed's form, because the seed's
    test calls `LazyTransformParams()` and expects it verbatim: a load feeding only `call_tir`,
    an extern or a hand-off stays an `R.Object`, and the function stays pure with its loads and
    hand-offs inside its dataflow blocks (`well_formed` then needs `check_purity=False`).
    `strict=True` is the checked form the engine compiles with: every load is `match_cast` to
    the struct info declared for its weight, so the VM refuses a wrong weight naming its index
    and the expected and actual shape and dtype, and a function that gets an impure call is
    marked impure and loses its dataflow blocks, so `well_formed` passes with its defaults.
    """

    def __init__(
        self,
        fget_item: str | None = "get_item",
        fset_item: str | None = "set_item",
        extra_get_item_params: Sequence[Var] | None = None,
        extra_set_item_params: Sequence[Var] | None = None,
        func_names: Sequence[str] | None = None,
        strict: bool = False,
    ) -> None:
        self.strict = _flag("strict", strict)
        self.fget_item = _extern_name("fget_item", fget_item)
        self.fset_item = _extern_name("fset_item", fset_item)
        if fget_item is None and fset_item is None:
            raise TransformError(
                "LazyTransformParams: expected fget_item or fset_item to name an extern, got None "
                "for both"
            )
        self.extra_get = _extra_params("extra_get_item_params", extra_get_item_params)
        self.extra_set = _extra_params("extra_set_item_params", extra_set_item_params)
        self.func_names = func_names_arg(func_names, self.name)

    def transform_module(self, mod: IRModule) -> IRModule:
        result = mod
        for position, name in enumerate(select_functions(mod, self.func_names, self.name)):
            func = mod[name]
            assert isinstance(func, Function)
            func, _ = without_resets(func)  # the lazy form frees each load after its last use
            # a var is a param of one function only: later functions get copies of the extras
            copies = {
                v: v if position == 0 else Var(v.name_hint, v.struct_info) for v in self._extras()
            }
            result = result.with_function(name, self._transform(name, func, copies))
        return result

    def _extras(self) -> list[Var]:
        return list(dict.fromkeys((*self.extra_get, *self.extra_set)))

    def _transform(self, name: str, func: Function, extras: dict[Var, Var]) -> Function:
        context = f"{self.name}: function {name!r}"
        for var in extras:
            if var in func.params:
                raise TransformError(
                    f"{context}: expected extra params that are not already params, got "
                    f"{var.name_hint!r}"
                )
        first = num_input(func, name, self.name)
        lazy_weights = self.fget_item is not None
        inputs = weight_inputs(func, first if lazy_weights else len(func.params))
        kept = func.params[:first] + tuple(extras.values())
        holders = symbolic_var_holders(func, inputs.sinfos) if lazy_weights else ()
        params = kept + holders if lazy_weights else kept + func.params[first:]
        lazy = rewrite_lazy(func, inputs, self._style(extras), params, context)
        attrs = dict(func.attrs)
        if "num_input" in attrs or extras:
            attrs["num_input"] = len(kept)
        new_func = Function(params, lazy.body, lazy.ret_struct_info, func.is_pure, attrs)
        # the seed frees a loaded weight even after handing it off: the sink has its own reference
        handoff = () if self.fset_item is None else (self.fset_item,)
        plan = plan_kills(new_func, lazy.loads, handoff, escape=False)
        killed = insert_kills(new_func, plan, handoff)
        return honest_purity(killed) if self.strict else killed

    def _style(self, extras: dict[Var, Var]) -> LazyStyle:
        load = store = None
        if self.fget_item is not None:
            load = CallStyle(ExternFunc(self.fget_item), tuple(extras[v] for v in self.extra_get))
        if self.fset_item is not None:
            store = CallStyle(ExternFunc(self.fset_item), tuple(extras[v] for v in self.extra_set))
        return LazyStyle(load, store, return_handles=True, check_loads=self.strict)


def symbolic_var_holders(func: Function, sinfos: Sequence[StructInfo]) -> tuple[Var, ...]:
    """TVM's rule: when `func` defines symbolic vars, every `R.Shape` / `R.Prim` weight (tuple
    fields flattened) stays a param, `symbolic_var_holder`, after the kept ones, so the caller
    passes the vars; the weights' dims it defines then need no load."""
    defined = prim_vars([p.struct_info for p in func.params])
    defined += [
        d for b in func.bindings() if isinstance(b, MatchCast) for d in prim_vars(b.struct_info)
    ]
    if not defined:
        return ()
    return tuple(
        Var("symbolic_var_holder", s)
        for s in _leaves(sinfos)
        if isinstance(s, ShapeStructInfo | PrimStructInfo)
    )


def _leaves(sinfos: Sequence[StructInfo]) -> Iterator[StructInfo]:
    for sinfo in sinfos:
        if isinstance(sinfo, TupleStructInfo):
            yield from _leaves(sinfo.fields)
        else:
            yield sinfo


def honest_purity(func: Function) -> Function:
    """`func` marked impure and without dataflow blocks when it calls anything impure;
    itself otherwise. `relax.force_pure` goes: it claims a purity the function no longer has
    (TVM's well_formed refuses it on an impure function)."""
    if not any(isinstance(b.value, Call) and not is_pure_call(b.value) for b in func.bindings()):
        return func
    attrs = {k: v for k, v in func.attrs.items() if k != FORCE_PURE}
    impure = Function(func.params, func.body, func.ret_struct_info, False, attrs)
    return to_non_dataflow(impure)


FORCE_PURE = "relax.force_pure"
"""The attr that declares a function pure whatever it calls."""


def _flag(what: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise TransformError(f"LazyTransformParams: expected {what} to be True or False, got {value!r}")


def _extern_name(what: str, value: object) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return value
    raise TransformError(
        f"LazyTransformParams: expected {what} to be an extern name or None, got {value!r}"
    )


def _extra_params(what: str, params: Sequence[Var] | None) -> tuple[Var, ...]:
    if params is None:
        return ()
    if isinstance(params, Var) or not isinstance(params, Sequence):
        raise TransformError(
            f"LazyTransformParams: expected {what} to be a list of Vars, got {params!r}"
        )
    for item in params:
        if not isinstance(item, Var) or isinstance(item, DataflowVar):
            raise TransformError(
                f"LazyTransformParams: expected {what} to hold lazyparams.ir.Var, got {item!r}"
            )
    return tuple(params)
