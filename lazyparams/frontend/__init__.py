"""The tracing frontend: write a transform as a Python function over symbolic tensors.

`trace(fn, inputs)` builds the IRModule; `ops` holds the numpy-style functions (`concat`,
`split`, `where`, `sum`, `maximum`, `quantize_int8`, `numpy_kernel`, `call_tir`, ...).
Imports `ir`, `tir` and `op`.
"""

from lazyparams.frontend import ops
from lazyparams.frontend.kernels import NumpyKernel
from lazyparams.frontend.location import SourceLocation
from lazyparams.frontend.params import Params
from lazyparams.frontend.tensor import Tensor
from lazyparams.frontend.tracing import trace

__all__ = ["NumpyKernel", "Params", "SourceLocation", "Tensor", "ops", "trace"]
