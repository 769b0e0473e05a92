"""The engine: plan and convert real checkpoints in bounded memory.

`plan(transform, src)` traces a transform against a checkpoint's header and predicts its
memory; `convert(transform, src, dst)` streams the checkpoint through the compiled lazy
function into a new one. Built-in recipes live in `recipes`. Imports every layer below.
"""

from lazyparams.engine.convert import Report, convert
from lazyparams.engine.plan import Plan, plan
from lazyparams.engine.recipes import RECIPE_NAMES, load_spec, recipe
from lazyparams.engine.sizes import format_bytes, parse_size

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
