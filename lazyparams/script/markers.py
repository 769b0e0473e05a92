"""What the script decorators and annotations evaluate to while Python creates a class.

Python runs a class body, its decorators and the annotations of its `def`s, but the parser
reads the source instead; these objects only need to exist harmlessly.
Imports `lazyparams.errors` only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lazyparams.errors import LazyParamsError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ScriptFunction:
    """A `def` decorated inside an `@I.ir_module` class; the class decorator parses its source."""

    decorator: str
    func: Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Unchecked:
    """An annotation Python evaluated that is not valid struct info; the parser reports it."""

    spelling: str
    problem: str


def in_class_body(func: Callable[..., Any]) -> bool:
    """True for a `def` written directly in a class body (its qualname ends `Class.name`)."""
    parts = func.__qualname__.split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def lenient(spelling: str, build: Callable[[], T]) -> T | Unchecked:
    """`build()`, or an `Unchecked` marker when the arguments are invalid.

    Annotations are evaluated before the parser runs; raising here would lose the file, line
    and column the parser names in its own error for the same mistake.
    """
    try:
        return build()
    except (LazyParamsError, TypeError, ValueError) as err:
        return Unchecked(spelling, str(err))


def module_globals(obj: Any) -> dict[str, Any]:
    """The global namespace of the module defining a class or function."""
    if hasattr(obj, "__globals__"):
        return dict(obj.__globals__)
    module = sys.modules.get(getattr(obj, "__module__", ""))
    return dict(vars(module)) if module is not None else {}
