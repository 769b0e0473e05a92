"""lazyparams: transform model weights in bounded memory.

A transform over a model's weights is compiled into a lazy program that loads each input on
demand, hands each output off at once, frees every value after its last use, and runs in an
order whose peak memory is predicted exactly before any byte is read.
"""

__version__ = "0.1.0"

import lazyparams.script  # noqa: F401 - installs the printer behind IRModule.script()
