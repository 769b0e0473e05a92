"""The engine: plan and convert real checkpoints in bounded memory.

`plan(transform, src)` traces a transform against a checkpoint's header and predicts its
memory; `convert(transform, src, dst)` streams the checkpoint through the compiled lazy
function into a new one. Built-in recipes live in `recipes`. Imports every layer below, each
public name's module on first use, so that a command loads only what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazyparams.lazy_names import keep_public_functions, lazy_package

if TYPE_CHECKING:
    from lazyparams.engine.convert import Report, convert
    from lazyparams.engine.plan import Plan, plan
    from lazyparams.engine.recipes import RECIPE_NAMES, load_spec, recipe
    from lazyparams.engine.sizes import format_bytes, parse_size

_MODULE_OF: dict[str, str] = {
    **dict.fromkeys(("Report", "convert"), "convert"),
    **dict.fromkeys(("Plan", "plan"), "plan"),
    **dict.fromkeys(("RECIPE_NAMES", "load_spec", "recipe"), "recipes"),
    **dict.fromkeys(("format_bytes", "parse_size"), "sizes"),
}

__all__ = [
    "RECIPE_NAMES",
    "Plan",
    "Report",
    "convert",
    "format_bytes",
    "load_spec",
    "parse_size",
    "plan",
    "recipe",
]

__getattr__, __dir__ = lazy_package(__name__, _MODULE_OF)
keep_public_functions(__name__, _MODULE_OF)
