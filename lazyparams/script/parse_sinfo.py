"""Parsing struct info: `R.Tensor`, `R.Tuple`, `R.Object`, `R.Prim`, `R.Shape`, `R.Callable`.

Used for annotations, `out_sinfo`/`sinfo_args` and `R.match_cast`. Dims go through the
caller's prim parser, so signatures and bodies share one set of symbolic vars per function.
Imports `ir` and the script's parsing helpers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from lazyparams.ir.dtype import is_dtype
from lazyparams.ir.prim import PrimExpr
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.script.parse_prim import PrimParser, dtype_arg
from lazyparams.script.source import Source, bind_call, show

EXPECTED = (
    "expected R.Tensor(...), R.Tuple(...), R.Object, R.Prim(...), R.Shape(...), R.Callable(...) "
    "or a dtype such as T.int64"
)


class SInfoParser:
    """Reads struct info; symbolic dims are resolved by `dims`."""

    def __init__(self, dims: PrimParser) -> None:
        self.dims = dims
        self.src = dims.src
        self._forms: dict[str, Callable[[ast.Call], StructInfo]] = {
            "R.Tensor": self._tensor,
            "R.Tuple": self._tuple,
            "R.Object": self._object,
            "R.Any": self._object,
            "R.Prim": self._prim,
            "R.Shape": self._shape,
            "R.Callable": self._callable,
        }

    def parse(self, node: ast.expr) -> StructInfo:
        """The struct info `node` spells; a bare `R.Tensor` or `R.Tuple` has no arguments, and
        a bare dtype such as `T.int64` (TVM's spelling of a prim param) is `R.Prim("int64")`."""
        func = node.func if isinstance(node, ast.Call) else node
        name = self.src.qualname(func) or ""
        if name.startswith("T.") and is_dtype(name[2:]) and not isinstance(node, ast.Call):
            return PrimStructInfo(name[2:])
        form = self._forms.get(name)
        if form is None:
            raise self.src.error(node, f"{EXPECTED}, got {show(node)}")
        if not isinstance(node, ast.Call):
            node = ast.copy_location(ast.Call(func=node, args=[], keywords=[]), node)
        return form(node)

    def parse_list(self, node: ast.expr) -> tuple[StructInfo, ...]:
        """One struct info, or a list or tuple of them (`out_sinfo=[...]`, `sinfo_args=(...)`)."""
        if isinstance(node, ast.List | ast.Tuple):
            return tuple(self.parse(e) for e in node.elts)
        return (self.parse(node),)

    def shape(self, node: ast.AST, what: str) -> tuple[PrimExpr, ...]:
        """A tuple or list of dims: ints, symbolic names, "strings" or expressions."""
        if not isinstance(node, ast.Tuple | ast.List):
            raise self.src.error(
                node, f"{what}: expected a tuple of dims such as (3, n), got {show(node)}"
            )
        return tuple(self.dims.expr(e) for e in node.elts)

    def _tensor(self, node: ast.Call) -> StructInfo:
        args = bind_call(self.src, node, ["shape", "dtype", "ndim"], what="R.Tensor")
        shape_node, dtype_node = args.get("shape"), args.get("dtype")
        if _is_dtype_literal(shape_node) and dtype_node is None:
            shape_node, dtype_node = None, shape_node  # R.Tensor("float32", ndim=2)
        shape = None
        if shape_node is not None and not _is_none(shape_node):
            shape = self.shape(shape_node, "R.Tensor")
        dtype = (
            ""
            if dtype_node is None or _is_none(dtype_node)
            else dtype_arg(self.src, dtype_node, "R.Tensor")
        )
        ndim = self._int(args.get("ndim"), "R.Tensor ndim", -1)
        if shape is not None and ndim not in (-1, len(shape)):
            raise self.src.error(
                node,
                f"R.Tensor: expected ndim={len(shape)} for a shape of {len(shape)} dims, "
                f"got {ndim}",
            )
        return TensorStructInfo(shape, dtype, ndim)

    def _tuple(self, node: ast.Call) -> StructInfo:
        if node.keywords:
            raise self.src.error(
                node.keywords[0], "R.Tuple: expected field struct info only, got a keyword"
            )
        elts = node.args
        if len(elts) == 1 and isinstance(elts[0], ast.List):
            elts = elts[0].elts
        return TupleStructInfo(tuple(self.parse(e) for e in elts))

    def _object(self, node: ast.Call) -> StructInfo:
        bind_call(self.src, node, [], what="R.Object")
        return ObjectStructInfo()

    def _prim(self, node: ast.Call) -> StructInfo:
        args = bind_call(self.src, node, ["dtype", "value"], what="R.Prim")
        value = self.dims.expr(args["value"]) if "value" in args else None
        if "dtype" in args:
            dtype = dtype_arg(self.src, args["dtype"], "R.Prim")
        elif value is not None:
            dtype = value.dtype
        else:
            raise self.src.error(node, 'R.Prim: expected a dtype such as R.Prim("int64"), got none')
        return PrimStructInfo(dtype, value)

    def _shape(self, node: ast.Call) -> StructInfo:
        args = bind_call(self.src, node, ["values", "ndim"], what="R.Shape")
        values = args.get("values")
        if values is not None and not _is_none(values):
            return ShapeStructInfo(self.shape(values, "R.Shape"))
        return ShapeStructInfo(None, self._int(args.get("ndim"), "R.Shape ndim", -1))

    def _callable(self, node: ast.Call) -> StructInfo:
        names = ["params", "ret", "purity"]
        args = bind_call(self.src, node, names, required=["ret"], what="R.Callable")
        params_node = args.get("params")
        params = None
        if params_node is not None and not _is_none(params_node):
            if not isinstance(params_node, ast.List | ast.Tuple):
                raise self.src.error(
                    params_node,
                    "R.Callable: expected a list of parameter struct info, "
                    f"got {show(params_node)}",
                )
            params = tuple(self.parse(p) for p in params_node.elts)
        purity = bool_arg(self.src, args.get("purity"), "R.Callable purity", True)
        return FuncStructInfo(params, self.parse(args["ret"]), purity)

    def _int(self, node: ast.AST | None, what: str, default: int) -> int:
        if node is None:
            return default
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self._int(node.operand, what, default)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        raise self.src.error(node, f"{what}: expected an int, got {show(node)}")


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_dtype_literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and is_dtype(node.value)


def bool_arg(src: Source, node: ast.AST | None, what: str, default: bool) -> bool:
    """A True/False literal argument, or `default` when it was left out."""
    if node is None:
        return default
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    raise src.error(node, f"{what}: expected True or False, got {show(node)}")
