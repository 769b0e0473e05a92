"""The registry of merge methods: one module per method in `targets.merge.methods`, each
declaring `METHOD`.

A `MergeMethod` says what a method is called, which parameters it takes (per model, such as
`weight`, or for the whole merge, such as `t`), with their defaults and ranges, whether it needs
a base model, and how it merges one tensor: `merge(inputs)` over symbolic tensors, so that the
compiler plans, chunks and runs it like any transform. Imports the frontend's tensor type.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor

Check = Callable[[Any], str | None]
"""A parameter value's problem, in words ("expected a number in [0, 1]"), else None."""


def number_in(low: float, high: float | None = None) -> Check:
    """A check of a number (not a bool) in [low, high] (no upper bound when `high` is None)."""
    span = f"[{low}, {high}]" if high is not None else f">= {low}"

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected a number {span}"
        if value < low or (high is not None and value > high):
            return f"expected a number {span}"
        return None

    return check


def is_bool(value: Any) -> str | None:
    """The check of a yes/no parameter."""
    return None if isinstance(value, bool) else "expected true or false"


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a method.

    `default` None means the parameter must be given; `per_model` says whether each model has
    its own value (given under the model's `parameters`, or for all under the top-level ones).
    """

    name: str
    check: Check
    default: Any = None
    per_model: bool = False
    summary: str = ""


@dataclass(frozen=True, slots=True)
class TensorMerge:
    """What a method merges for one output tensor.

    `models` are the tensors of the models (the base excluded where the method has one), in the
    compute dtype; `weights` etc. come as `per_model[name][i]` for model i and `values[name]`
    for the whole-merge parameters, resolved for this tensor (filters applied). `seed` is the
    random seed of the run mixed with the tensor's name, for methods that draw random masks.
    """

    name: str
    models: Sequence[Tensor]
    base: Tensor | None
    per_model: Mapping[str, Sequence[Any]]
    values: Mapping[str, Any]
    seed: int = 0


@dataclass(frozen=True, slots=True)
class MergeMethod:
    """One merge method (see the module docstring): a module's `METHOD`."""

    name: str
    summary: str
    """What it does, in one line, for help and the guide."""
    merge: Callable[[TensorMerge], Tensor]
    """The merged tensor (any float dtype: the caller casts it to the output dtype)."""
    parameters: tuple[Parameter, ...] = ()
    base: str = "none"
    """"required", "optional" or "none": whether the method reads `base_model`."""
    min_models: int = 1
    """The fewest models (the base excluded) it merges."""
    max_models: int | None = None
    layered: bool = False
    """Whether it stacks layer ranges (`slices`) instead of merging tensors alike."""
    aliases: tuple[str, ...] = field(default=())

    def parameter(self, name: str) -> Parameter | None:
        """The parameter called `name`, else None."""
        return next((p for p in self.parameters if p.name == name), None)


@cache
def _registry() -> dict[str, MergeMethod]:
    """Every method module of `methods`, found by listing the package: adding one is enough."""
    from lazyparams.targets.merge import methods

    found: dict[str, MergeMethod] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(methods.__path__)):
        declared = getattr(importlib.import_module(f"{methods.__name__}.{module}"), "METHOD", None)
        if isinstance(declared, MergeMethod):
            for name in (declared.name, *declared.aliases):
                found[name] = declared
    return found


def merge_methods() -> tuple[MergeMethod, ...]:
    """Every registered method, by name, each once."""
    return tuple(dict.fromkeys(m for _, m in sorted(_registry().items())))


def merge_method(name: str, where: str = "merge_method") -> MergeMethod:
    """The method called `name`; ConvertError listing the known ones when there is none."""
    found = _registry().get(name)
    if found is None:
        known = ", ".join(sorted(_registry()))
        raise ConvertError(f"{where}: unknown merge method {name!r}; expected one of {known}")
    return found
