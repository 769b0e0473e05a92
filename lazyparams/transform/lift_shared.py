"""One `transform_params` shared by several model functions (LiftTransformParams'
`shared_transform`).

The functions must take the same weights (count, shapes, dtypes). A lifted value is shared when
every function computes it alike: each binding's value, with weights named by position and the
values it reads named by their own class, is hash-consed into a class; a class that every
function lifts moves into the shared transform, and each function reads it as a param. What a
function lifts alone stays in it, so all of them run on the same transformed weights. The
shared transform follows the first function by name (its binding order decides the order of
the outputs). Imports `ir` and the lifting mechanics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lazyparams.analysis.liveness import used_vars
from lazyparams.errors import TransformError
from lazyparams.ir import (
    Expr,
    ExprMutator,
    Function,
    IRModule,
    Var,
    struct_info_of,
    structural_equal,
)
from lazyparams.ir.describe import describe
from lazyparams.ir.structural import structural_hash
from lazyparams.transform.lift_plan import (
    SUFFIX,
    LiftPlan,
    finished,
    finished_model,
    model_reads,
    plan_lift,
    propagated_dims,
    relax_function,
)
from lazyparams.transform.util import num_input

SHARED_NAME = "transform_params"

Token = tuple[str, int]
"""A value as the shared transform knows it: ("weight", index) or ("class", class id)."""


def shared_candidates(mod: IRModule, option: bool | tuple[str, ...], pass_name: str) -> list[str]:
    """The functions sharing the transform, in name order: every public one with `num_input`
    for `True`, else the named ones (each must be a Relax function with `num_input`)."""
    if option is False:
        return []
    if option is True:
        return sorted(
            name
            for name, func in mod.relax_functions()
            if "num_input" in func.attrs and func.is_public and not _is_transform(name)
        )
    for name in option:
        func = mod[name] if name in mod else None  # noqa: SIM401 (no IRModule.get)
        if not isinstance(func, Function) or "num_input" not in func.attrs:
            raise TransformError(
                f"{pass_name}: shared_transform names {name!r}; expected a Relax function with "
                "a num_input attribute"
            )
    return sorted(set(option))


def lift_shared(
    mod: IRModule, names: list[str], pass_name: str, consume_params: bool = False
) -> IRModule:
    """`mod` with one `transform_params` for the functions `names` and each rebuilt on it."""
    if not names:
        return mod
    funcs = [relax_function(mod, name, pass_name) for name in names]
    plans = [plan_lift(f, num_input(f, n, pass_name)) for n, f in zip(names, funcs, strict=True)]
    _check_same_weights(names, plans, pass_name)
    classes = _Classes()
    per_func = [classes.classify(f, p) for f, p in zip(funcs, plans, strict=True)]
    shared = classes.shared(per_func, plans)
    for plan, class_of in zip(plans, per_func, strict=True):
        _restrict(plan, class_of, shared)
    existing = relax_function(mod, SHARED_NAME, pass_name) if SHARED_NAME in mod else None
    if existing is not None and not any(p.lifted or p.barriers for p in plans):
        return mod
    tokens = _output_tokens(funcs, plans, per_func)
    for name, func, plan, class_of in zip(names, funcs, plans, per_func, strict=True):
        plan.outputs = _outputs_of(plan, class_of, tokens)
        _refuse_propagated(name, func, plan, pass_name)
    transform, _ = finished(funcs[0], plans[0], existing, consume_params)
    result = mod.with_function(SHARED_NAME, transform)
    for name, func, plan in zip(names, funcs, plans, strict=True):
        result = result.with_function(name, finished_model(func, plan))
    return result


@dataclass(slots=True)
class _Classes:
    """Hash-consed forms of lifted values across functions, one class id per distinct form."""

    buckets: dict[tuple[int, tuple[int, ...]], list[tuple[Expr, int]]] = field(default_factory=dict)
    slots: list[Var] = field(default_factory=list)
    weight_slots: list[Var] = field(default_factory=list)

    def classify(self, func: Function, plan: LiftPlan) -> dict[Var, int]:
        """The class of each lifted or weight-free binding of `func`."""
        while len(self.weight_slots) < len(plan.weights):
            weight = plan.weights[len(self.weight_slots)]
            self.weight_slots.append(Var(f"weight{len(self.weight_slots)}", weight.struct_info))
        mutator = ExprMutator()
        mutator.var_remap.update(zip(plan.weights, self.weight_slots, strict=False))
        class_of: dict[Var, int] = {}
        for binding in func.bindings():
            if binding.var in plan.lifted or binding.var in plan.weight_free:
                class_id = self._intern(mutator.visit_expr(binding.value), binding.var)
                class_of[binding.var] = class_id
                mutator.var_remap[binding.var] = self.slots[class_id]
        return class_of

    def shared(self, per_func: list[dict[Var, int]], plans: list[LiftPlan]) -> set[int]:
        """The classes every function lifts."""
        lifted = [
            {c for v, c in m.items() if v in p.lifted} for m, p in zip(per_func, plans, strict=True)
        ]
        return set.intersection(*lifted)

    def _intern(self, form: Expr, var: Var) -> int:
        key = (structural_hash(form), tuple(id(v) for v in used_vars(form)))
        bucket = self.buckets.setdefault(key, [])
        for known, class_id in bucket:
            if structural_equal(known, form):
                return class_id
        class_id = len(self.slots)
        self.slots.append(Var(f"class{class_id}", var.struct_info))
        bucket.append((form, class_id))
        return class_id


def _restrict(plan: LiftPlan, class_of: dict[Var, int], shared: set[int]) -> None:
    """Keep only the shared lifted values in `plan`, and the barriers over what it still lifts."""
    plan.lifted = {v for v in plan.lifted if class_of[v] in shared}
    kept = set(plan.weights) | plan.lifted
    plan.barriers = {b: operand for b, operand in plan.barriers.items() if operand in kept}


def _output_tokens(
    funcs: list[Function], plans: list[LiftPlan], per_func: list[dict[Var, int]]
) -> list[Token]:
    """What any function's remaining model reads: weights by index, then shared classes in the
    first function's binding order."""
    wanted: set[Token] = set()
    for func, plan, class_of in zip(funcs, plans, per_func, strict=True):
        plan.outputs = model_reads(func, plan)
        wanted.update(_token(v, plan, class_of) for v in plan.outputs)
    first, first_classes = plans[0], per_func[0]
    order: list[Token] = [("weight", i) for i in range(len(first.weights))]
    order += [("class", first_classes[b.var]) for b in funcs[0].bindings() if b.var in first.lifted]
    return [t for t in dict.fromkeys(order) if t in wanted]


def _outputs_of(plan: LiftPlan, class_of: dict[Var, int], tokens: list[Token]) -> list[Var]:
    """This function's vars for the shared outputs `tokens`."""
    by_class: dict[int, Var] = {}
    for var in plan.lifted:
        by_class.setdefault(class_of[var], var)
    return [plan.weights[i] if kind == "weight" else by_class[i] for kind, i in tokens]


def _token(var: Var, plan: LiftPlan, class_of: dict[Var, int]) -> Token:
    if var in plan.weights:
        return ("weight", plan.weights.index(var))
    return ("class", class_of[var])


def _check_same_weights(names: Sequence[str], plans: list[LiftPlan], pass_name: str) -> None:
    """Refuse functions whose weights differ in count, shape or dtype from the first one's,
    naming the function, the param and the expected and actual struct info."""
    first = plans[0].weights
    for name, plan in zip(names[1:], plans[1:], strict=True):
        if len(plan.weights) != len(first):
            raise TransformError(
                f"{pass_name}: shared_transform: function {name!r} takes {len(plan.weights)} "
                f"weights ({_names(plan.weights)}) and {names[0]!r} takes {len(first)} "
                f"({_names(first)}); expected the same weights in every function sharing a "
                "transform"
            )
        for index, (weight, model) in enumerate(zip(plan.weights, first, strict=True)):
            if not structural_equal(weight.struct_info, model.struct_info, map_free_vars=True):
                raise TransformError(
                    f"{pass_name}: shared_transform: weight {index} ({weight.name_hint}) of "
                    f"function {name!r} is {describe(struct_info_of(weight))}; expected "
                    f"{describe(struct_info_of(model))}, as {names[0]!r} takes it "
                    f"({model.name_hint}): the same shape and dtype in every function"
                )


def _names(weights: Sequence[Var]) -> str:
    return ", ".join(w.name_hint for w in weights) or "none"


def _refuse_propagated(name: str, func: Function, plan: LiftPlan, pass_name: str) -> None:
    """A model needing a dim only the weights define cannot share: each function would take
    that dim from its own weights, and the shared transform returns one set of outputs."""
    plan.propagated = propagated_dims(func, plan)
    if plan.propagated:
        dims = ", ".join(v.name for v in plan.propagated)
        raise TransformError(
            f"{pass_name}: shared_transform: function {name!r} needs the symbolic dims {dims} "
            "at run time and only its weights define them; expected them defined by its "
            "runtime inputs, or a transform of its own (shared_transform=False)"
        )


def _is_transform(name: str) -> bool:
    return name == SHARED_NAME or name.endswith(SUFFIX)
