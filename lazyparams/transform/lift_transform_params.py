"""LiftTransformParams: move the work that depends only on weights out of a model function into
a transform that runs once; the model function takes its results instead.

Each function with `num_input` gets its own `<name>_transform_params` (see `lift_plan` for what
moves), or, with `shared_transform`, every selected function shares one `transform_params`
holding the work they all do alike (see `lift_shared`). A function with nothing to lift still
gets its transform (passing the weights it reads through), so a caller may always run one; once
it has one, a function with nothing more to lift is left as it is, so the pass is idempotent,
and more to lift is composed after the existing transform. Both functions come out as TVM's
pass leaves them: tuple items of known tuples folded, var-to-var bindings gone
(`lift_canonical`). Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.errors import TransformError
from lazyparams.ir import IRModule
from lazyparams.transform.base import Pass
from lazyparams.transform.lift_plan import SUFFIX, finished, plan_lift, relax_function
from lazyparams.transform.lift_shared import SHARED_NAME, lift_shared, shared_candidates
from lazyparams.transform.util import num_input


class LiftTransformParams(Pass):
    """Split functions with `num_input` into their weight-only transform and the rest.

    `shared_transform=False` (the default) gives each function its own transform;
    `shared_transform=True` one `transform_params` for every public function with `num_input`,
    and a list of names one for those functions only (the others are left alone).
    `consume_params=True` (TVM's `relax.lift_transform_params.consume_params`) makes the
    transform reset each slot of its `params` tuple after loading it, so that a weight is freed
    after its last use rather than when the whole tuple dies.
    """

    def __init__(
        self, shared_transform: bool | Sequence[str] = False, consume_params: bool = False
    ) -> None:
        self.shared_transform = _shared_arg(shared_transform)
        if not isinstance(consume_params, bool):
            raise TransformError(
                f"LiftTransformParams: expected consume_params to be a bool, got {consume_params!r}"
            )
        self.consume_params = consume_params

    def transform_module(self, mod: IRModule) -> IRModule:
        if self.shared_transform is False:
            return self._lift_each(mod)
        names = shared_candidates(mod, self.shared_transform, self.name)
        return lift_shared(mod, names, self.name, self.consume_params)

    def _lift_each(self, mod: IRModule) -> IRModule:
        result = mod
        for name, func in mod.relax_functions():
            if "num_input" not in func.attrs or name.endswith(SUFFIX) or name == SHARED_NAME:
                continue
            plan = plan_lift(func, num_input(func, name, self.name))
            existing = (
                relax_function(mod, name + SUFFIX, self.name) if name + SUFFIX in mod else None
            )
            if existing is not None and not plan.lifted and not plan.barriers:
                continue
            transform, model = finished(func, plan, existing, self.consume_params)
            result = result.with_function(name + SUFFIX, transform)
            result = result.with_function(name, model)
        return result

    def __repr__(self) -> str:
        return (
            f"{self.name}(shared_transform={self.shared_transform!r}, "
            f"consume_params={self.consume_params!r})"
        )


def _shared_arg(value: object) -> bool | tuple[str, ...]:
    """The `shared_transform` option: a bool, or a non-empty sequence of function names."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str):
        names = tuple(value)
        if names and all(isinstance(n, str) for n in names):
            return names
    raise TransformError(
        "LiftTransformParams: expected shared_transform to be a bool or a non-empty list of "
        f"function names, got {value!r}"
    )
