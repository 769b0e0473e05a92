"""Printing PrimFuncs: buffer signature, loops (nests as `T.grid`), blocks, stores and ifs.

Loop and block variables are named per scope, so sibling loops may both be `i`. Importing
`lazyparams.tir` registers these printers with the ir printer core. Imports `ir` and `tir`.
"""

from __future__ import annotations

from lazyparams.errors import LazyParamsError
from lazyparams.ir.expr import PRIVATE, BaseFunc
from lazyparams.ir.prim import Add, IntImm, PrimExpr, PrimVar
from lazyparams.ir.print_prim import (
    PRIM_NODE_PRINTERS,
    Names,
    PrimPrinter,
    prim_vars,
    quote,
    tuple_text,
    walk,
)
from lazyparams.ir.print_text import INDENT, attrs_lines, wrapped
from lazyparams.ir.printer import FUNCTION_PRINTERS
from lazyparams.ir.spelling import SEED, Spelling
from lazyparams.tir.nodes import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
)

_LOOP_SPELLING = {
    "serial": "range",
    "parallel": "T.parallel",
    "vectorized": "T.vectorized",
    "unrolled": "T.unroll",
}


class TirPrinter:
    """Prints one PrimFunc as the lines of a `def` (without module indentation)."""

    def __init__(self, name: str, func: PrimFunc, spelling: Spelling = SEED) -> None:
        self.name, self.func, self.spelling = name, func, spelling
        self.names = Names()
        self.prim = PrimPrinter(self.names)
        self.lines: list[str] = []
        self.loop_extents: dict[PrimVar, PrimExpr] = {}

    def print(self) -> list[str]:
        """Step 1 names, 2 header, 3 declarations and attrs, 4 body."""
        func = self.func
        bound = {n.loop_var for n in walk(func.body) if isinstance(n, For)}
        bound |= {n.var for n in walk(func.body) if isinstance(n, IterVar)}
        scalars = {p for p in func.params if isinstance(p, PrimVar)}
        symbols = prim_vars(func, bound | scalars)
        for var in symbols:
            self.names.define(var, var.name)
        params = [self._param(p) for p in func.params]
        decorator = self.spelling.prim_func
        if func.attrs.get(PRIVATE) is True:
            head, _, options = decorator.partition("(")
            decorator = f"{head}(private=True{', ' + options if options else ')'}"
        attrs = {k: v for k, v in func.attrs.items() if k != PRIVATE}
        self.lines += [decorator, *wrapped(f"def {self.name}(", params, "):", "")]
        self.lines += [f"{INDENT}{self.names[v]} = T.{v.dtype}()" for v in symbols]
        self.lines += [INDENT + line for line in self._matched_buffers()]
        self.lines += [INDENT + line for line in attrs_lines("T.func_attr", attrs, self.prim)]
        self.stmt(func.body, 1)
        return self.lines

    def _param(self, param: Buffer | PrimVar) -> str:
        """`A: T.Buffer((3,), "float32")`, or `n: T.int64` for a scalar param."""
        if isinstance(param, PrimVar):
            return f"{self.names.define(param, param.name)}: T.{param.dtype}"
        if self._as_handle(param):
            return f"var_{self.names.define(param, param.name)}: T.handle"
        return (
            f"{self.names.define(param, param.name)}: {self._buffer_type(param.shape, param.dtype)}"
        )

    def _as_handle(self, param: Buffer | PrimVar) -> bool:
        symbolic = not all(_is_plain_int(d) for d in getattr(param, "shape", ()))
        return self.spelling.buffer_handles and isinstance(param, Buffer) and symbolic

    def _matched_buffers(self) -> list[str]:
        """`A = T.match_buffer(var_A, (n, 4), "float32")` for each buffer passed as a handle."""
        lines = []
        for param in self.func.params:
            if isinstance(param, Buffer) and self._as_handle(param):
                shape = tuple_text([self.prim(d) for d in param.shape])
                name = self.names[param]
                lines.append(f"{name} = T.match_buffer(var_{name}, {shape}, {quote(param.dtype)})")
        return lines

    def _buffer_type(self, shape: tuple[PrimExpr, ...], dtype: str) -> str:
        dims = [self.prim(d) if _is_plain_int(d) else quote(self.prim(d)) for d in shape]
        return f"T.Buffer({tuple_text(dims)}, {quote(dtype)})"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def stmt(self, stmt: Stmt, depth: int) -> None:
        """Print one statement at indentation `depth`."""
        if isinstance(stmt, SeqStmt):
            for s in stmt.stmts:
                self.stmt(s, depth)
            if not stmt.stmts:
                self.emit(depth, "pass")
        elif isinstance(stmt, For):
            self._for(stmt, depth)
        elif isinstance(stmt, Block):
            with self.names.scope():
                self._block(stmt, depth)
        elif isinstance(stmt, BufferStore):
            target = f"{self.names[stmt.buffer]}[{self.prim.indices(stmt.indices)}]"
            self.emit(depth, f"{target} = {self.prim(stmt.value)}")
        elif isinstance(stmt, IfThenElse):
            self._if(stmt, depth, "if")
        else:
            raise LazyParamsError(
                f"cannot print TIR statement {type(stmt).__name__}; expected a loop, block, "
                "store, if or statement list"
            )

    def _for(self, loop: For, depth: int) -> None:
        nest = [loop]
        while _grid_loop(nest[-1]) and _grid_loop(nest[-1].body):
            nest.append(nest[-1].body)  # type: ignore[arg-type]
        with self.names.scope():
            if len(nest) > 1:
                extents = ", ".join(self.prim(n.extent) for n in nest)
                header = f"T.grid({extents})"
            else:
                header = f"{_LOOP_SPELLING[loop.kind]}({self._range(loop.min, loop.extent)})"
            for n in nest:
                self.loop_extents[n.loop_var] = n.extent
            names = ", ".join(self.names.define(n.loop_var, n.loop_var.name) for n in nest)
            self.emit(depth, f"for {names} in {header}:")
            self.stmt(nest[-1].body, depth + 1)

    def _range(self, lo: PrimExpr, extent: PrimExpr) -> str:
        """`e` for [0, e), else `m, m + e` (which the parser reads back as min m, extent e)."""
        if lo == IntImm(0, extent.dtype):
            return self.prim(extent)
        return f"{self.prim(lo)}, {self._upper(lo, extent)}"

    def _upper(self, lo: PrimExpr, extent: PrimExpr) -> str:
        """The end of a range starting at `lo`, spelled as the parser's `span` reads it."""
        if _is_plain_int(lo) and _is_plain_int(extent):
            assert isinstance(lo, IntImm) and isinstance(extent, IntImm)
            return str(lo.value + extent.value)
        if lo == IntImm(0):
            return self.prim(extent)
        return self.prim(Add(lo, extent))

    def _if(self, stmt: IfThenElse, depth: int, keyword: str) -> None:
        self.emit(depth, f"{keyword} {self.prim(stmt.condition)}:")
        self.stmt(stmt.then_case, depth + 1)
        if isinstance(stmt.else_case, IfThenElse):
            self._if(stmt.else_case, depth, "elif")
        elif stmt.else_case is not None:
            self.emit(depth, "else:")
            self.stmt(stmt.else_case, depth + 1)

    def _block(self, block: Block, depth: int) -> None:
        self.emit(depth, f"with {self.spelling.block}({quote(block.name)}):")
        inner = depth + 1
        for line in self._iter_vars(block.iter_vars):
            self.emit(inner, line)
        for call, regions in (("T.reads", block.reads), ("T.writes", block.writes)):
            if regions or self.spelling.empty_regions:
                self.emit(inner, f"{call}({', '.join(self._region(r) for r in regions)})")
        if block.init is not None:
            self.emit(inner, "with T.init():")
            self.stmt(block.init, inner + 1)
        self.stmt(block.body, inner)

    def _iter_vars(self, iter_vars: tuple[IterVar, ...]) -> list[str]:
        """One `T.axis.remap` if every iterator binds a loop var over its extent, else one each."""
        values = [self.prim(iv.value) for iv in iter_vars]
        if iter_vars and all(self._remappable(iv) for iv in iter_vars):
            names = ", ".join(self.names.define(iv.var, iv.var.name) for iv in iter_vars)
            kinds = "".join(iv.kind for iv in iter_vars)
            return [f"{names} = T.axis.remap({quote(kinds)}, [{', '.join(values)}])"]
        lines = []
        for iv, value in zip(iter_vars, values, strict=True):
            axis = "spatial" if iv.kind == "S" else "reduce"
            extent = self.prim(iv.extent)
            lines.append(
                f"{self.names.define(iv.var, iv.var.name)} = T.axis.{axis}({extent}, {value})"
            )
        return lines

    def _remappable(self, iv: IterVar) -> bool:
        value = iv.value
        return (
            isinstance(value, PrimVar)
            and self.loop_extents.get(value) == iv.extent
            and iv.var.dtype == value.dtype
        )

    def _region(self, region: BufferRegion) -> str:
        """`A[i, 0:4]`; a 0-d buffer's whole region is `A[()]`, as its loads are spelled."""
        ranges = ", ".join(self._range_text(r) for r in region.region)
        return f"{self.names[region.buffer]}[{ranges or '()'}]"

    def _range_text(self, r: Range) -> str:
        if r.extent == IntImm(1):
            return self.prim(r.min)
        return f"{self.prim(r.min)}:{self._upper(r.min, r.extent)}"


def _is_plain_int(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.dtype == "int64"


def _grid_loop(stmt: Stmt) -> bool:
    """A loop `T.grid` can spell: serial, from 0."""
    return (
        isinstance(stmt, For) and stmt.kind == "serial" and stmt.min == IntImm(0, stmt.extent.dtype)
    )


def _print_prim_func(name: str, func: BaseFunc, spelling: Spelling) -> list[str]:
    assert isinstance(func, PrimFunc)
    return TirPrinter(name, func, spelling).print()


def _print_buffer_load(prim: PrimPrinter, load: BufferLoad) -> str:
    return f"{prim.names[load.buffer]}[{prim.indices(load.indices)}]"


FUNCTION_PRINTERS[PrimFunc] = _print_prim_func
PRIM_NODE_PRINTERS[BufferLoad] = _print_buffer_load
