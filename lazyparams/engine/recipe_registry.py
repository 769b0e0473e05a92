"""The registry of recipes, one `RecipeEntry` each, and the recipe expressions made from them.

An expression joins recipes with `+` (`fuse-qkv+cast:float16`), each written `NAME[:ARGUMENT]`;
every step sees the `Weights` the step before it left. A target recipe (`gguf`) lays a whole
model out for a runtime and stands alone. The engine, the CLI's help and the cluster all read
this table. Imports the errors and the frontend's tensor type only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor

Recipe = Callable[[Mapping[str, Tensor]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Weights:
    """What flows between composed recipes: the tensors, and which are stored (in, out)."""

    tensors: dict[str, Any]
    in_out: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RecipeEntry:
    """One recipe: its name, what it does in one line, and how it runs.

    `step(weights)` or, for a recipe taking an argument, `step(weights, value)` returns the
    new `Weights`; `value` is `argument(text)` for `NAME:text` (a ValueError saying what was
    expected refuses it), else `default`. `usage` is how help spells it (`cast[:DTYPE]`).
    `output_format` is the format the recipe writes, None for whichever the destination names.
    A target recipe has `target(text or None)` instead of a step: it returns the `Target`
    (see engine.specs) that converts the whole model, and composes with no other recipe.
    """

    name: str
    summary: str
    step: Callable[..., Weights] | None = None
    argument: Callable[[str], Any] | None = None
    default: Any = None
    usage: str = ""
    output_format: str | None = None
    target: Callable[[str | None], Any] | None = None

    @property
    def spelled(self) -> str:
        """How help and messages spell the recipe."""
        return self.usage or self.name


RECIPES: dict[str, RecipeEntry] = {}
"""Every registered recipe by name, in the order help lists them (read it through `recipes`)."""


def recipes() -> dict[str, RecipeEntry]:
    """Every registered recipe, the built-in ones (engine.recipes) registered first."""
    import lazyparams.engine.recipes  # noqa: F401  (registers the built-in recipes on import)

    return RECIPES


def register_recipe(entry: RecipeEntry) -> RecipeEntry:
    """Add `entry` to the registry; a name taken, or neither or both of a step and a target,
    is refused."""
    if entry.name in RECIPES:
        raise ConvertError(f"recipe {entry.name!r} is registered twice")
    if (entry.step is None) == (entry.target is None):
        raise ConvertError(f"recipe {entry.name!r}: expected a step or a target, not both or none")
    RECIPES[entry.name] = entry
    return entry


def recipe(expression: str) -> Recipe:
    """The transform of a recipe expression such as `fuse-qkv+cast:bfloat16`."""
    steps = [_step(part.strip(), expression) for part in expression.split("+")]

    def composed(params: Mapping[str, Tensor]) -> dict[str, Any]:
        weights = Weights(dict(params))
        for step in steps:
            weights = step(weights)
        return weights.tensors

    composed.__name__ = expression
    composed.__qualname__ = expression
    return composed


def recipe_target(expression: str) -> Any:
    """The target an expression names (`gguf:q8_0`), None when it names none; a target
    joined with other recipes is refused."""
    parts = [part.strip().partition(":") for part in expression.split("+")]
    for name, _, argument in parts:
        entry = recipes().get(name)
        if entry is None or entry.target is None:
            continue
        if len(parts) > 1:
            raise ConvertError(
                f"recipe {name!r} ({entry.summary}) composes with nothing; got {expression!r}"
            )
        return entry.target(argument.strip() or None)
    return None


def recipe_help(columns: int = 100) -> str:
    """Each recipe's spelling and what it does, wrapped at `columns`, for `--help`."""
    import textwrap

    entries = recipes().values()
    width = max(len(entry.spelled) for entry in entries) + 4
    return "\n".join(
        textwrap.fill(
            e.summary,
            columns,
            initial_indent=f"  {e.spelled:<{width - 2}}",
            subsequent_indent=" " * width,
        )
        for e in entries
    )


def _step(part: str, expression: str) -> Callable[[Weights], Weights]:
    name, colon, text = part.partition(":")
    entry = _entry(name, expression)
    step = entry.step
    if step is None:
        raise ConvertError(
            f"recipe {name!r} is a target and composes with nothing; give it alone as SPEC"
        )
    if not colon and entry.argument is not None and entry.default is None:
        raise ConvertError(f"recipe {name!r} needs an argument: {entry.spelled}, got {part!r}")
    if not colon:
        default = entry.default
        return step if default is None else lambda weights: step(weights, default)
    if entry.argument is None:
        raise ConvertError(f"recipe {name!r} takes no argument, got {part!r}")
    try:
        value = entry.argument(text)
    except ValueError as err:
        raise ConvertError(
            f"recipe {name!r}: bad argument {text!r} in {expression!r}: {err}"
        ) from None
    return lambda weights: step(weights, value)


def _entry(name: str, expression: str) -> RecipeEntry:
    """The recipe `name`, or an error listing the recipes (and the closest name)."""
    entry = recipes().get(name)
    if entry is not None:
        return entry
    import difflib  # for the refusal only

    close = difflib.get_close_matches(name, list(recipes()), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = ", ".join(e.spelled + (" (alone)" if e.target else "") for e in recipes().values())
    raise ConvertError(
        f"unknown recipe {name!r} in {expression!r}{hint}; expected one of {known}, "
        "joined with '+', or a .py file defining transform(params)"
    )
