"""Parsing one `@T.prim_func`: buffers, loops, blocks, iterators, regions, stores and ifs.

Loop and block variables are scoped to their statement; symbolic dims of buffer shapes belong
to the whole function. Imports `ir`, `tir` and the script's parsing helpers.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any, Literal

from lazyparams.errors import ParseError
from lazyparams.ir.dtype import is_dtype, is_int
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar, StringImm, Sub
from lazyparams.script.parse_block import BlockParts
from lazyparams.script.parse_prim import PrimParser, SymParser, dtype_arg, number
from lazyparams.script.parse_relax import func_attrs, symbol_decl
from lazyparams.script.parse_sinfo import SInfoParser
from lazyparams.script.source import Source, bind_call, show
from lazyparams.tir.nodes import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
)
from lazyparams.tir.regions import infer_regions

_LOOP_KINDS: dict[str, Literal["serial", "parallel", "vectorized", "unrolled"]] = {
    "range": "serial",
    "T.serial": "serial",
    "T.parallel": "parallel",
    "T.vectorized": "vectorized",
    "T.unroll": "unrolled",
}
_EXPECTED_STMT = (
    "expected a for loop, with T.block(...):, a buffer store (A[i] = ...) or an if statement"
)

_BLOCKS = ("T.block", "T.sblock")


class TirParser(PrimParser):
    """Builds a `PrimFunc`; scalar names resolve through loop/block scopes, then symbols."""

    def __init__(self, src: Source) -> None:
        super().__init__(src)
        self.symbols: dict[str, PrimVar] = {}
        self.dims = SymParser(src, self.symbols)
        self.buffers: dict[str, Buffer] = {}
        self.scopes: list[dict[str, PrimVar]] = []
        self.extents: dict[PrimVar, PrimExpr] = {}

    def parse(self, node: ast.FunctionDef) -> PrimFunc:
        """Step 1 the header (declarations, match_buffers, attrs), 2 params, 3 the body."""
        if node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.defaults:
            raise self.src.error(node, f"function {node.name}: expected buffer parameters only")
        handles = {a.arg for a in node.args.args if self._is_handle(a.annotation)}
        scalars = {a.arg: self._scalar(a) for a in node.args.args if self._scalar_dtype(a)}
        # the text's top-level `n = TypeVar("n")` (TVM 0.27 prints a PrimFunc's dims so too)
        self.symbols.update({name: PrimVar(name, "int64") for name in self.src.module_dims})
        self.symbols.update(scalars)
        body = list(node.body)
        attrs: dict[str, Any] = {}
        matched: dict[str, Buffer] = {}
        while body and self._header(body[0], handles, attrs, matched):
            body.pop(0)
        params = tuple(scalars.get(a.arg) or self._param(a, matched) for a in node.args.args)
        return PrimFunc(params, self.stmts(body), attrs)

    def _header(
        self, stmt: ast.stmt, handles: set[str], attrs: dict[str, Any], matched: dict[str, Buffer]
    ) -> bool:
        """Read one header statement (`n = T.int64()`, `A = T.match_buffer(h, ...)` or
        `T.func_attr({...})`); False at the first statement of the body proper."""
        if (decl := symbol_decl(self.src, stmt)) is not None:
            self.symbols[decl[0]] = decl[1]
        elif isinstance(stmt, ast.Expr) and self.src.callee(stmt.value) == "T.func_attr":
            assert isinstance(stmt.value, ast.Call)
            attrs.update(func_attrs(self.src, stmt.value, "T.func_attr"))
        elif isinstance(stmt, ast.Assign) and self.src.callee(stmt.value) == "T.match_buffer":
            self._match_buffer(stmt, handles, matched)
        else:
            return False
        return True

    def _match_buffer(
        self, stmt: ast.Assign, handles: set[str], matched: dict[str, Buffer]
    ) -> None:
        """`A = T.match_buffer(var_a, shape, dtype)`: the buffer a `T.handle` param stands for."""
        target = stmt.targets[0]
        assert isinstance(stmt.value, ast.Call)
        args = bind_call(
            self.src,
            stmt.value,
            ["param", "shape", "dtype"],
            required=["param", "shape"],
            what="T.match_buffer",
        )
        handle = args["param"]
        if not (isinstance(target, ast.Name) and len(stmt.targets) == 1):
            raise self.src.error(stmt, f"T.match_buffer: expected one name bound, got {show(stmt)}")
        if not (isinstance(handle, ast.Name) and handle.id in handles):
            raise self.src.error(
                handle, f"T.match_buffer: expected a T.handle parameter, got {show(handle)}"
            )
        if handle.id in matched:
            raise self.src.error(stmt, f"T.match_buffer: parameter {handle.id} is matched twice")
        matched[handle.id] = self._buffer(target.id, args, "T.match_buffer")

    def _scalar_dtype(self, arg: ast.arg) -> str | None:
        """`int64` for a scalar param `n: T.int64`, else None."""
        name = self.src.qualname(arg.annotation) if arg.annotation is not None else None
        return name[2:] if name and name.startswith("T.") and is_dtype(name[2:]) else None

    def _scalar(self, arg: ast.arg) -> PrimVar:
        """The PrimVar of a scalar param; an integer one, as TIR indices and extents need."""
        dtype = self._scalar_dtype(arg)
        assert dtype is not None
        if not is_int(dtype):
            raise self.src.error(
                arg,
                f"parameter {arg.arg}: expected an integer scalar such as T.int64, got T.{dtype}",
            )
        return PrimVar(arg.arg, dtype)

    def _is_handle(self, ann: ast.expr | None) -> bool:
        return ann is not None and self.src.qualname(ann) == "T.handle"

    def _param(self, arg: ast.arg, matched: dict[str, Buffer]) -> Buffer:
        """A `T.Buffer(...)` param, or a `T.handle` one through its `T.match_buffer`."""
        ann = arg.annotation
        if self._is_handle(ann):
            if arg.arg not in matched:
                raise self.src.error(
                    arg,
                    f"parameter {arg.arg}: T.handle without a T.match_buffer; expected "
                    f'{arg.arg}_buf = T.match_buffer({arg.arg}, (3, 16), "float32")',
                )
            return matched[arg.arg]
        if ann is None or self.src.callee(ann) != "T.Buffer":
            got = show(ann) if ann is not None else "no annotation"
            raise self.src.error(
                ann or arg,
                f'parameter {arg.arg}: expected T.Buffer((3, 16), "float32"), T.handle or a '
                f"scalar such as T.int64, got {got}",
            )
        assert isinstance(ann, ast.Call)
        args = bind_call(self.src, ann, ["shape", "dtype"], required=["shape"], what="T.Buffer")
        return self._buffer(arg.arg, args, "T.Buffer")

    def _buffer(self, name: str, args: dict[str, ast.expr], what: str) -> Buffer:
        """The buffer `name` of the given shape and dtype (float32 by default)."""
        if name in self.buffers:
            raise self.src.error(args["shape"], f"{what}: buffer {name} is declared twice")
        dims = args["shape"]
        if not isinstance(dims, ast.Tuple | ast.List):  # T.Buffer(16, "float32"): one dim
            dims = ast.copy_location(ast.Tuple(elts=[dims], ctx=ast.Load()), dims)
        shape = SInfoParser(self.dims).shape(dims, what)
        dtype = dtype_arg(self.src, args["dtype"], what) if "dtype" in args else "float32"
        buffer = self.buffers[name] = Buffer(name, shape, dtype)
        return buffer

    # Scalars -------------------------------------------------------------------------------

    def name(self, node: ast.Name) -> PrimExpr:
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        if node.id in self.symbols:
            return self.symbols[node.id]
        if node.id in self.buffers:
            raise self.src.error(
                node, f"buffer {node.id} used as a scalar; expected an element such as {node.id}[i]"
            )
        raise self.src.error(
            node, f"undefined name {node.id!r}; expected a loop, block or symbolic variable"
        )

    def subscript(self, node: ast.Subscript) -> PrimExpr:
        buffer, indices = self._access(node)
        return BufferLoad(buffer, tuple(self._index(buffer, i) for i in indices))

    def string(self, node: ast.Constant) -> PrimExpr:
        return StringImm(str(node.value))

    def _access(self, node: ast.Subscript) -> tuple[Buffer, list[ast.expr]]:
        """The buffer of `A[i, j]` and its index nodes, checked against the buffer's rank."""
        if not (isinstance(node.value, ast.Name) and node.value.id in self.buffers):
            raise self.src.error(node.value, f"expected a buffer parameter, got {show(node.value)}")
        buffer = self.buffers[node.value.id]
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(indices) != len(buffer.shape):
            raise self.src.error(
                node,
                f"expected {len(buffer.shape)} indices for buffer {buffer.name}, "
                f"got {len(indices)}",
            )
        return buffer, indices

    def _index(self, buffer: Buffer, node: ast.expr) -> PrimExpr:
        if isinstance(node, ast.Slice):
            raise self.src.error(node, f"expected a point index into {buffer.name}, got a slice")
        return self.expr(node)

    # Statements ----------------------------------------------------------------------------

    def stmts(self, nodes: list[ast.stmt]) -> Stmt:
        """A statement list: one statement stands alone, several (or none) form a SeqStmt."""
        parsed = [self.stmt(n) for n in nodes if not isinstance(n, ast.Pass)]
        return parsed[0] if len(parsed) == 1 else SeqStmt(tuple(parsed))

    def stmt(self, node: ast.stmt) -> Stmt:
        """One statement of a kernel body."""
        if isinstance(node, ast.For):
            return self._for(node)
        if isinstance(node, ast.With):
            return self._with(node)
        if isinstance(node, ast.If):
            orelse = self.stmts(node.orelse) if node.orelse else None
            return IfThenElse(self.expr(node.test), self.stmts(node.body), orelse)
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Subscript)
        ):
            buffer, indices = self._access(node.targets[0])
            index = tuple(self._index(buffer, i) for i in indices)
            return BufferStore(buffer, self.expr(node.value), index)
        raise self.src.error(node, f"{_EXPECTED_STMT}, got {show(node)}")

    def _for(self, node: ast.For) -> Stmt:
        if node.orelse:
            raise self.src.error(node.orelse[0], "expected a for loop without else")
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        loops = self._loop_ranges(node.iter, len(targets))
        scope: dict[str, PrimVar] = {}
        made = []
        for target, (lo, extent, kind) in zip(targets, loops, strict=True):
            if not isinstance(target, ast.Name):
                raise self.src.error(target, f"expected a loop variable name, got {show(target)}")
            var = scope[target.id] = PrimVar(
                target.id, extent.dtype if is_int(extent.dtype) else "int64"
            )
            self.extents[var] = extent
            made.append((var, lo, extent, kind))
        self.scopes.append(scope)
        body = self.stmts(node.body)
        self.scopes.pop()
        for var, lo, extent, kind in reversed(made):
            body = For(var, lo, extent, body, kind)
        return body

    def _loop_ranges(self, node: ast.expr, count: int) -> list[tuple[PrimExpr, PrimExpr, Any]]:
        """(min, extent, kind) of each loop of `range(...)`, `T.serial(...)` or `T.grid(...)`."""
        name = (
            "range"
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "range"
            else self.src.callee(node)
        )
        assert isinstance(node, ast.Call) or name is None
        if name == "T.grid":
            assert isinstance(node, ast.Call)
            if len(node.args) != count:
                raise self.src.error(
                    node,
                    f"T.grid: expected {count} extents for {count} loop variables, "
                    f"got {len(node.args)}",
                )
            return [(IntImm(0, e.dtype), e, "serial") for e in (self.expr(a) for a in node.args)]
        if name not in _LOOP_KINDS:
            raise self.src.error(
                node,
                "expected range(...), T.grid(...), T.serial(...), T.parallel(...), "
                f"T.vectorized(...) or T.unroll(...), got {show(node)}",
            )
        assert isinstance(node, ast.Call)
        if count != 1 or not 1 <= len(node.args) <= 2 or node.keywords:
            raise self.src.error(
                node,
                f"{name}: expected one loop variable and (extent) or (min, max), got {show(node)}",
            )
        if len(node.args) == 1:
            extent = self.expr(node.args[0])
            return [(IntImm(0, extent.dtype), extent, _LOOP_KINDS[name])]
        lo, extent = self.span(node.args[0], node.args[1])
        return [(lo, extent, _LOOP_KINDS[name])]

    def span(self, lower: ast.expr, upper: ast.expr) -> tuple[PrimExpr, PrimExpr]:
        """(min, extent) of `lower:upper`.

        `0:e` and `m:m + e` give extent `e` itself rather than a difference, so printed ranges
        read back as the same tree.
        """
        lo_value, up_value = number(lower), number(upper)
        lo = self.expr(lower)
        if isinstance(lo_value, int) and not isinstance(lo_value, bool):
            if isinstance(up_value, int):
                return lo, IntImm(up_value - lo_value, lo.dtype)
            if lo_value == 0:
                return lo, self.expr(upper)
        if (
            isinstance(upper, ast.BinOp)
            and isinstance(upper.op, ast.Add)
            and ast.dump(upper.left) == ast.dump(lower)
        ):
            return lo, self.expr(upper.right)
        return lo, Sub(self.expr(upper), lo)

    def _with(self, node: ast.With) -> Stmt:
        item = node.items[0]
        name = self.src.callee(item.context_expr)
        # T.sblock is TVM 0.27's spelling of T.block
        if len(node.items) != 1 or item.optional_vars is not None or name not in _BLOCKS:
            hint = " (T.init() is only valid directly inside a block)" if name == "T.init" else ""
            raise self.src.error(
                item.context_expr,
                f'expected with T.block("name"):{hint}, got {show(item.context_expr)}',
            )
        assert isinstance(item.context_expr, ast.Call)
        args = bind_call(self.src, item.context_expr, ["name"], what=name)
        label = args.get("name")
        if label is not None and not (
            isinstance(label, ast.Constant) and isinstance(label.value, str)
        ):
            raise self.src.error(label, f"T.block: expected a string name, got {show(label)}")
        self.scopes.append({})
        try:
            return self._block_body(str(label.value) if label is not None else "", node.body)
        finally:
            self.scopes.pop()

    def _block_body(self, label: str, body: list[ast.stmt]) -> Block:
        parts = BlockParts(self)
        rest = [s for s in body if not parts.take(s)]
        block = Block(
            label,
            tuple(parts.iter_vars),
            parts.reads or (),
            parts.writes or (),
            self.stmts(rest),
            parts.init,
        )
        if parts.reads is not None and parts.writes is not None:
            return block
        try:  # as TVMScript: a region left out is the union of the body's accesses
            reads, writes = infer_regions(block)
        except ParseError as err:
            raise self.src.error(body[0], err.reason) from None
        return replace(
            block,
            reads=reads if parts.reads is None else parts.reads,
            writes=writes if parts.writes is None else parts.writes,
        )

    def region(self, node: ast.expr) -> BufferRegion:
        """`A[i, 0:16]` in `T.reads`/`T.writes`: point indices and slices."""
        if not isinstance(node, ast.Subscript):
            raise self.src.error(
                node, f"expected a buffer region such as A[i, 0:16], got {show(node)}"
            )
        buffer, indices = self._access(node)
        ranges = [self._range(dim, index) for dim, index in zip(buffer.shape, indices, strict=True)]
        return BufferRegion(buffer, tuple(ranges))

    def _range(self, dim: PrimExpr, index: ast.expr) -> Range:
        """One dim of a region: `i` (a point), `m:e`, `:e`, `m:` or `:` (the whole dim)."""
        if not isinstance(index, ast.Slice):
            return Range(self.expr(index), IntImm(1))
        if index.step is not None:
            raise self.src.error(index, f"expected a slice without a step, got {show(index)}")
        lower = index.lower or ast.copy_location(ast.Constant(0), index)
        if index.upper is not None:
            return Range(*self.span(lower, index.upper))
        lo = self.expr(lower)
        return Range(lo, dim if index.lower is None else Sub(dim, lo))


def parse_prim_func(src: Source, node: ast.FunctionDef) -> PrimFunc:
    """The PrimFunc a decorated `def` spells."""
    return TirParser(src).parse(node)
