"""How structural equality and hashing walk IR trees, shared by both.

Values are dispatched by kind (scalar, sequence, mapping, array, module, node); each dataclass
node class gets a cached plan of its fields and the binding context each is met in; leaf values
get exact, hashable keys. Imports numpy and the other `ir` modules only.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lazyparams.errors import LazyParamsError
from lazyparams.ir.module import IRModule
from lazyparams.ir.struct_info import ObjectStructInfo

if TYPE_CHECKING:
    import numpy as np

# Binding contexts a value is met in. USE: a reference. DEF: a var is defined here (its own
# fields, such as its struct info, are references). DEF_SIG: a var is defined here and symbolic
# dims first met in its fields are defined too. SIG: inside such a defining signature.
USE, DEF, DEF_SIG, SIG = 0, 1, 2, 3

DEFINITION_POINTS: dict[tuple[str, str], int] = {
    ("Function", "params"): DEF_SIG,
    ("VarBinding", "var"): DEF,
    ("MatchCast", "var"): DEF_SIG,
    ("MatchCast", "struct_info"): SIG,
    ("For", "loop_var"): DEF,
    ("IterVar", "var"): DEF,
    ("PrimFunc", "params"): DEF_SIG,
}
"""(node class, field) -> the context its value is defined in; class names, not classes, so
TIR nodes are covered without this layer importing `tir`."""

VAR_CLASSES = {"Var", "DataflowVar", "PrimVar", "Buffer"}
"""Nodes compared by binding: equal when bound at corresponding points, not by their fields."""

IGNORED = {"name_hint", "name"}
"""Fields of the var-like nodes that are only names, and so never compared."""

_OBJECT = ObjectStructInfo()
_NUMBERS = (int, float, str)

# Kinds of value the walk dispatches on, decided once per type (isinstance on ABCs is slow).
SCALAR, SEQUENCE, MAPPING, ARRAY, MODULE, NODE = range(6)
_KINDS: dict[type, int] = {
    **dict.fromkeys((type(None), bool, int, float, str, bytes), SCALAR),
    tuple: SEQUENCE,
    list: SEQUENCE,
    IRModule: MODULE,
}


def kind_of(cls: type) -> int:
    """The dispatch kind of a type (subclasses of builtins included), cached."""
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _numpy_kind(cls)
        if kind is None:
            kind = NODE
            for base, base_kind in ((Mapping, MAPPING), (tuple, SEQUENCE), (_NUMBERS, SCALAR)):
                if issubclass(cls, base):
                    kind = base_kind
                    break
        _KINDS[cls] = kind
    return kind


Path = tuple[Any, ...] | None
"""A path from the root as a linked list `(parent, step)`; a step is a field name (str), an
index (int) or a key (a 1-tuple). Only rendered into text when a difference is reported."""


@dataclass(frozen=True, slots=True)
class NodePlan:
    """How to walk one node class: whether it is var-like, and its fields with their contexts."""

    is_var: bool
    fields: tuple[tuple[str, int], ...]


_PLANS: dict[type, NodePlan] = {}


def node_plan(cls: type) -> NodePlan:
    """The cached walk plan of a dataclass node type; -1 means "inherit the context"."""
    plan = _PLANS.get(cls)
    if plan is None:
        if not dataclasses.is_dataclass(cls):
            raise LazyParamsError(
                "structural comparison: expected an IR node, an IRModule or an attribute value "
                f"(number, string, tuple, list, dict, None), got {cls.__name__}"
            )
        is_var = cls.__name__ in VAR_CLASSES
        names = [f.name for f in dataclasses.fields(cls) if not (is_var and f.name in IGNORED)]
        ctxs = [DEFINITION_POINTS.get((cls.__name__, n), -1) for n in names]
        plan = _PLANS[cls] = NodePlan(is_var, tuple(zip(names, ctxs, strict=True)))
    return plan


def field_value(node: Any, name: str) -> Any:
    """A field's value; a var without struct info is treated as `R.Object`, as inference does."""
    value = getattr(node, name)
    if value is None and name == "struct_info":
        return _OBJECT
    return value


def child_ctx(own: int, ctx: int) -> int:
    """Context of a node's field: its definition-point context, else SIG propagates, else USE."""
    if own >= 0:
        return own
    return SIG if ctx == SIG else USE


def var_fields_ctx(ctx: int) -> int:
    """Context of a var's own fields: dims in a defining signature are defined there."""
    return SIG if ctx in (DEF_SIG, SIG) else USE


def _numpy_kind(cls: type) -> int | None:
    """ARRAY for numpy's arrays, SCALAR for its scalars, None for other types. numpy is not
    imported for it: its types exist only once it has been."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if cls is np.ndarray:
        return ARRAY
    return SCALAR if issubclass(cls, np.generic) else None


def is_array(value: object) -> bool:
    """Whether `value` is a numpy array (without importing numpy)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def scalar_key(value: Any) -> tuple[str, Any]:
    """An exact, hashable key of a leaf value: floats by bits (so -0.0 != 0.0, NaN == NaN)."""
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


def leaf_key(value: Any) -> tuple[str, Any]:
    """The key of a scalar leaf; numpy scalars count as the Python numbers they hold."""
    np = sys.modules.get("numpy")
    numpy_scalar = np is not None and isinstance(value, np.generic)
    return scalar_key(value.item() if numpy_scalar else value)


def array_key(array: np.ndarray[Any, Any]) -> tuple[str, tuple[int, ...]]:
    """What must agree before two constants' bytes are compared: dtype and shape."""
    return (array.dtype.str, array.shape)


def array_bytes(array: np.ndarray[Any, Any]) -> bytes:
    """A constant's data in C order, for comparing and hashing."""
    import numpy as np

    return np.ascontiguousarray(array).tobytes()
