"""Packages whose public names import their modules on first use (`analysis`, `engine`, `io`,
`transform`), so that a command loads only the modules it uses.

Each such package keeps a table, name -> module, imports its names under `TYPE_CHECKING` (so
type checkers see them) and takes its `__getattr__` / `__dir__` from `lazy_package`;
`keep_public_functions` makes a public function that shares its name with a submodule (the
engine's `plan`) stay the function once that submodule is imported. Imports nothing of
lazyparams.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attribute(package: str, module_of: Mapping[str, str], name: str) -> Any:
    """Public `name` of `package`, imported from its module and kept on the package."""
    if name not in module_of:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)
    setattr(sys.modules[package], name, value)
    return value


def lazy_dir(namespace: Mapping[str, Any], module_of: Mapping[str, str]) -> list[str]:
    """The package's names: those already loaded and those it loads on first use."""
    return sorted({*namespace, *module_of})


def lazy_package(
    package: str, module_of: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`, which loads `module_of`'s names
    on first use."""

    def __getattr__(name: str) -> Any:
        return lazy_attribute(package, module_of, name)

    def __dir__() -> list[str]:
        return lazy_dir(vars(sys.modules[package]), module_of)

    return __getattr__, __dir__


def keep_public_functions(package: str, module_of: Mapping[str, str]) -> None:
    """Importing a submodule binds it on its package; where the package's public name of that
    spelling is something else (a function of that module), bind that instead, as an eager
    `from .module import name` in the package would."""

    class LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if isinstance(value, types.ModuleType) and name in module_of:
                value = getattr(value, name)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = LazyPackage


__all__ = ["keep_public_functions", "lazy_attribute", "lazy_dir", "lazy_package"]
