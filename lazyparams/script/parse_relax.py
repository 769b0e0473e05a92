"""Parsing one `@R.function`: signature, symbolic-dim declarations, bindings, blocks, return.

Bindings inside `with R.dataflow():` bind DataflowVars except the names listed in
`R.output(...)`; an unannotated binding gets the struct info inferred from its value.
Imports `ir`, `op` and the script's parsing helpers.
"""

from __future__ import annotations

import ast
from typing import Any

from lazyparams.ir.dtype import is_dtype, is_int
from lazyparams.ir.expr import (
    Binding,
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Function,
    MatchCast,
    SeqExpr,
    Var,
    VarBinding,
)
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import PrimStructInfo
from lazyparams.script.parse_if import parse_if
from lazyparams.script.parse_prim import literal
from lazyparams.script.parse_relax_expr import ModuleContext, RelaxExprParser
from lazyparams.script.source import Source, bind_call, show

_EXPECTED_STMT = (
    "expected a binding (x = ...), with R.dataflow():, if/else, R.func_attr({...}), cls = Module "
    "or return"
)


def symbol_decl(src: Source, stmt: ast.stmt) -> tuple[str, PrimVar] | None:
    """`n = T.int64()`: the declaration of a symbolic var, or None for any other statement."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target, value = stmt.targets[0], stmt.value
    name = src.callee(value)
    if not (isinstance(target, ast.Name) and name and name.startswith("T.")):
        return None
    if not is_dtype(name[2:]):
        return None
    assert isinstance(value, ast.Call)
    if value.args or value.keywords or not is_int(name[2:]):
        raise src.error(
            value,
            f"expected a symbolic var declaration such as {target.id} = T.int64(), "
            f"got {show(value)}",
        )
    return target.id, PrimVar(target.id, name[2:])


def func_attrs(src: Source, call: ast.Call, what: str) -> dict[str, Any]:
    """The dict literal of `R.func_attr({...})` / `T.func_attr({...})`."""
    args = bind_call(src, call, ["attrs"], required=["attrs"], what=what)
    attrs = literal(src, args["attrs"], what)
    if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
        raise src.error(
            args["attrs"],
            f'{what}: expected a dict with string keys such as {{"num_input": 1}}, '
            f"got {show(args['attrs'])}",
        )
    return attrs


class FunctionParser(RelaxExprParser):
    """Builds a Relax `Function` from a `def` decorated with `R.function`."""

    def __init__(self, src: Source, module: ModuleContext | None) -> None:
        super().__init__(src, module)
        self.blocks: list[BindingBlock] = []
        self.pending: list[Binding] = []
        self.attrs: dict[str, Any] = {}

    def parse(self, node: ast.FunctionDef, is_pure: bool) -> Function:
        """Step 1 declarations, 2 signature, 3 body statements, 4 the returned expression."""
        body = self._hoist_declarations(node.body)
        params = tuple(self._param(a) for a in self._args(node))
        ret = self.sinfo.parse(node.returns) if node.returns is not None else None
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            at = body[-1] if body else node
            raise self.src.error(
                at, f"function {node.name}: expected return <value> as the last statement"
            )
        for stmt in body[:-1]:
            self._statement(stmt)
        self._flush()
        result = self.expr(body[-1].value)
        if ret is None:
            ret = self.checked(body[-1], lambda: struct_info_of(result))
        return Function(params, SeqExpr(tuple(self.blocks), result), ret, is_pure, self.attrs)

    def _hoist_declarations(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        """Declare the text's top-level `TypeVar`s and every `n = T.int64()` of the function's
        top level, before the params are read (TVM prints them after `R.func_attr` and
        `cls = ...` too); the rest of the body."""
        body = []
        for name in self.src.module_dims:
            self.symbols[name] = PrimVar(name, "int64")
        for stmt in statements:
            decl = symbol_decl(self.src, stmt)
            if decl is None:
                body.append(stmt)
            else:
                self.symbols[decl[0]] = decl[1]
        return body

    def _args(self, node: ast.FunctionDef) -> list[ast.arg]:
        a = node.args
        extra = a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults
        if extra:
            raise self.src.error(
                node,
                f"function {node.name}: expected plain parameters (x: R.Tensor(...)), "
                "got defaults, * or **",
            )
        return list(a.args)

    def _param(self, arg: ast.arg) -> Var:
        if arg.annotation is None:
            raise self.src.error(
                arg,
                f"parameter {arg.arg}: expected a struct info annotation such as "
                f'{arg.arg}: R.Tensor((3,), "float32")',
            )
        if arg.arg in self.vars:
            raise self.src.error(
                arg, f"parameter {arg.arg}: expected unique parameter names, got a repeat"
            )
        sinfo = self._named_prim(arg.arg, arg.annotation) or self.sinfo.parse(arg.annotation)
        var = self.vars[arg.arg] = Var(arg.arg, sinfo)
        return var

    def _named_prim(self, name: str, annotation: ast.expr) -> PrimStructInfo | None:
        """`extent: T.int64`, a param or binding of a bare integer dtype whose name is no declared
        symbolic var: TVM's print of a prim value that defines the symbolic var of its own name
        (`R.Prim(value=extent)`), which later shapes such as `R.Tensor((extent,))` use."""
        name_of = self.src.qualname(annotation) or ""
        dtype = name_of[2:]
        if (
            not (name_of.startswith("T.") and is_dtype(dtype) and is_int(dtype))
            or name in self.symbols
        ):
            return None
        self.symbols[name] = PrimVar(name, dtype)
        return PrimStructInfo(dtype, self.symbols[name])

    # Statements ----------------------------------------------------------------------------

    def _statement(self, stmt: ast.stmt, outputs: set[str] | None = None) -> None:
        """One statement; `outputs` is set inside a dataflow block (the R.output names)."""
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            self._assign(stmt, outputs)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._expr_statement(stmt.value, outputs)
        elif isinstance(stmt, ast.With) and outputs is None:
            self._dataflow(stmt)
        elif isinstance(stmt, ast.If):
            parse_if(self, stmt, outputs)
        elif not isinstance(stmt, ast.Pass):
            raise self.src.error(stmt, f"{_EXPECTED_STMT}, got {show(stmt)}")

    def _assign(self, stmt: ast.Assign | ast.AnnAssign, outputs: set[str] | None) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        target = targets[0]
        if len(targets) != 1 or not isinstance(target, ast.Name) or stmt.value is None:
            raise self.src.error(
                stmt, f"expected a binding to one name (x = ...), got {show(stmt)}"
            )
        if symbol_decl(self.src, stmt) is not None:
            raise self.src.error(
                stmt,
                f"expected symbolic var declarations ({show(stmt)}) at the function's top level, "
                "not inside a block",
            )
        if self._module_alias(target, stmt.value):
            return
        annotation = stmt.annotation if isinstance(stmt, ast.AnnAssign) else None
        self._bind(target.id, annotation, stmt.value, outputs)

    def _module_alias(self, target: ast.Name, value: ast.expr) -> bool:
        """`cls = Module`: later `cls.f` names a function of the module."""
        if not (isinstance(value, ast.Name) and value.id in self.module_names):
            return False
        self.module_names.add(target.id)
        return True

    def _expr_statement(self, call: ast.Call, outputs: set[str] | None) -> None:
        name = self.src.callee(call)
        if name == "R.func_attr":
            self.attrs.update(func_attrs(self.src, call, "R.func_attr"))
        elif name == "R.output":
            raise self.src.error(
                call,
                "R.output(...) is only valid as the last statement of a with R.dataflow(): block",
            )
        else:
            self._bind("_", None, call, outputs)

    def _bind(
        self, name: str, annotation: ast.expr | None, value: ast.expr, outputs: set[str] | None
    ) -> None:
        defines = self._named_prim(name, annotation) if annotation is not None else None
        declared = defines or (self.sinfo.parse(annotation) if annotation is not None else None)
        is_dataflow = outputs is not None and name not in outputs
        cls = DataflowVar if is_dataflow else Var
        binding: Binding
        if defines is not None:  # `n: T.int64 = v` binds the symbolic var n: a checked cast
            binding = MatchCast(cls(name, defines), self.expr(value), defines)
        elif self.src.callee(value) == "R.match_cast":
            assert isinstance(value, ast.Call)
            params = ["value", "struct_info"]
            args = bind_call(self.src, value, params, required=params, what="R.match_cast")
            cast = self.sinfo.parse(args["struct_info"])
            source = self.expr(args["value"])
            binding = MatchCast(cls(name, declared or cast), source, cast)
        else:
            expr = self.expr(value)
            sinfo = declared or self.checked(value, lambda: struct_info_of(expr))
            binding = VarBinding(cls(name, sinfo), expr)
        self.vars[name] = binding.var
        self.hidden.pop(name, None)
        self.pending.append(binding)

    def _dataflow(self, stmt: ast.With) -> None:
        item = stmt.items[0]
        if (
            len(stmt.items) != 1
            or item.optional_vars is not None
            or self.src.callee(item.context_expr) != "R.dataflow"
        ):
            raise self.src.error(
                stmt, f"expected with R.dataflow():, got {show(stmt.items[0].context_expr)}"
            )
        body = list(stmt.body)
        outputs = self._outputs(body)
        self._flush()
        names_before = dict(self.vars)
        for inner in body:
            self._statement(inner, set(outputs))
        bound = {b.var.name_hint: b.var for b in self.pending}
        self.blocks.append(DataflowBlock(tuple(self.pending)))
        self.pending = []
        self._close_scope(stmt, bound, outputs, names_before)

    def _outputs(self, body: list[ast.stmt]) -> dict[str, ast.Name]:
        """The names of `R.output(a, b)`, which must be the block's last statement."""
        last = body[-1] if body else None
        if not (isinstance(last, ast.Expr) and self.src.callee(last.value) == "R.output"):
            return {}
        body.pop()
        assert isinstance(last.value, ast.Call)
        names: dict[str, ast.Name] = {}
        for arg in last.value.args:
            if not isinstance(arg, ast.Name):
                raise self.src.error(
                    arg, f"R.output: expected names of vars bound in the block, got {show(arg)}"
                )
            names[arg.id] = arg
        if last.value.keywords:
            raise self.src.error(
                last.value.keywords[0], "R.output: expected names only, got a keyword"
            )
        return names

    def _close_scope(
        self,
        stmt: ast.With,
        bound: dict[str, Var],
        outputs: dict[str, ast.Name],
        before: dict[str, Var],
    ) -> None:
        """After the block: outputs stay visible, its dataflow vars do not."""
        for name in sorted(set(outputs) - set(bound)):
            raise self.src.error(
                outputs[name],
                f"R.output: expected a var bound in this dataflow block, got {name!r}",
            )
        for name, var in bound.items():
            if isinstance(var, DataflowVar):
                self.hidden[name] = (
                    f"dataflow var {name!r} is used outside its dataflow block (line "
                    f"{stmt.lineno}); expected it listed in R.output(...)"
                )
                if name in before:
                    self.vars[name] = before[name]
                else:
                    del self.vars[name]

    def _flush(self) -> None:
        if self.pending:
            self.blocks.append(BindingBlock(tuple(self.pending)))
            self.pending = []


def parse_relax_function(
    src: Source, node: ast.FunctionDef, module: ModuleContext | None, is_pure: bool
) -> Function:
    """The Function a decorated `def` spells."""
    return FunctionParser(src, module).parse(node, is_pure)
