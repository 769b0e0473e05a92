"""lazyparams: transform model weights in bounded memory.

A transform over a model's weights is compiled into a lazy program that loads each input on
demand, hands each output off at once, frees every value after its last use, and runs in an
order whose peak memory is predicted exactly before any byte is read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from lazyparams.cli.lora import extract_lora, merge_lora
    from lazyparams.engine.convert import convert
    from lazyparams.engine.plan import plan
    from lazyparams.frontend import ops, trace

# Loaded on first use, so that `import lazyparams` stays light (the command line's start-up
# imports nothing else); `IRModule.script()` loads the script printer itself.
_LAZY: dict[str, tuple[str, str]] = {
    "trace": ("lazyparams.frontend", "trace"),
    "ops": ("lazyparams.frontend", "ops"),
    "plan": ("lazyparams.engine", "plan"),
    "convert": ("lazyparams.engine", "convert"),
    "merge_lora": ("lazyparams.cli.lora", "merge_lora"),
    "extract_lora": ("lazyparams.cli.lora", "extract_lora"),
}

__all__ = ["__version__", "convert", "extract_lora", "merge_lora", "ops", "plan", "trace"]


_SUBPACKAGES = frozenset(
    [
        "analysis",
        "cluster",
        "engine",
        "frontend",
        "io",
        "ir",
        "op",
        "runtime",
        "script",
        "targets",
        "tir",
        "transform",
    ]
)


def __getattr__(name: str) -> Any:
    """A lazy public name, or a subpackage (`lazyparams.script` after `import lazyparams`)."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f"lazyparams.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'lazyparams' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
