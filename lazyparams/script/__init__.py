"""The script syntax: `I`, `R` and `T` namespaces, a parser and the printer behind `script()`.

`from lazyparams.script import ir as I, relax as R, tir as T` gives the decorators of the
seed's spelling; `parse(text)` reads printed text back. The printer behind `IRModule.script()`
is the ir printer core (as TVM keeps printing in ir); `print_module` and `print_function` are
re-exported from it. Imports `ir`, `tir` and `op`.
"""

import lazyparams.op  # noqa: F401 - registers every op before anything is parsed
from lazyparams.ir.printer import print_function, print_module
from lazyparams.script import ir, relax, tir
from lazyparams.script.parser import parse

__all__ = ["ir", "parse", "print_function", "print_module", "relax", "tir"]
