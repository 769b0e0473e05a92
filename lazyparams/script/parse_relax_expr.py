"""Parsing Relax expressions: vars, `cls.f`, `params[i]`, tuples, op calls and the R.* leaves.

Every registered op is parsed generically from its `OpInfo.params` and built by the op layer's
`make_call`, so parsed calls carry the same normalised attrs as constructed ones.
Imports `ir`, `op` and the script's parsing helpers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lazyparams.errors import LazyParamsError
from lazyparams.ir.expr import (
    Call,
    Expr,
    ExternFunc,
    GlobalVar,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.op_registry import op_info, registered_ops
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    StructInfo,
    TupleStructInfo,
)
from lazyparams.op import SINFO_ARG_KEYWORDS, call_pure_packed, const, describe, make_call
from lazyparams.script.parse_prim import (
    NO_SCALAR,
    SymParser,
    dtype_arg,
    literal,
    number,
    scalar_literal,
)
from lazyparams.script.parse_sinfo import SInfoParser, bool_arg
from lazyparams.script.source import Source, bind_call, show

_T = TypeVar("_T")

SINFO_ALIASES = {"out_ty": "out_sinfo", "ty_args": "sinfo_args"}
"""Keyword spellings of later TVM releases, accepted as aliases."""

_STATEMENT_ONLY = {
    "R.match_cast": "as the value of a binding (x = R.match_cast(value, sinfo))",
    "R.output": "as the last statement of a with R.dataflow(): block",
    "R.dataflow": "as with R.dataflow():",
    "R.func_attr": "as a statement of the function body",
}

_UNSUPPORTED = {
    "R.memory": "explicit storage (R.memory.*) belongs to modules lowered for TVM's VM; "
    "lazyparams' VM allocates by itself; expected the module before memory planning",
}
"""TVM constructs with no meaning here, by spelling (or namespace prefix), and why."""


_ARITHMETIC: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "subtract",
    ast.Mult: "multiply",
    ast.Div: "divide",
}
"""Python operators between Relax values, as TVM's script reads them: `a + b` is R.add(a, b)."""


def _as_op_call(node: ast.BinOp, op: str) -> ast.Call:
    """`node` spelled as the call `R.<op>(left, right)`, located where `node` is."""
    func = ast.copy_location(ast.Attribute(ast.Name("R", ast.Load()), op, ast.Load()), node)
    ast.copy_location(func.value, node)
    return ast.copy_location(ast.Call(func, [node.left, node.right], []), node)


@dataclass
class ModuleContext:
    """What a function of a module can refer to: the class name and the functions' GlobalVars."""

    class_name: str
    gvars: dict[str, GlobalVar] = field(default_factory=dict)


class RelaxExprParser:
    """Reads the expressions of one Relax function; holds its var and symbolic-dim scopes."""

    def __init__(self, src: Source, module: ModuleContext | None) -> None:
        self.src = src
        self.module = module
        self.symbols: dict[str, PrimVar] = {}
        self.dims = SymParser(src, self.symbols)
        self.sinfo = SInfoParser(self.dims)
        self.vars: dict[str, Var] = {}
        self.hidden: dict[str, str] = {}
        self.module_names: set[str] = {module.class_name} if module else set()
        self._leaves: dict[str, Callable[[ast.Call], Expr]] = {
            "R.call_packed": self._call_packed,
            "R.call_pure_packed": self._call_pure_packed,
            "R.const": self._const,
            "R.prim_value": self._prim_value,
            "R.assert_op": self._assert_op,
            "R.str": self._str,
            "R.shape": self._shape,
            "R.ExternFunc": self._extern,
            "R.tuple": self._tuple,
        }

    def expr(self, node: ast.AST) -> Expr:
        """The Relax expression `node` spells."""
        if self.is_prim(node):  # TVM 0.27 prints a prim value bare: `16`, `N + 1`, `True`
            return PrimValue(self.dims.expr(node))
        if isinstance(node, ast.Name):
            return self.var(node)
        if isinstance(node, ast.Attribute):
            return self.global_var(node)
        if isinstance(node, ast.Tuple | ast.List):
            return Tuple(tuple(self.expr(e) for e in node.elts))
        if isinstance(node, ast.Subscript):
            return self._getitem(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            return self.call(_as_op_call(node, _ARITHMETIC[type(node.op)]))
        hint = " (write R.prim_value(...) or R.const(...))" if number(node) is not None else ""
        raise self.src.error(node, f"expected a Relax expression{hint}, got {show(node)}")

    def is_prim(self, node: ast.AST) -> bool:
        """Whether `node` spells a prim value where a Relax value is expected, as TVM 0.27
        prints one (`R.prim_value` left out): an int or bool literal, a symbolic var, a `T.*`
        call, or arithmetic and comparisons of these. A bare float stays an error: TVM never
        prints one, and it could as well have meant `R.const`."""
        value = number(node)
        if value is not None:
            return not isinstance(value, float)
        if isinstance(node, ast.Name):
            return node.id in self.symbols and node.id not in self.vars
        if isinstance(node, ast.Call):
            return (self.src.callee(node) or "").startswith("T.")
        if isinstance(node, ast.BinOp):
            return self.is_prim(node.left) and self.is_prim(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.is_prim(node.operand)
        return isinstance(node, ast.Compare | ast.BoolOp)  # `c: T.bool = N % 4 == 0`

    def var(self, node: ast.Name) -> Var:
        """The var a name refers to; dataflow vars are out of reach after their block."""
        if node.id in self.vars:
            return self.vars[node.id]
        if node.id in self.symbols:
            raise self.src.error(
                node,
                f"symbolic var {node.id!r} used as a Relax value; expected a var here, or "
                f"R.prim_value({node.id})",
            )
        if node.id in self.hidden:
            raise self.src.error(node, self.hidden[node.id])
        raise self.src.error(
            node, f"undefined variable {node.id!r}; expected a parameter or a bound var"
        )

    def global_var(self, node: ast.Attribute) -> GlobalVar:
        """`cls.f`: a function of the module being parsed."""
        base = node.value
        if not (isinstance(base, ast.Name) and base.id in self.module_names and self.module):
            raise self.src.error(
                node, f"expected a Relax expression or cls.<function>, got {show(node)}"
            )
        gvar = self.module.gvars.get(node.attr)
        if gvar is None:
            names = ", ".join(self.module.gvars) or "none"
            raise self.src.error(
                node,
                f"module {self.module.class_name} has no function {node.attr!r}; "
                f"expected one of {names}",
            )
        return gvar

    def _getitem(self, node: ast.Subscript) -> Expr:
        if isinstance(node.value, ast.Subscript) and show(node.value.value) == "metadata":
            raise self.src.error(
                node,
                f"{show(node)} refers to TVM's metadata section, which is not read here; "
                "expected the constant inline, as R.const(...)",
            )
        index = node.slice
        if not (isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0):
            raise self.src.error(
                index, f"expected a non-negative int tuple index, got {show(index)}"
            )
        return TupleGetItem(self.expr(node.value), index.value)

    # Calls ---------------------------------------------------------------------------------

    def call(self, node: ast.Call) -> Expr:
        """A call: an R.* leaf or op, a call of a module function, or of a callable var."""
        name = self.src.callee(node)
        if name is None:
            return self._call_value(node)
        if name in self._leaves:
            return self._leaves[name](node)
        refusal = _UNSUPPORTED.get(name) or _UNSUPPORTED.get(name.rpartition(".")[0])
        if refusal is not None:
            raise self.src.error(node.func, f"{name} is not supported: {refusal}")
        if name in _STATEMENT_ONLY:
            raise self.src.error(node, f"{name} is only valid {_STATEMENT_ONLY[name]}")
        op_name = name[2:]
        if not name.startswith("R.") or op_name not in registered_ops():
            ops = ", ".join(f"R.{o}" for o in registered_ops())
            raise self.src.error(node.func, f"unknown op {name}; expected one of {ops}")
        return self.op_call(op_name, node)

    def op_call(self, name: str, node: ast.Call) -> Call:
        """`R.<op>(...)`: operands and attrs mapped through the op's registered params."""
        params = op_info(name).params
        if name == "strided_slice":
            node = self._without_assume_inbound(node)
        sinfo_kw = SINFO_ARG_KEYWORDS.get(name, "sinfo_args")
        required = [p.name for p in params if p.required]
        # an optional operand (call_tir's tir_vars) comes after the struct info, as in TVM
        optional = [p.name for p in params if p.kind == "expr" and not p.required]
        names = [p.name for p in params if p.name not in optional] + [sinfo_kw, *optional]
        bound = bind_call(
            self.src, node, names, required=required, aliases=SINFO_ALIASES, what=f"R.{name}"
        )
        args = [self.expr(bound[p.name]) for p in params if p.kind == "expr" and p.name in bound]
        if name == "call_tir" and len(args) > 1:
            args[1] = self._operand_tuple(node, args[1])
        attrs = {
            p.name: self.attr(bound[p.name]) for p in params if p.kind == "attr" and p.name in bound
        }
        sinfo = self.sinfo.parse_list(bound[sinfo_kw]) if sinfo_kw in bound else ()
        return self.checked(node, lambda: make_call(name, args, attrs, sinfo))

    def _without_assume_inbound(self, node: ast.Call) -> ast.Call:
        """`R.strided_slice(..., assume_inbound=True)` checked and dropped: the slice clamps
        out-of-range bounds either way, which is what an in-bounds promise permits too."""
        kept = []
        for kw in node.keywords:
            if kw.arg == "assume_inbound":
                bool_arg(self.src, kw.value, "R.strided_slice assume_inbound", False)
            else:
                kept.append(kw)
        return ast.copy_location(ast.Call(func=node.func, args=node.args, keywords=kept), node)

    def _operand_tuple(self, node: ast.Call, operands: Expr) -> Expr:
        """call_tir's operands as a tuple: a single tensor operand is wrapped, as TVM does."""
        sinfo = self.checked(node, lambda: struct_info_of(operands))
        return operands if isinstance(sinfo, TupleStructInfo) else Tuple((operands,))

    def attr(self, node: ast.AST) -> Any:
        """A static attr value: literal, list of them, symbolic dim expression or R.shape."""
        value = scalar_literal(node)
        if value is not NO_SCALAR:
            return value
        if isinstance(node, ast.List | ast.Tuple):
            return tuple(self.attr(e) for e in node.elts)
        if self.src.callee(node) == "R.shape":
            assert isinstance(node, ast.Call)
            return self._shape(node)
        return self.dims.expr(node)

    def checked(self, node: ast.AST, build: Callable[[], _T]) -> _T:
        """Run `build`, turning an op's or dtype's complaint into a ParseError at `node`."""
        try:
            return build()
        except LazyParamsError as err:
            raise self.src.error(node, str(err)) from None

    def _call_value(self, node: ast.Call) -> Call:
        """`cls.f(x)` or `fvar(x)`: a call of a module function or of a function-typed var."""
        callee = self.expr(node.func)
        if isinstance(callee, Var) and not isinstance(
            callee.struct_info, FuncStructInfo | ObjectStructInfo
        ):
            got = describe(callee.struct_info) if callee.struct_info else "R.Object"
            raise self.src.error(
                node.func, f"expected a callable (R.Callable) var, got {show(node.func)}: {got}"
            )
        sinfo = self._sinfo_keyword(node, show(node.func), ())
        return Call(callee, tuple(self.expr(a) for a in node.args), {}, sinfo)

    def _sinfo_keyword(
        self, node: ast.Call, what: str, default: tuple[StructInfo, ...]
    ) -> tuple[StructInfo, ...]:
        """The `sinfo_args=` of a call that takes no other keyword."""
        sinfo = default
        for kw in node.keywords:
            if SINFO_ALIASES.get(kw.arg or "", kw.arg) != "sinfo_args":
                raise self.src.error(kw, f"{what}: expected only sinfo_args=, got {kw.arg}=")
            sinfo = self.sinfo.parse_list(kw.value)
        return sinfo

    def _call_packed(self, node: ast.Call) -> Call:
        if not node.args or not (
            isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
        ):
            raise self.src.error(
                node, 'R.call_packed: expected the function name first, as in R.call_packed("f", x)'
            )
        sinfo = self._sinfo_keyword(node, "R.call_packed", (ObjectStructInfo(),))
        args = tuple(self.expr(a) for a in node.args[1:])
        return Call(ExternFunc(node.args[0].value), args, {}, sinfo)

    def _call_pure_packed(self, node: ast.Call) -> Call:
        """`R.call_pure_packed("vm.builtin.tuple_reset_item", t, i, sinfo_args=...)`."""
        plain = self._call_packed(node)
        assert isinstance(plain.op, ExternFunc)
        name = plain.op.global_symbol
        return self.checked(
            node, lambda: call_pure_packed(name, *plain.args, sinfo_args=plain.sinfo_args)
        )

    def _const(self, node: ast.Call) -> Expr:
        args = bind_call(self.src, node, ["value", "dtype"], required=["value"], what="R.const")
        value = literal(self.src, args["value"], "R.const")
        dtype = dtype_arg(self.src, args["dtype"], "R.const") if "dtype" in args else None
        return self.checked(node, lambda: const(value, dtype))

    def _prim_value(self, node: ast.Call) -> Expr:
        args = bind_call(self.src, node, ["value"], required=["value"], what="R.prim_value")
        return PrimValue(self.dims.expr(args["value"]))

    def _assert_op(self, node: ast.Call) -> Expr:
        """`R.assert_op(condition, [values], format="...")`, or with the values one by one as
        TVM 0.27 prints them; the condition a Relax value or a prim expression (`N % 16 == 0`)."""
        if not node.args:
            raise self.src.error(node, "R.assert_op: expected a condition, got none")
        keywords = {k.arg: k.value for k in node.keywords}
        unknown = sorted(str(k) for k in set(keywords) - {"format_args", "format"})
        if unknown:
            raise self.src.error(node, f"R.assert_op: unexpected keyword {unknown[0]}")
        values: list[ast.expr] = list(node.args[1:])
        if "format_args" in keywords:
            values.append(keywords["format_args"])
        if len(values) == 1 and isinstance(values[0], ast.List | ast.Tuple):
            values = list(values[0].elts)
        operands = [self.expr(node.args[0])]
        if values:
            operands.append(Tuple(tuple(self.expr(v) for v in values)))
        text = keywords.get("format")
        attrs = {} if text is None else {"format": self._format_text(text)}
        return self.checked(node, lambda: make_call("assert_op", operands, attrs, ()))

    def _format_text(self, node: ast.expr) -> str:
        """A message format: a string literal, or `R.str("...")` as TVM prints it."""
        text = node
        if isinstance(node, ast.Call) and self.src.callee(node) == "R.str" and node.args:
            text = node.args[0]
        if not (isinstance(text, ast.Constant) and isinstance(text.value, str)):
            raise self.src.error(node, f"R.assert_op: expected a format string, got {show(node)}")
        return text.value

    def _str(self, node: ast.Call) -> Expr:
        return StringImm(self._string_arg(node, "value", "R.str"))

    def _string_arg(self, node: ast.Call, param: str, what: str) -> str:
        """The one argument `param` of the call `what`, which must be a string literal."""
        arg = bind_call(self.src, node, [param], required=[param], what=what)[param]
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            raise self.src.error(arg, f"{what}: expected a string literal, got {show(arg)}")
        return arg.value

    def _shape(self, node: ast.Call) -> ShapeExpr:
        args = bind_call(self.src, node, ["values"], required=["values"], what="R.shape")
        return ShapeExpr(self.sinfo.shape(args["values"], "R.shape"))

    def _tuple(self, node: ast.Call) -> Expr:
        if node.keywords:
            raise self.src.error(node.keywords[0], "R.tuple: expected fields only, got a keyword")
        return Tuple(tuple(self.expr(a) for a in node.args))

    def _extern(self, node: ast.Call) -> Expr:
        return ExternFunc(self._string_arg(node, "name", "R.ExternFunc"))
