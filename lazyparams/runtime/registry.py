"""The global table of extern functions that `R.call_packed("name", ...)` calls.

A VM looks a name up in its own table first and here second, at the moment of the call, so a
function registered after the VM was made is still found. Imports only the error hierarchy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from lazyparams.errors import RuntimeExecError

F = TypeVar("F", bound=Callable[..., Any])

_GLOBAL: dict[str, Callable[..., Any]] = {}


def register_func(name: str, fn: F | None = None, *, override: bool = True) -> Any:
    """Register `fn` as the global extern `name`; without `fn`, a decorator that does so.

    `@register_func("get_item")` over a function, or `register_func("get_item", fn)`. With
    `override=False` an existing registration is an error rather than replaced.
    """
    if not isinstance(name, str) or not name:
        raise RuntimeExecError(f"expected a non-empty extern name, got {name!r}")

    def decorate(func: F) -> F:
        if not callable(func):
            raise RuntimeExecError(f"expected a callable for extern {name!r}, got {func!r}")
        if not override and name in _GLOBAL:
            raise RuntimeExecError(
                f"extern {name!r}: expected a new name (override=False), got one already registered"
            )
        _GLOBAL[name] = func
        return func

    return decorate if fn is None else decorate(fn)


def get_global_func(name: str) -> Callable[..., Any] | None:
    """The global extern registered under `name`, or None."""
    return _GLOBAL.get(name)


def remove_global_func(name: str) -> None:
    """Forget the global extern `name` (no error when it is not registered)."""
    _GLOBAL.pop(name, None)


def global_func_names() -> list[str]:
    """Names of every global extern, sorted."""
    return sorted(_GLOBAL)
