"""Element dtypes: the one table every layer reads (name, width, which library holds the type).

Names are Relax's spelling ("float32", "bfloat16", "int4", ...); GGML's block types are dtypes
too, in `block_types`. numpy and ml_dtypes supply the in-memory types, each imported on first
need: naming, sizing and planning need only the widths. The IR and the checkpoint formats wrap
these in their own errors. Imports nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class ElementType:
    """One element dtype: its width in bits, and whether ml_dtypes (not numpy) supplies it,
    which also means numpy's own `.npy` header cannot spell it."""

    name: str
    bits: int
    extension: bool = False

    @property
    def itemsize(self) -> int:
        """Bytes one element occupies in memory (int4 and bool take a whole byte each)."""
        return max(self.bits // 8, 1)


def _table(*rows: tuple[str, int, bool]) -> dict[str, ElementType]:
    return {name: ElementType(name, bits, extension) for name, bits, extension in rows}


ELEMENT_TYPES: dict[str, ElementType] = _table(
    # name, bits, from ml_dtypes
    ("float32", 32, False),
    ("float16", 16, False),
    ("float64", 64, False),
    ("bfloat16", 16, True),
    ("float8_e4m3fn", 8, True),
    ("float8_e5m2", 8, True),
    ("int4", 4, True),
    ("int8", 8, False),
    ("int16", 16, False),
    ("int32", 32, False),
    ("int64", 64, False),
    ("uint8", 8, False),
    ("bool", 8, False),
    ("uint16", 16, False),
    ("uint32", 32, False),
    ("uint64", 64, False),
)
"""Every element dtype, the IR's common ones first (the block types are `BLOCK_TYPES`)."""

EXTENSION_DTYPES: frozenset[str] = frozenset(n for n, t in ELEMENT_TYPES.items() if t.extension)

ALIASES: dict[str, str] = {
    "float8_e4m3": "float8_e4m3fn",
    "e4m3_float8": "float8_e4m3fn",
    "e5m2_float8": "float8_e5m2",
}
"""Other spellings of element dtypes, mapped to the table's."""

# numpy's types by name and names by type, filled on first need; ml_dtypes' types join them
# later still, since importing ml_dtypes costs more than the rest of the start-up
_TYPES: dict[str, np.dtype[np.generic]] = {}
_NAMES: dict[np.dtype[np.generic], str] = {}


def _load(extension: bool) -> dict[str, np.dtype[np.generic]]:
    """The numpy types of the table, ml_dtypes' ones too when `extension` (imported once)."""
    if not _TYPES:
        import numpy as np

        _add({n: np.dtype(n) for n, t in ELEMENT_TYPES.items() if not t.extension})
    if extension and "bfloat16" not in _TYPES:
        import ml_dtypes
        import numpy as np

        _add({n: np.dtype(getattr(ml_dtypes, n)) for n in sorted(EXTENSION_DTYPES)})
    return _TYPES


def _add(types: dict[str, np.dtype[np.generic]]) -> None:
    _TYPES.update(types)
    _NAMES.update({dtype: name for name, dtype in types.items()})


def numpy_type(name: str) -> np.dtype[np.generic] | None:
    """The numpy dtype holding element dtype `name` (table spelling), or None if none."""
    element = ELEMENT_TYPES.get(name)
    return None if element is None else _load(element.extension)[name]


def name_of(dtype: np.dtype[np.generic]) -> str | None:
    """The element dtype name of a numpy dtype (any byte order), or None when it has none."""
    native = dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype
    _load(extension=False)
    if native not in _NAMES:
        _load(extension=True)
    return _NAMES.get(native)
