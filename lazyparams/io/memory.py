"""In-memory checkpoints: a source over a dict of arrays and a sink that collects into one.

Useful in tests and for library callers that already hold their weights. Imports numpy and the
io layer only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lazyparams.io.base import Array, SinkBase, SourceBase, TensorInfo
from lazyparams.io.dtypes import numpy_dtype


class DictSource(SourceBase):
    """A source over `tensors`, in the mapping's order; `load` returns read-only views."""

    def __init__(self, tensors: Mapping[str, Array], path: str = "<memory>") -> None:
        self.path = path
        self._tensors = {name: np.asarray(array) for name, array in tensors.items()}
        self._infos = {n: TensorInfo.from_array(n, a) for n, a in self._tensors.items()}

    def load(self, name: str) -> Array:
        """A read-only view of the stored array (the caller cannot alter the source)."""
        self.info(name)
        view = self._tensors[name].view()
        view.flags.writeable = False
        return view


class DictSink(SinkBase):
    """Collects written arrays, without copying, into `tensors` (declared order).

    `tensors` holds only what was written; it is complete once `finalize` has succeeded and
    emptied by `abort`. A tensor written in rows is assembled in an array of its own.
    """

    def __init__(self, infos: Sequence[TensorInfo], path: str = "<memory>") -> None:
        super().__init__(path, infos)
        self._arrays: dict[str, Array] = {}
        self._partial: dict[str, Array] = {}

    @property
    def tensors(self) -> dict[str, Array]:
        """The written arrays, in declared order."""
        return {name: self._arrays[name] for name in self.infos if name in self._arrays}

    def _store(self, name: str, array: Array) -> None:
        self._arrays[name] = array

    def _store_rows(self, name: str, start: int, block: Array) -> None:
        with self._lock:
            if name not in self._partial:
                info = self.infos[name]
                self._partial[name] = np.empty(info.shape, numpy_dtype(info.dtype))
            target = self._partial[name]
        rows = target.reshape(-1, target.shape[-1]) if target.ndim >= 3 else target
        rows[start : start + block.shape[0]] = block  # rows of the flat view: a view of target

    def _finish_rows(self, name: str) -> None:
        self._arrays[name] = self._partial.pop(name)

    def _commit(self) -> None:
        pass

    def _discard(self) -> None:
        self._arrays.clear()
        self._partial.clear()
