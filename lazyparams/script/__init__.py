"""The script syntax: `I`, `R` and `T` namespaces, a parser and the printer behind `script()`.

`from lazyparams.script import ir as I, relax as R, tir as T` gives the decorators of the
seed's spelling; `parse(text)` reads printed text back. Importing this package installs the
printer used by `IRModule.script()`. Imports `ir`, `tir` and `op`.
"""

import lazyparams.op  # noqa: F401 - registers every op before anything is parsed
from lazyparams.ir.module import set_script_printer
from lazyparams.script import ir, relax, tir
from lazyparams.script.parser import parse
from lazyparams.script.printer import print_function, print_module

set_script_printer(print_module)

__all__ = ["ir", "parse", "print_function", "print_module", "relax", "tir"]
