"""GGUF metadata pairs written as text, `KEY[:TYPE]=VALUE`, as the command line takes them.

TYPE is one of `METADATA_TYPES` (u8 ... f64, bool, str) or an array of one, `TYPE[]`, whose VALUE
is a JSON list. Without TYPE the value's spelling decides: true/false, an integer, a decimal
number, a JSON list, else a string; the plain-value rules of `typed_value` then give the GGUF
type. Imports gguf and the io layer only.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gguf import GGUFValue, GGUFValueType

from lazyparams.errors import CheckpointError
from lazyparams.io.gguf_metadata import check_key, typed_value
from lazyparams.io.reasons import json_reason

_T = GGUFValueType
METADATA_TYPES: dict[str, GGUFValueType] = {
    "u8": _T.UINT8,
    "i8": _T.INT8,
    "u16": _T.UINT16,
    "i16": _T.INT16,
    "u32": _T.UINT32,
    "i32": _T.INT32,
    "u64": _T.UINT64,
    "i64": _T.INT64,
    "f32": _T.FLOAT32,
    "f64": _T.FLOAT64,
    "bool": _T.BOOL,
    "str": _T.STRING,
}
_INTEGER = re.compile(r"[-+]?\d+")
_DECIMAL = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
_BOOLS = {"true": True, "false": False}
METADATA_SPELLING = (
    "KEY=VALUE or KEY:TYPE=VALUE, TYPE one of "
    f"{', '.join(METADATA_TYPES)} or an array TYPE[] whose VALUE is a JSON list"
)


def parse_metadata_item(text: str) -> tuple[str, GGUFValue]:
    """(key, checked value) of one `KEY[:TYPE]=VALUE`; CheckpointError saying what was expected.

    Examples: `llama.context_length:u32=4096`, `general.name=My model`,
    `general.tags:str[]=["a", "b"]`, `rope.eps=1e-6` (FLOAT32), `x.flag=true` (BOOL).
    """
    head, sep, raw = text.partition("=")
    if not sep:
        raise CheckpointError(f"metadata {text!r}: expected {METADATA_SPELLING}")
    key, colon, type_name = head.partition(":")
    key = check_key(key, f"metadata {text!r}")
    where = f"metadata {text!r}"
    value = _typed_text(raw, type_name.strip(), where) if colon else _inferred(raw, where)
    return key, typed_value(key, value, where)


def _typed_text(raw: str, type_name: str, where: str) -> GGUFValue:
    """VALUE read as the GGUF type TYPE names."""
    is_array = type_name.endswith("[]")
    kind = METADATA_TYPES.get(type_name.removesuffix("[]"))
    if kind is None:
        raise CheckpointError(
            f"{where}: unknown type {type_name!r}; expected one of "
            f"{', '.join(METADATA_TYPES)}, or one of them followed by []"
        )
    if not is_array:
        return GGUFValue(_scalar_text(raw, kind, where), kind)
    items = _json_list(raw, where)
    return GGUFValue(items, _T.ARRAY, kind)


def _scalar_text(raw: str, kind: GGUFValueType, where: str) -> Any:
    """A scalar VALUE as the Python value of `kind`."""
    try:
        if kind == _T.STRING:
            return raw
        if kind == _T.BOOL:
            return _BOOLS[raw.strip().lower()]
        if kind in (_T.FLOAT32, _T.FLOAT64):
            return float(raw)
        return int(raw.strip(), 0)
    except (KeyError, ValueError):
        wanted = "true or false" if kind == _T.BOOL else f"a {kind.name} number"
        raise CheckpointError(f"{where}: expected {wanted}, got {raw!r}") from None


def _json_list(raw: str, where: str) -> list[Any]:
    """VALUE as a JSON list."""
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"{where}: expected a JSON list such as [1, 2], got {raw!r} ({json_reason(err)})"
        ) from None
    if not isinstance(items, list):
        raise CheckpointError(f"{where}: expected a JSON list such as [1, 2], got {raw!r}")
    return items


def _inferred(raw: str, where: str) -> Any:
    """A VALUE without TYPE, read by its spelling."""
    if raw.lower() in _BOOLS:
        return _BOOLS[raw.lower()]
    if _INTEGER.fullmatch(raw):
        return int(raw)
    if _DECIMAL.fullmatch(raw):
        return float(raw)
    if raw.startswith("["):
        try:
            return _json_list(raw, where)
        except CheckpointError:
            raise CheckpointError(
                f"{where}: expected a JSON list such as [1, 2] (or KEY:str=VALUE for a string "
                f"that starts with '['), got {raw!r}"
            ) from None
    return raw
