"""A restricted unpickler for the `data.pkl` of a zip-format `torch.save` file.

Only the globals a state dict needs resolve, each to a stand-in defined here: tensors become
`TensorRecord`s (storage key, dtype, offset, shape, stride) and nothing from torch is imported or
run. Any other global, and any opcode a state dict does not use, is refused; the opcode table
and the bounds live in `pickle_bounds`. Imports the standard library and the io layer only.
"""

from __future__ import annotations

import collections
import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import MAX_DIM, check_shape, short_repr
from lazyparams.io.pickle_bounds import (
    MAX_PICKLE_STEPS,
    StateDictRefused,
    flatten_state_dict,
    restricted_dispatch,
)
from lazyparams.io.reasons import pickle_reason

# storage classes of typed storages (the legacy spelling torch still writes for common dtypes)
_STORAGE_DTYPES = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
}
# torch dtype objects, as they appear next to untyped storages
_TORCH_DTYPES = {
    **{name: name for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32")},
    **{name: name for name in ("int16", "int8", "uint8", "bool", "float8_e4m3fn", "float8_e5m2")},
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
}


@dataclass(frozen=True, slots=True)
class StorageType:
    """Stand-in for a torch storage class; `dtype` is None for untyped (byte) storages."""

    dtype: str | None


@dataclass(frozen=True, slots=True)
class TorchDtype:
    """Stand-in for a torch dtype object."""

    name: str


@dataclass(frozen=True, slots=True)
class StorageRef:
    """A storage named by the pickle: its key in `data/`, the dtype it was saved with and its
    size in elements of that dtype (in bytes when untyped)."""

    key: str
    dtype: str | None
    numel: int


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """A tensor as the pickle describes it; all sizes are in elements of `dtype`."""

    storage: StorageRef
    dtype: str
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_v2(
    storage: StorageRef, offset: int, size: Any, stride: Any, *_rest: Any
) -> TensorRecord:
    """Stand-in for torch._utils._rebuild_tensor_v2 (typed storage carries the dtype)."""
    if not isinstance(storage, StorageRef) or storage.dtype is None:
        raise StateDictRefused("_rebuild_tensor_v2 over an untyped storage")
    return _record(storage, storage.dtype, offset, size, stride)


def _rebuild_v3(
    storage: StorageRef,
    offset: int,
    size: Any,
    stride: Any,
    requires_grad: Any,
    hooks: Any,
    dtype: TorchDtype,
    *_rest: Any,
) -> TensorRecord:
    """Stand-in for torch._utils._rebuild_tensor_v3 (the dtype is passed explicitly)."""
    if not isinstance(dtype, TorchDtype):
        raise StateDictRefused("_rebuild_tensor_v3 without a dtype")
    return _record(storage, dtype.name, offset, size, stride)


def _rebuild_parameter(data: TensorRecord, *_rest: Any) -> TensorRecord:
    """Stand-in for torch._utils._rebuild_parameter: a parameter is stored as its tensor."""
    if not isinstance(data, TensorRecord):
        raise StateDictRefused("_rebuild_parameter of something other than a tensor")
    return data


def _record(storage: StorageRef, dtype: str, offset: Any, size: Any, stride: Any) -> TensorRecord:
    """A TensorRecord as the pickle gave it; `checked` validates it once its name is known."""
    if not isinstance(storage, StorageRef):
        raise StateDictRefused("a tensor record without a storage")
    return TensorRecord(storage, dtype, offset, size, stride)


def checked(name: str, record: TensorRecord, where: str) -> TensorRecord:
    """`record` with its shape, strides and offset checked to be bounded counts."""
    at = f"{where}: tensor {name!r}"
    size, stride, offset = record.shape, record.stride, record.offset
    if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride):
        raise CheckpointError(
            f"{at}: size {short_repr(size, 80)} and stride {short_repr(stride, 80)}; "
            "expected two tuples of one length"
        )
    shape = check_shape(size, at)
    if not all(_is_count(v) for v in (offset, *stride)):
        raise CheckpointError(
            f"{at}: offset {short_repr(offset, 80)} and stride {short_repr(stride, 80)}; "
            "expected integers in [0, 2**62]"
        )
    return TensorRecord(record.storage, record.dtype, offset, shape, stride)


def _is_count(value: object) -> bool:
    """Whether `value` is an int (not a bool) in [0, MAX_DIM]."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_DIM


@dataclass(frozen=True, slots=True)
class _Global:
    """An allow-listed callable global as the pickle sees it: a call, and nothing to alter."""

    name: str
    function: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return self.function(*args)


_ALLOWED: dict[tuple[str, str], object] = {
    ("collections", "OrderedDict"): _Global("OrderedDict", collections.OrderedDict),
    ("torch._utils", "_rebuild_tensor_v2"): _Global("_rebuild_tensor_v2", _rebuild_v2),
    ("torch._utils", "_rebuild_tensor_v3"): _Global("_rebuild_tensor_v3", _rebuild_v3),
    ("torch._utils", "_rebuild_parameter"): _Global("_rebuild_parameter", _rebuild_parameter),
    ("torch.storage", "UntypedStorage"): StorageType(None),
    **{("torch", name): StorageType(dtype) for name, dtype in _STORAGE_DTYPES.items()},
    **{("torch", name): TorchDtype(dtype) for name, dtype in _TORCH_DTYPES.items()},
}


class RestrictedUnpickler(pickle._Unpickler):
    """Resolves only the allow-listed globals, runs only the opcodes a state dict needs, and
    stops after `MAX_PICKLE_STEPS` steps; persistent ids become `StorageRef`s.

    It is the pure-Python unpickler with its own opcode table: BUILD may only touch an
    OrderedDict (whose torch metadata is dropped), so nothing allow-listed can be altered.
    """

    dispatch = restricted_dispatch(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes, path: str) -> None:
        self.stream = io.BytesIO(data)
        super().__init__(self.stream)
        self.path = path
        self.steps_left = MAX_PICKLE_STEPS
        self.storages: dict[str, tuple[str | None, int]] = {}

    def position(self) -> int:
        """The byte of data.pkl after the last one read (inside a frame, too)."""
        frame = getattr(getattr(self, "_unframer", None), "current_frame", None)
        left = len(frame.getbuffer()) - frame.tell() if isinstance(frame, io.BytesIO) else 0
        return self.stream.tell() - left

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise CheckpointError(
                f"{self.path}: refusing to load global '{module}.{name}' from data.pkl "
                "(only tensors, storages and plain containers are allowed)"
            ) from None

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise StateDictRefused(f"unexpected persistent id {short_repr(pid, 80)}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, StorageType) or not _is_key(key) or not _is_count(numel):
            raise StateDictRefused(f"malformed storage id {short_repr(pid, 80)}")
        declared = (storage_type.dtype, numel)
        if self.storages.setdefault(key, declared) != declared:
            raise StateDictRefused(f"storage {key!r} is declared twice, differently")
        return StorageRef(key, storage_type.dtype, numel)


def _is_key(key: object) -> bool:
    """Whether `key` can name a storage record (torch writes decimal numbers)."""
    return isinstance(key, str) and 0 < len(key) <= 64 and key.isascii() and key.isalnum()


def read_records(data: bytes, path: str) -> dict[str, TensorRecord]:
    """Unpickle a state dict and flatten it to name -> TensorRecord.

    Nested dicts join their keys with '.'; leaves that are not tensors (step counters, strings)
    are skipped. Names must come out unique, and the dicts must not nest too deep or refer to
    themselves.
    """
    unpickler = RestrictedUnpickler(data, path)
    try:
        root = unpickler.load()
    except CheckpointError:
        raise
    except Exception as err:
        reason = str(err) if isinstance(err, StateDictRefused) else pickle_reason(err)
        raise CheckpointError(
            f"{path}: data.pkl is not a readable state dict: {reason} (at byte "
            f"{unpickler.position()} of data.pkl)"
        ) from None
    if not isinstance(root, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors, got {type(root).__name__}")
    found = flatten_state_dict(root, f"{path}: data.pkl", TensorRecord)
    records = {name: checked(name, record, path) for name, record in found.items()}
    if not records:
        raise CheckpointError(f"{path}: the state dict holds no tensors; expected at least one")
    return records
