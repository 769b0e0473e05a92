"""GGUF key/value metadata: typing plain Python values as GGUF types, checking, reading back.

A value is either a `gguf.GGUFValue` (its exact GGUF type) or a plain value typed by the rules
of `typed_value`. `check_gguf_metadata` turns a mapping into the header of one file, refusing bad
keys and values before anything is written; `read_gguf_metadata` gives an existing file's pairs
with their types. Imports numpy, gguf and the io layer only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gguf import GGUFValue, GGUFValueType
from gguf.constants import GGUF_DEFAULT_ALIGNMENT

from lazyparams.errors import CheckpointError
from lazyparams.io.gguf_reader import read_gguf_header
from lazyparams.io.gguf_values import plain
from lazyparams.io.limits import short_repr

_T = GGUFValueType
ARCH_KEY = "general.architecture"
ALIGNMENT_KEY = "general.alignment"
RESERVED_PREFIXES = ("GGUF.", "split.")  # reader pseudo-fields; the sink writes split.* itself
_MAX_KEY_BYTES = 65535
_FLOAT32_MAX = float(np.finfo(np.float32).max)
INT_RANGES: dict[GGUFValueType, tuple[int, int]] = {
    _T.UINT8: (0, 2**8 - 1),
    _T.INT8: (-(2**7), 2**7 - 1),
    _T.UINT16: (0, 2**16 - 1),
    _T.INT16: (-(2**15), 2**15 - 1),
    _T.UINT32: (0, 2**32 - 1),
    _T.INT32: (-(2**31), 2**31 - 1),
    _T.UINT64: (0, 2**64 - 1),
    _T.INT64: (-(2**63), 2**63 - 1),
}
FLOAT_TYPES = (_T.FLOAT32, _T.FLOAT64)


@dataclass(frozen=True, slots=True)
class GGUFMetadata:
    """The checked key/value section of one GGUF file, in the order it is written.

    `arch` (the value of general.architecture, written first) is None for a file that has no
    such key, such as the later parts of a split set; `alignment` is the data alignment.
    """

    arch: str | None
    values: dict[str, GGUFValue] = field(default_factory=dict)
    alignment: int = GGUF_DEFAULT_ALIGNMENT

    def with_values(self, extra: Mapping[str, GGUFValue]) -> GGUFMetadata:
        """The same header with `extra` appended (the split keys of one part)."""
        return GGUFMetadata(self.arch, {**self.values, **extra}, self.alignment)


def check_gguf_metadata(
    metadata: Mapping[str, Any] | None, *, arch: str | None = None, where: str = "GGUF"
) -> GGUFMetadata:
    """The header for `metadata`, every key and value checked; `where` (a path) starts errors.

    general.architecture comes from `metadata`, else `arch`, else "unknown", and is written
    first; the other keys follow in the mapping's order. general.alignment, if given, must be a
    power of two and sets the data alignment.
    """
    if metadata is not None and not isinstance(metadata, Mapping):
        raise CheckpointError(
            f"{where}: metadata: expected a mapping of key -> value, got {type(metadata).__name__}"
        )
    values = {
        check_key(key, where): typed_value(key, value, where)
        for key, value in (metadata or {}).items()
    }
    chosen = _architecture(values.pop(ARCH_KEY, None), arch, where)
    alignment = _alignment(values.get(ALIGNMENT_KEY), where)
    return GGUFMetadata(chosen, values, alignment)


def check_key(key: Any, where: str) -> str:
    """`key` if it can name a GGUF metadata pair that a caller may set."""
    if not isinstance(key, str) or not key:
        raise CheckpointError(f"{where}: metadata key {key!r}: expected a non-empty string")
    if len(key.encode("utf-8", "surrogatepass")) > _MAX_KEY_BYTES:
        raise CheckpointError(f"{where}: metadata key {key[:40]!r}...: longer than 65535 bytes")
    if key.startswith(RESERVED_PREFIXES):
        raise CheckpointError(
            f"{where}: metadata key {key!r}: keys starting with {' or '.join(RESERVED_PREFIXES)} "
            "are written by the file format itself; expected another key"
        )
    return key


def _architecture(value: GGUFValue | None, arch: str | None, where: str) -> str:
    """general.architecture: the metadata's string, else `arch`; both given must agree."""
    if value is None:
        return arch or "unknown"
    if value.type != _T.STRING or not isinstance(value.value, str):
        raise CheckpointError(f"{where}: metadata key {ARCH_KEY!r}: expected a STRING value")
    if arch is not None and arch != value.value:
        raise CheckpointError(
            f"{where}: metadata key {ARCH_KEY!r} is {value.value!r} but arch is {arch!r}; "
            "expected them to agree (or only one of them)"
        )
    return value.value


def _alignment(value: GGUFValue | None, where: str) -> int:
    """The data alignment general.alignment asks for (a UINT32 power of two), else 32."""
    if value is None:
        return GGUF_DEFAULT_ALIGNMENT
    number = value.value
    if value.type != _T.UINT32 or number < 1 or number & (number - 1):
        raise CheckpointError(
            f"{where}: metadata key {ALIGNMENT_KEY!r}: expected a UINT32 power of two, "
            f"got {value.type.name} {number!r}"
        )
    return int(number)


# Typing values -------------------------------------------------------------------------------


def typed_value(key: str, value: Any, where: str = "GGUF") -> GGUFValue:
    """`value` as a checked GGUFValue with plain Python contents.

    A GGUFValue keeps its type (an ARRAY without sub_type gets the element type gguf's writer
    gives its first item: INT32 for ints). Plain values:
    bool -> BOOL; int -> UINT32 when in [0, 2**32), else INT64, else UINT64; float -> FLOAT32;
    str -> STRING; a list or tuple -> ARRAY of one element type by the same rules (ints typed by
    the range of all of them, ints mixed with floats -> FLOAT32). Nested and empty arrays are
    refused (llama.cpp reads no nested arrays; gguf's writer stores no empty ones).
    """
    try:
        if isinstance(value, GGUFValue):
            return _checked(value)
        kind = plain_type(value)
        if kind == _T.ARRAY:
            return _checked(GGUFValue(list(value), _T.ARRAY, element_type(value)))
        return _checked(GGUFValue(value, kind))
    except _Refused as err:
        raise CheckpointError(f"{where}: metadata key {key!r}: {err}") from None


class _Refused(Exception):
    """A value that is not what its GGUF type needs; the message says what was expected."""


def plain_type(value: Any) -> GGUFValueType:
    """The GGUF type the documented rules give a plain Python value."""
    if isinstance(value, bool | np.bool_):
        return _T.BOOL
    if isinstance(value, int | np.integer):
        return int_type([int(value)])
    if isinstance(value, float | np.floating):
        return _T.FLOAT32
    if isinstance(value, str | bytes):
        return _T.STRING  # gguf writes bytes as they are: a string that need not be UTF-8
    if isinstance(value, list | tuple):
        return _T.ARRAY
    raise _Refused(
        "expected a gguf.GGUFValue, str, bool, int, float or a list of them, "
        f"got {type(value).__name__}"
    )


def int_type(numbers: Sequence[int]) -> GGUFValueType:
    """UINT32 when every number fits it, else INT64, else UINT64."""
    low, high = min(numbers), max(numbers)
    for kind in (_T.UINT32, _T.INT64, _T.UINT64):
        if INT_RANGES[kind][0] <= low and high <= INT_RANGES[kind][1]:
            return kind
    raise _Refused(f"expected integers within [-2**63, 2**64), got {low if low < 0 else high}")


def element_type(items: Sequence[Any]) -> GGUFValueType:
    """The one element type of a plain list: by the rules of `plain_type`, ints by their range."""
    if not items:
        raise _Refused("expected a non-empty list (GGUF arrays are written with at least one item)")
    kinds = {plain_type(item) for item in items}
    if kinds <= set(INT_RANGES):
        return int_type([int(item) for item in items])
    if kinds <= {*INT_RANGES, _T.FLOAT32}:
        return _T.FLOAT32
    if len(kinds) == 1 and _T.ARRAY not in kinds:
        return kinds.pop()
    names = ", ".join(sorted(kind.name for kind in kinds))
    raise _Refused(f"expected list items of one type (not nested lists), got {names}")


def _shown(kind: object) -> str:
    """A type as a message shows it: a GGUFValueType by name, anything else as plain data."""
    return kind.name if isinstance(kind, GGUFValueType) else short_repr(kind)


def _checked(value: GGUFValue) -> GGUFValue:
    """`value` with its contents checked against its type and made plain Python."""
    if not isinstance(value.type, GGUFValueType):
        raise _Refused(f"expected a GGUFValueType as the type, got {_shown(value.type)}")
    if value.type != _T.ARRAY:
        if value.sub_type is not None:
            shown = _shown(value.sub_type)
            raise _Refused(f"a {value.type.name} value has no sub_type, got {shown}")
        return GGUFValue(scalar(value.value, value.type), value.type)
    items = value.value
    if not isinstance(items, list | tuple | np.ndarray):
        raise _Refused(f"expected a list for an ARRAY value, got {type(items).__name__}")
    sub = value.sub_type if value.sub_type is not None else _writer_sub_type(items)
    if not isinstance(sub, GGUFValueType) or sub == _T.ARRAY:
        raise _Refused(
            f"expected a scalar GGUFValueType as sub_type (no nested arrays), got {_shown(sub)}"
        )
    if len(items) == 0:
        raise _Refused("expected a non-empty list (GGUF arrays are written with at least one item)")
    return GGUFValue(_items(items, sub), _T.ARRAY, sub)


def _items(items: Any, kind: GGUFValueType) -> list[Any]:
    """The array's items checked as `kind`; a vocabulary's strings take one pass, not one
    call per token (a tokenizer holds hundreds of thousands)."""
    if kind == _T.STRING and all(isinstance(item, str | bytes) for item in items):
        return list(items)
    numbers = _numbers(items, kind)
    return numbers if numbers is not None else [scalar(item, kind) for item in items]


def _numbers(items: Any, kind: GGUFValueType) -> list[Any] | None:
    """A numeric array's items checked at once with numpy, or None to check one by one
    (which names the first bad item)."""
    if kind not in INT_RANGES and kind not in FLOAT_TYPES:
        return None
    try:
        array = np.asarray(items)
    except (ValueError, TypeError, OverflowError):
        return None
    if array.ndim != 1 or array.dtype.kind not in ("iu" if kind in INT_RANGES else "iuf"):
        return None
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        fits = low <= int(array.min()) and int(array.max()) <= high
        return [int(x) for x in array.tolist()] if fits else None
    values = array.astype(np.float64)
    finite = values[np.isfinite(values)]
    if kind == _T.FLOAT32 and finite.size and np.abs(finite).max() > _FLOAT32_MAX:
        return None
    return [float(x) for x in values.tolist()]


def _writer_sub_type(items: Any) -> GGUFValueType:
    """The element type gguf's own writer gives an ARRAY GGUFValue without a sub_type (ints
    are INT32 there), so that such values are written as gguf-py writes them."""
    if len(items) == 0:
        raise _Refused("expected a non-empty list (GGUF arrays are written with at least one item)")
    try:
        return GGUFValueType.get_type(items[0])
    except ValueError:
        return element_type(list(items))


def scalar(item: Any, kind: GGUFValueType) -> Any:
    """`item` as the plain Python value of the scalar GGUF type `kind`, or _Refused."""
    if kind == _T.BOOL and isinstance(item, bool | np.bool_):
        return bool(item)
    if kind == _T.STRING and isinstance(item, str | bytes):
        return item
    is_int = isinstance(item, int | np.integer) and not isinstance(item, bool | np.bool_)
    if kind in INT_RANGES and is_int:
        low, high = INT_RANGES[kind]
        if low <= int(item) <= high:
            return int(item)
        raise _Refused(f"expected a {kind.name} in [{low}, {high}], got {int(item)}")
    if kind in FLOAT_TYPES and (is_int or isinstance(item, float | np.floating)):
        number = float(item)
        if kind == _T.FLOAT32 and np.isfinite(number) and abs(number) > _FLOAT32_MAX:
            raise _Refused(f"expected a FLOAT32 within +-{_FLOAT32_MAX:.7g}, got {number!r}")
        return number
    raise _Refused(f"expected a {kind.name} value, got {type(item).__name__} {item!r:.60}")


# Reading -------------------------------------------------------------------------------------


def read_gguf_metadata(
    path: str | os.PathLike[str], *, include_split: bool = False
) -> dict[str, GGUFValue]:
    """Every key/value pair of the GGUF file `path`, in file order, with its exact type.

    The header is read with bounds (see `read_gguf_header`). Keys starting with GGUF. are
    left out, and so are split.* keys unless `include_split`; nested arrays are refused.
    Strings come back as str (bytes where they are not UTF-8).
    """
    skipped = ("GGUF.",) if include_split else RESERVED_PREFIXES
    values = read_gguf_header(path).values
    kept = {key: plain(value) for key, value in values.items() if not key.startswith(skipped)}
    for key, value in kept.items():
        if value.sub_type == _T.ARRAY:
            raise CheckpointError(f"{path}: metadata key {key!r}: nested arrays are not supported")
    return kept
