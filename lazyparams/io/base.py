"""The checkpoint protocols: `TensorInfo`, `CheckpointSource`, `CheckpointSink`, `SinkBase`.

A source lists tensors without reading their data and loads one at a time (or a block of rows
or columns of one); a sink is told every output up front, takes tensors in any order (whole, or
in blocks of rows) and publishes them atomically. Imports numpy and the io layer's helpers.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Protocol, Self, TypeAlias, runtime_checkable

from lazyparams.errors import CheckpointError
from lazyparams.io.dtypes import (
    DTYPE_NAMES,
    dtype_name,
    holds,
    is_block,
    numpy_dtype,
    storage_shape,
    tensor_nbytes,
)
from lazyparams.io.filemap import map_array
from lazyparams.io.partial import RowLedger, check_cols, check_rows, gather_cols, rows_offset

if TYPE_CHECKING:  # numpy loads with the first tensor read or written: planning needs none
    from numpy.typing import NDArray

Array: TypeAlias = "NDArray[Any]"


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """What a checkpoint says about one tensor: name, shape (numpy order), dtype name, bytes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    @classmethod
    def of(cls, name: str, shape: Iterable[int], dtype: str) -> TensorInfo:
        """A TensorInfo whose nbytes is computed from shape and dtype."""
        dims = tuple(int(d) for d in shape)
        return cls(name, dims, dtype, tensor_nbytes(dtype, dims))

    @classmethod
    def from_array(cls, name: str, array: Array) -> TensorInfo:
        """The TensorInfo describing `array`; CheckpointError for dtypes the IR has no name for."""
        dtype = dtype_name(array.dtype)
        if dtype is None:
            raise CheckpointError(
                f"tensor {name!r}: unsupported numpy dtype {array.dtype}; "
                f"expected one of {', '.join(DTYPE_NAMES)}"
            )
        return cls(name, tuple(array.shape), dtype, int(array.nbytes))


def open_binary(path: str) -> IO[bytes]:
    """`path` opened for reading bytes; a CheckpointError naming it when that fails."""
    try:
        return open(path, "rb")
    except OSError as err:
        raise CheckpointError(f"{path}: cannot open: {err.strerror}") from None


def _preview(names: Iterable[str], count: int = 5) -> str:
    """The first few names, for messages about a checkpoint of possibly thousands of tensors."""
    listed = list(names)
    more = f", ... ({len(listed) - count} more)" if len(listed) > count else ""
    return ", ".join(listed[:count]) + more


def declared_info(where: str, infos: Mapping[str, TensorInfo], name: str) -> TensorInfo:
    """What `infos` declares of tensor `name`; a CheckpointError (starting with `where`, a
    path) when it declares no such tensor."""
    info = infos.get(name)
    if info is None:
        raise CheckpointError(
            f"{where}: tensor {name!r} was not declared; expected one of the "
            f"{len(infos)} declared tensors ({_preview(infos)})"
        )
    return info


def check_declared(where: str, infos: Mapping[str, TensorInfo], name: str, array: Any) -> None:
    """Refuse a write of `array` as `name` unless `name` was declared in `infos` with exactly
    the array's dtype and shape; `where` (a path) starts the message."""
    info = declared_info(where, infos, name)
    got = dtype_name(array.dtype) or str(array.dtype)
    stored = storage_shape(info.dtype, info.shape)
    if not holds(array.dtype, info.dtype) or tuple(array.shape) != stored:
        raise CheckpointError(
            f"{where}: tensor {name!r}: expected {info.dtype}{list(info.shape)}"
            f"{_held_as(info, stored)}, got {got}{list(array.shape)}"
        )


def _held_as(info: TensorInfo, stored: tuple[int, ...]) -> str:
    """How a block-typed tensor is held in memory, for messages about one."""
    return "" if stored == info.shape else f" (held as uint8{list(stored)})"


@runtime_checkable
class CheckpointSource(Protocol):
    """Read access to a checkpoint: list without reading data, load one tensor at a time."""

    def names(self) -> list[str]: ...
    def info(self, name: str) -> TensorInfo: ...
    def load(self, name: str) -> Array: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


@runtime_checkable
class CheckpointSink(Protocol):
    """Write access to a checkpoint whose every tensor was declared when the sink was made."""

    infos: dict[str, TensorInfo]

    def write(self, name: str, array: Array) -> None: ...
    def finalize(self) -> None: ...
    def abort(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class SourceBase(ABC):
    """Context-manager plumbing, name lookup and partial reads shared by the sources."""

    path: str
    _infos: dict[str, TensorInfo]

    def names(self) -> list[str]:
        """Tensor names in the checkpoint's own order."""
        return list(self._infos)

    def info(self, name: str) -> TensorInfo:
        """Name, shape, dtype and size of one tensor, read from the header only."""
        try:
            return self._infos[name]
        except KeyError:
            raise CheckpointError(
                f"{self.path}: no tensor named {name!r}; expected one of its "
                f"{len(self._infos)} tensors ({_preview(self._infos)})"
            ) from None

    @abstractmethod
    def load(self, name: str) -> Array:
        """The tensor `name`, read-only."""

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name` (along axis 0), read-only.

        This default slices `load`, which reads only those rows where the tensor is
        memory-mapped; formats that know their offsets map just the rows.
        """
        first, end = check_rows(self.info(name), start, stop, self.path)
        return self.load(name)[first:end]

    def load_cols(self, name: str, start: int, stop: int) -> Array:
        """Columns [start, stop) of the 2-D tensor `name`, as a new contiguous array.

        Gathered from bands of whole rows, so only a band of the tensor is touched at a time.
        """
        info = self.info(name)
        first, end = check_cols(info, start, stop, self.path)
        return gather_cols(info, first, end, lambda r0, r1: self.load_rows(name, r0, r1))

    def close(self) -> None:  # noqa: B027 - a source without a file has nothing to release
        """Release the file; arrays already returned stay valid."""

    def _map_rows(self, fd: int, offset: int, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name`, whose C-ordered data starts at byte `offset`
        of the file `fd`, mapped on their own."""
        info = self.info(name)
        first, end = check_rows(info, start, stop, self.path)
        shape = (end - first, *storage_shape(info.dtype, info.shape)[1:])
        at = offset + rows_offset(info, first)
        return map_array(
            fd, at, numpy_dtype(info.dtype), shape, path=f"{self.path}: tensor {name!r}"
        )

    def _fileno(self, file: IO[bytes]) -> int:
        """The descriptor of `file`, or CheckpointError once the source is closed."""
        if file.closed:
            raise CheckpointError(f"{self.path}: the source is closed; expected an open one")
        return file.fileno()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class SinkBase:
    """Validation and life cycle shared by the sinks; subclasses store, commit and discard.

    Each declared tensor must be written exactly once, with its declared shape and dtype, before
    `finalize`: whole (`write`) or as blocks of rows that together cover it once (`write_rows`).
    Leaving a `with` block by an exception aborts; leaving it normally finalizes.
    """

    def __init__(self, path: str, infos: Sequence[TensorInfo]) -> None:
        self.path = path
        self.infos: dict[str, TensorInfo] = {}
        for info in infos:
            self._check_declaration(info)
            self.infos[info.name] = info
        self._written: set[str] = set()
        self._lock = threading.Lock()
        self._rows = RowLedger(self.path, self.infos, self._written.__contains__, self._lock)
        self._state = "open"

    def write(self, name: str, array: Array) -> None:
        """Check `array` against its declaration and store it; it is not kept by the sink."""
        self._store(name, self._accept(name, array))

    def write_rows(self, name: str, start: int, array: Array) -> None:
        """Store `array` as rows [start, start + len(array)) of tensor `name`, at their place.

        The rows are written before this returns and not kept by the sink; the tensor counts
        as written once all its rows have arrived, each exactly once.
        """
        self._require_open()
        first, block = self._rows.claim(name, start, array)
        self._store_rows(name, first, block)
        if self._rows.stored(name, block.shape[0]):
            self._finish_rows(name)
            with self._lock:
                self._written.add(name)

    def finalize(self) -> None:
        """Publish the checkpoint; CheckpointError (after aborting) if a tensor is missing."""
        self._require_open()
        missing = [name for name in self.infos if name not in self._written]
        if missing:
            self.abort()
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise CheckpointError(f"{self.path}: {self._rows.missing_message(missing[0])}{more}")
        try:
            self._commit()
        except BaseException:
            self.abort()
            raise
        self._state = "finalized"

    def abort(self) -> None:
        """Remove everything written so far; a no-op once finalized or aborted."""
        if self._state == "open":
            self._state = "aborted"
            self._discard()

    def __enter__(self) -> Self:
        return self

    def __del__(self) -> None:
        # a sink dropped unfinished (no `with`, an error in between) still removes its output
        if getattr(self, "_state", None) == "open":
            self.abort()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.abort()
        elif self._state == "open":
            self.finalize()

    def _check_declaration(self, info: TensorInfo) -> None:
        where = f"{self.path}: tensor {info.name!r}"
        if info.name in self.infos:
            raise CheckpointError(f"{where} is declared twice")
        if info.dtype not in DTYPE_NAMES and not is_block(info.dtype):
            raise CheckpointError(
                f"{where}: unknown dtype {info.dtype!r}; expected one of {', '.join(DTYPE_NAMES)} "
                "or a GGML block type"
            )
        try:
            expected = tensor_nbytes(info.dtype, info.shape)
        except CheckpointError as err:
            raise CheckpointError(f"{where}: {err}") from None
        if info.nbytes != expected:
            raise CheckpointError(
                f"{where}: nbytes {info.nbytes} disagrees with shape and dtype; expected {expected}"
            )

    def _require_open(self) -> None:
        if self._state != "open":
            raise CheckpointError(
                f"{self.path}: the sink is already {self._state}; expected an open sink"
            )

    def _accept(self, name: str, array: Array) -> Array:
        """Validate one write and mark the name written; returns the array in native byte order."""
        import numpy as np

        self._require_open()
        array = np.asarray(array)
        check_declared(self.path, self.infos, name, array)
        with self._lock:
            self._require_open()
            if name in self._written or self._rows.started(name):
                raise CheckpointError(f"{self.path}: tensor {name!r} was written twice")
            self._written.add(name)
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        return array

    def _store(self, name: str, array: Array) -> None:
        raise NotImplementedError

    def _store_rows(self, name: str, start: int, block: Array) -> None:
        """Store `block` as rows from `start` of the tensor's `flat_info` (the ledger's form)."""
        raise NotImplementedError

    def _finish_rows(self, name: str) -> None:
        """Called once the last rows of `name` are stored (a sink that staged them moves them)."""

    def _commit(self) -> None:
        raise NotImplementedError

    def _discard(self) -> None:
        raise NotImplementedError
