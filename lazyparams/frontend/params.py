"""The inputs of a trace: their specs (from a mapping or a checkpoint source) and `Params`,
the read-only mapping of symbolic tensors the user's function receives.

A checkpoint source is anything with `names()` and `info(name)` (info giving `.shape` and
`.dtype`); no data is read. Imports `ir` and the frontend's own modules.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from lazyparams.frontend.location import trace_error
from lazyparams.frontend.tensor import Tensor
from lazyparams.frontend.tracer import InputSpec, Tracer
from lazyparams.frontend.values import BadValue, dtype_name
from lazyparams.ir.dtype import is_integer


def input_specs(inputs: Any) -> list[InputSpec]:
    """Specs from `{name: (shape, dtype)}` (or values with `.shape` and `.dtype`) or a source."""
    if callable(getattr(inputs, "names", None)) and callable(getattr(inputs, "info", None)):
        pairs = [(name, inputs.info(name)) for name in inputs.names()]
    elif isinstance(inputs, Mapping):
        pairs = list(inputs.items())
    else:
        raise trace_error(
            "trace",
            "expected inputs as a mapping of name -> (shape, dtype) or a checkpoint source, "
            f"got {type(inputs).__name__}",
        )
    return [_spec(name, value) for name, value in pairs]


def _spec(name: object, value: Any) -> InputSpec:
    shape: Any = getattr(value, "shape", None)
    dtype: Any = getattr(value, "dtype", None)
    plain = type(name) is str and type(shape) is tuple and type(dtype) is str
    # a checkpoint's tensor info: its shape is checked as below, in fewer steps
    if plain and all(type(d) is int and d >= 0 for d in shape):
        try:
            return InputSpec(str(name), shape, dtype_name(dtype))
        except BadValue as err:
            raise trace_error("trace", f"input {name!r}: {err}") from None
    if not isinstance(name, str):
        raise trace_error("trace", f"expected input names as str, got {name!r}")
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape, dtype = value.shape, value.dtype
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        shape, dtype = value
    else:
        raise trace_error("trace", f"input {name!r}: expected (shape, dtype), got {value!r}")
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not all(is_integer(d) and d >= 0 for d in dims):
        raise trace_error(
            "trace", f"input {name!r}: expected a shape of non-negative ints, got {shape!r}"
        )
    try:
        return InputSpec(name, tuple(int(d) for d in dims), dtype_name(dtype))
    except BadValue as err:
        raise trace_error("trace", f"input {name!r}: {err}") from None


class Params(Mapping[str, Tensor]):
    """The read-only mapping from input name to traced tensor passed to the user's function.

    Looking a name up binds `params[i]` in the traced function; names never looked up are
    never loaded.
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._index = {spec.name: i for i, spec in enumerate(tracer.specs)}
        self._tensors: dict[int, Tensor] = {}

    def __getitem__(self, name: str) -> Tensor:
        index = self._index.get(name)
        if index is None:
            raise trace_error(f"params[{name!r}]", self._unknown(name))
        self._tracer.check_running(f"params[{name!r}]")
        if index not in self._tensors:
            self._tensors[index] = Tensor(self._tracer, self._tracer.input_var(index))
        return self._tensors[index]

    def _unknown(self, name: object) -> str:
        close = difflib.get_close_matches(str(name), list(self._index), n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        return f"expected one of the {len(self._index)} input names, got {name!r}{hint}"

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def get(self, name: str, default: Any = None) -> Any:
        """The tensor of `name`, or `default` for a name that is not an input."""
        return self[name] if name in self._index else default

    def __setitem__(self, name: str, value: Any) -> NoReturn:
        raise trace_error(f"params[{name!r}] = ...", "params are read-only; return new outputs")

    def __delitem__(self, name: str) -> NoReturn:
        raise trace_error(f"del params[{name!r}]", "params are read-only")

    def __repr__(self) -> str:
        return f"Params({len(self)} inputs)"
