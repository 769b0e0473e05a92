"""A restricted unpickler for the `data.pkl` of a zip-format `torch.save` file.

Only the globals a state dict needs resolve, each to a stand-in defined here: tensors become
`TensorRecord`s (storage key, dtype, offset, shape, stride) and nothing from torch is imported or
run. Any other global is refused. Imports the standard library and the io layer only.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import pickle
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import CheckpointError

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
    """A storage named by the pickle: its key in `data/` and the dtype it was saved with."""

    key: str
    dtype: str | None


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
    if storage.dtype is None:
        raise pickle.UnpicklingError("_rebuild_tensor_v2 over an untyped storage")
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
        raise pickle.UnpicklingError("_rebuild_tensor_v3 without a dtype")
    return _record(storage, dtype.name, offset, size, stride)


def _rebuild_parameter(data: TensorRecord, *_rest: Any) -> TensorRecord:
    """Stand-in for torch._utils._rebuild_parameter: a parameter is stored as its tensor."""
    return data


def _record(storage: StorageRef, dtype: str, offset: Any, size: Any, stride: Any) -> TensorRecord:
    ints = (offset, *size, *stride)
    if not isinstance(storage, StorageRef) or not all(_is_count(v) for v in ints):
        raise pickle.UnpicklingError("malformed tensor record")
    if len(size) != len(stride):
        raise pickle.UnpicklingError("tensor size and stride differ in length")
    return TensorRecord(storage, dtype, offset, tuple(size), tuple(stride))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch.storage", "UntypedStorage"): StorageType(None),
    **{("torch", name): StorageType(dtype) for name, dtype in _STORAGE_DTYPES.items()},
    **{("torch", name): TorchDtype(dtype) for name, dtype in _TORCH_DTYPES.items()},
}


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the allow-listed globals; persistent ids become `StorageRef`s."""

    def __init__(self, data: bytes, path: str) -> None:
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        try:
            value = _ALLOWED[(module, name)]
        except KeyError:
            raise CheckpointError(
                f"{self.path}: refusing to load global '{module}.{name}' from data.pkl "
                "(only tensors, storages and plain containers are allowed)"
            ) from None
        # a fresh stand-in each time, so that a BUILD opcode cannot alter the shared table
        return dataclasses.replace(value) if isinstance(value, StorageType | TorchDtype) else value

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        _, storage_type, key, _location, _numel = pid
        if not isinstance(storage_type, StorageType) or not isinstance(key, str):
            raise pickle.UnpicklingError(f"malformed storage id {pid!r}")
        return StorageRef(key, storage_type.dtype)


def read_records(data: bytes, path: str) -> dict[str, TensorRecord]:
    """Unpickle a state dict and flatten it to name -> TensorRecord.

    Nested dicts join their keys with '.'; leaves that are not tensors (step counters, strings)
    are skipped.
    """
    try:
        root = RestrictedUnpickler(data, path).load()
    except CheckpointError:
        raise
    except Exception as err:
        raise CheckpointError(f"{path}: data.pkl is not a readable state dict: {err}") from None
    if not isinstance(root, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors, got {type(root).__name__}")
    records: dict[str, TensorRecord] = {}
    _flatten(root, "", records)
    return records


def _flatten(tree: dict[Any, Any], prefix: str, out: dict[str, TensorRecord]) -> None:
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, TensorRecord):
            out[name] = value
        elif isinstance(value, dict):
            _flatten(value, f"{name}.", out)
