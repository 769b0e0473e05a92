"""The registry of merge methods: one module per method in `targets.merge.methods`, each
declaring `METHOD`.

A `MergeMethod` says what a method is called, which parameters it takes (`Parameter`: a number
or a flag, for the whole merge or for each model, with its default), which inputs it accepts
(whether it reads a base model, how many others) and how it merges one tensor: `merge(inputs)`
over symbolic tensors, so that the compiler plans, chunks and runs it like any transform. The
names, defaults and input rules follow mergekit's documented methods. Imports the frontend's
tensor type.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Protocol

from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
"""The default of a parameter that has none: a value must be given."""

TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
FALSE_WORDS = frozenset({"0", "off", "f", "false", "n", "no"})
"""Words a flag may be written as (besides YAML's own booleans), as mergekit reads them."""

Scope = Literal["shared", "input", "non_base"]
"""Where a parameter's value lives: one for the whole merge ("shared"), one per input model
("input", the base included) or one per model other than the base ("non_base")."""


def as_number(value: Any) -> float:
    """`value` as a finite float: a number, or text that reads as one (YAML reads `1e-3` as
    text); ValueError saying what was expected otherwise. A flag is not a number here."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("expected a number")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("expected a number") from None
    if not math.isfinite(number):
        raise ValueError("expected a finite number")
    return number


def as_flag(value: Any) -> bool:
    """`value` as a flag: true or false, 0 or 1, or one of the words yes/no, on/off, ..."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    word = value.strip().lower() if isinstance(value, str) else None
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError("expected true or false")


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a method: a number or a flag, `default` REQUIRED where a value must be
    given (None: an optional number left unset), and its scope (see `Scope`)."""

    name: str
    kind: Literal["number", "flag"]
    default: Any = REQUIRED
    scope: Scope = "shared"
    summary: str = ""

    @property
    def per_model(self) -> bool:
        """Whether each model has its own value."""
        return self.scope != "shared"

    def parse(self, value: Any) -> Any:
        """`value` converted to the parameter's kind; ValueError saying what was expected."""
        return as_number(value) if self.kind == "number" else as_flag(value)


class Draws(Protocol):
    """A stream of random numbers shared by the tensors of a merge, in a fixed order."""

    def uniform(self, shape: tuple[int, ...]) -> Tensor:
        """The stream's next uniforms in [0, 1), float32, as a tensor of `shape`."""
        ...


@dataclass(frozen=True, slots=True)
class TensorMerge:
    """What a method merges for one output tensor.

    `models` are the inputs other than the base (all inputs where the method ignores the base),
    in the configuration's order and the compute dtype; `per_model[name][i]` is model i's value
    of a per-model parameter and `values[name]` a whole-merge one, resolved for this tensor
    (filters and gradients applied). `draws` is the merge's random stream.
    """

    name: str
    models: Sequence[Tensor]
    base: Tensor | None
    per_model: Mapping[str, Sequence[Any]]
    values: Mapping[str, Any]
    draws: Draws | None = None


ModelCheck = Callable[[Mapping[str, Any]], str | None]
"""A problem with one model's values of the per-model parameters, in words, else None."""


@dataclass(frozen=True, slots=True)
class MergeMethod:
    """One merge method (see the module docstring): a module's `METHOD`.

    `base` is "required" (the base must be among the inputs), "optional" (used where given) or
    "ignored" (a base_model given is merged as one more input). The counts bound the inputs,
    the base included (`min_inputs`, `max_inputs`), and the others (`min_others`, `max_others`).
    """

    name: str
    summary: str
    """What it does, in one line, for help and the guide."""
    merge: Callable[[TensorMerge], Tensor]
    """The merged tensor (any float dtype: the caller casts it to the output dtype)."""
    parameters: tuple[Parameter, ...] = ()
    base: Literal["required", "optional", "ignored"] = "ignored"
    min_inputs: int = 1
    max_inputs: int | None = None
    min_others: int = 0
    max_others: int | None = None
    check_model: ModelCheck | None = None
    """Checks each model's per-model values together (DELLA: density and epsilon)."""
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
