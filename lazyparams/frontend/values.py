"""Conversions of user values (dtypes, Python and numpy scalars, arrays) into IR terms.

numpy's rules decide what a value means, so that a traced program computes what the same
code computes on arrays. Imports `ir` only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from lazyparams.errors import StructInfoError
from lazyparams.ir.dtype import DTYPES, canonical_dtype, from_numpy, is_float, to_numpy

if TYPE_CHECKING:
    import numpy as np


class BadValue(Exception):
    """A user value that has no IR meaning; the tracer turns it into a located TraceError."""


def dtype_name(dtype: object) -> str:
    """The IR name of a dtype given as a string, a numpy dtype or scalar type, or an ml_dtype."""
    try:
        if isinstance(dtype, str):
            return canonical_dtype(dtype)
        return from_numpy(dtype)  # type: ignore[arg-type]
    except (StructInfoError, TypeError) as err:
        raise BadValue(f"expected a dtype ({', '.join(DTYPES)}), got {dtype!r}") from err


class DType(str):
    """A dtype name that also equals numpy's spellings of it (`w.dtype == np.float16`)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        try:
            return str.__eq__(self, dtype_name(other))
        except BadValue:
            return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


def is_scalar(value: object) -> bool:
    """True for the Python and numpy scalars arithmetic accepts as an operand."""
    np = sys.modules.get("numpy")  # a numpy scalar exists only once numpy is imported
    numpy_scalar = np is not None and isinstance(value, np.generic)
    return isinstance(value, (bool, int, float)) or numpy_scalar


def scalar_array(value: object, dtype: str) -> np.ndarray[Any, Any]:
    """A 0-d array for a scalar operand next to a tensor of `dtype`.

    A Python number takes the tensor's dtype (numpy's weak scalars) and must fit it; a numpy
    scalar keeps its own dtype, as numpy would.
    """
    import numpy as np

    if isinstance(value, np.generic):
        return np.asarray(value)
    if dtype == "bool" and not isinstance(value, bool):
        raise BadValue(f"expected a bool scalar for a bool tensor, got {value!r}")
    if isinstance(value, float) and not is_float(dtype):
        raise BadValue(f"expected an integer scalar for a {dtype} tensor, got {value!r}")
    target = to_numpy(dtype)
    if isinstance(value, int) and not isinstance(value, bool) and np.issubdtype(target, np.integer):
        limits = np.iinfo(target.type)  # type: ignore[type-var]
        if not limits.min <= value <= limits.max:
            raise BadValue(
                f"expected a scalar in [{limits.min}, {limits.max}] for a {dtype} tensor, "
                f"got {value}"
            )
    return np.asarray(value, dtype=target)


def constant_array(value: object) -> np.ndarray[Any, Any]:
    """A numpy array or scalar as an array with an IR dtype (an output or a constant operand)."""
    import numpy as np

    if not isinstance(value, (np.ndarray, np.generic)):
        raise BadValue(f"expected a numpy array, got {type(value).__name__}")
    array = np.asarray(value)
    dtype_name(array.dtype)
    return array
