"""Printing Relax functions: signature, symbolic-dim declarations, blocks, bindings, return.

Every binding carries its struct info as an annotation. Dims in the signature are "strings",
since Python evaluates annotations before the parser reads them; in the body they are names
declared as `n = T.int64()`. Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.errors import LazyParamsError
from lazyparams.ir.dtype import from_numpy
from lazyparams.ir.expr import (
    PRIVATE,
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.op_registry import SINFO_ARG_KEYWORDS, op_info
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar
from lazyparams.ir.print_prim import Names, PrimPrinter, prim_vars, quote, walk
from lazyparams.ir.print_text import (
    INDENT,
    LIMIT,
    attrs_lines,
    const_text,
    sinfo_text,
    tuple_fields,
    value_text,
    wrapped,
)
from lazyparams.ir.spelling import SEED, Spelling
from lazyparams.ir.struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    StructInfo,
)


def _decorator(func: Function) -> str:
    """`@R.function`, with `pure=False` and `private=True` where they apply."""
    options = [] if func.is_pure else ["pure=False"]
    if func.attrs.get(PRIVATE) is True:
        options.append("private=True")
    return f"@R.function({', '.join(options)})" if options else "@R.function"


class RelaxPrinter:
    """Prints one Relax function as the lines of a `def` (without module indentation)."""

    def __init__(
        self, name: str, func: Function, module_name: str, spelling: Spelling = SEED
    ) -> None:
        self.name, self.func, self.module_name = name, func, module_name
        self.spelling = spelling
        self.names = Names(("R", "T", "I", "cls", module_name))
        self.prim = PrimPrinter(self.names)
        self.lines: list[str] = []
        self.prim_casts: dict[Var, PrimVar] = {}

    def print(self) -> list[str]:
        """Step 1 names, 2 header, 3 declarations, 4 blocks, 5 return."""
        func = self.func
        symbols = prim_vars(func)
        for var in symbols:
            self.names.define(var, var.name)
        defining = self._defining_prim_params() if self.spelling.prim_params else {}
        params = [self._param(p, defining.get(p)) for p in func.params]
        self.prim_casts = self._defining_prim_casts(defining) if self.spelling.prim_params else {}
        self.lines.append(_decorator(func))
        header = wrapped(f"def {self.name}(", params, f") -> {self.sig(func.ret_struct_info)}:", "")
        fields = tuple_fields(func.ret_struct_info, self.sig)
        if len(header[-1]) > LIMIT and fields:
            opening = header[-1][: -len(f"{self.sig(func.ret_struct_info)}:")]
            header[-1:] = wrapped(f"{opening}R.Tuple(", fields, "):", "")
        self.lines += header
        defined = set(defining.values()) | set(self.prim_casts.values())
        body = [f"{self.names[v]} = T.{v.dtype}()" for v in symbols if v not in defined]
        attrs = {k: v for k, v in func.attrs.items() if k != PRIVATE or v is not True}
        body += attrs_lines("R.func_attr", attrs, self.prim)
        if any(isinstance(n, GlobalVar) for n in walk(func.body)):
            body.append(f"cls = {self.module_name}")
        self.lines += [INDENT + line for line in body]
        for block in func.body.blocks:
            self._block(block)
        self.lines.append(f"{INDENT}return {self.expr(func.body.body)}")
        return self.lines

    def _param(self, param: Var, defines: PrimVar | None) -> str:
        """`name: sinfo`; a prim param that defines a symbolic var takes that var's name."""
        if defines is None:
            return f"{self.names.define(param, param.name_hint)}: {self.sig(param.struct_info)}"
        return f"{self.names.share(param, defines)}: T.{defines.dtype}"

    def _defining_prim_params(self) -> dict[Var, PrimVar]:
        """The params of `R.Prim(value=n)` that first define `n` (no earlier param names it)."""
        defining: dict[Var, PrimVar] = {}
        seen: set[PrimVar] = set()
        for param in self.func.params:
            sinfo = param.struct_info
            value = sinfo.value if isinstance(sinfo, PrimStructInfo) else None
            dtype = sinfo.dtype if isinstance(sinfo, PrimStructInfo) else None
            if isinstance(value, PrimVar) and value not in seen and value.dtype == dtype:
                defining[param] = value
            seen.update(prim_vars(sinfo))
        return defining

    def _defining_prim_casts(self, params: dict[Var, PrimVar]) -> dict[Var, PrimVar]:
        """The top-level casts to `R.Prim(value=n)` that define `n`, printed as TVM 0.27 writes
        them: `n: T.int64 = value`."""
        seen = {v for p in self.func.params for v in prim_vars(p.struct_info)}
        casts: dict[Var, PrimVar] = {}
        for block in self.func.body.blocks:
            for b in block.bindings:
                sinfo = b.struct_info if isinstance(b, MatchCast) else None
                value = sinfo.value if isinstance(sinfo, PrimStructInfo) else None
                if isinstance(value, PrimVar) and value not in seen:
                    casts[b.var] = value
                seen.update(prim_vars(b.var.struct_info))
        return casts

    def sig(self, sinfo: StructInfo | None) -> str:
        """Struct info of the signature: non-constant dims as "strings"."""
        return sinfo_text(
            sinfo or ObjectStructInfo(), self._sig_dim, self.spelling.object, self._prim_values
        )

    def _sig_dim(self, dim: PrimExpr) -> str:
        text = self.prim(dim)
        return text if isinstance(dim, IntImm) and dim.dtype == "int64" else quote(text)

    def body_sinfo(self, sinfo: StructInfo | None) -> str:
        """Struct info inside the body, where symbolic dims are declared names."""
        return sinfo_text(
            sinfo or ObjectStructInfo(), self.prim, self.spelling.object, self._prim_values
        )

    @property
    def _prim_values(self) -> bool:
        return not self.spelling.prim_params

    def _block(self, block: BindingBlock, indent: str = INDENT) -> None:
        if not isinstance(block, DataflowBlock):
            for binding in block.bindings:
                self.lines += self._binding(binding, indent)
            return
        self.lines.append(f"{indent}with R.dataflow():")
        for binding in block.bindings:
            self.lines += self._binding(binding, indent + INDENT)
        outputs = [self.names[b.var] for b in block.bindings if not isinstance(b.var, DataflowVar)]
        self.lines.append(f"{indent + INDENT}R.output({', '.join(outputs)})")

    def _if(self, binding: Binding, indent: str) -> list[str]:
        """`if cond:` and `else:`, each branch's bindings, then `name: sinfo = <its result>`."""
        assert isinstance(binding.value, If)
        name = self.names.define(binding.var, binding.var.name_hint)
        annotation = self.body_sinfo(binding.var.struct_info)
        outer, self.lines = self.lines, [f"{indent}if {self.expr(binding.value.cond)}:"]
        self._branch(binding.value.true_branch, indent + INDENT, f"{name}: {annotation}")
        self.lines.append(f"{indent}else:")
        self._branch(binding.value.false_branch, indent + INDENT, f"{name}: {annotation}")
        lines, self.lines = self.lines, outer
        return lines

    def _branch(self, branch: SeqExpr, indent: str, target: str) -> None:
        for block in branch.blocks:
            self._block(block, indent)
        self.lines.append(f"{indent}{target} = {self.expr(branch.body)}")

    def _binding(self, binding: Binding, indent: str) -> list[str]:
        """`name: sinfo = value`; a long line wraps the value's arguments, or a tuple sinfo."""
        if isinstance(binding.value, If):
            return self._if(binding, indent)
        defines = self.prim_casts.get(binding.var)
        if defines is not None:
            name = self.names.share(binding.var, defines)
            return [f"{indent}{name}: T.{defines.dtype} = {self.expr(binding.value)}"]
        name = self.names.define(binding.var, binding.var.name_hint)
        sinfo = binding.var.struct_info
        head, parts = self._value_parts(binding)
        one_line = f"{head}({', '.join(parts)})" if head else parts[0]
        lines = [f"{indent}{name}: {self.body_sinfo(sinfo)} = {one_line}"]
        fields = tuple_fields(sinfo, self.body_sinfo)
        if len(lines[0]) > LIMIT and fields:
            lines = wrapped(f"{name}: R.Tuple(", fields, f") = {one_line}", indent)
        if len(lines[-1]) > LIMIT and head:
            prefix = lines[-1].strip()[: -len(one_line)]
            lines[-1:] = wrapped(f"{prefix}{head}(", parts, ")", indent)
        return lines

    def _value_parts(self, binding: Binding) -> tuple[str, list[str]]:
        """A binding's value as (callee, argument texts), or ("", [text]) when not a call."""
        value = binding.value
        if isinstance(binding, MatchCast):
            return "R.match_cast", [self.expr(value), self.body_sinfo(binding.struct_info)]
        if isinstance(value, Call):
            return self._call(value)
        return "", [self.expr(value)]

    # Expressions ---------------------------------------------------------------------------

    def expr(self, expr: Expr) -> str:
        """The spelling of a Relax expression."""
        if isinstance(expr, Var):
            return self.names[expr]
        if isinstance(expr, GlobalVar):
            return f"cls.{expr.name_hint}"
        if isinstance(expr, Tuple):
            items = [self.expr(f) for f in expr.fields]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(expr, TupleGetItem):
            return f"{self.expr(expr.tuple_value)}[{expr.index}]"
        if isinstance(expr, Call):
            head, parts = self._call(expr)
            return f"{head}({', '.join(parts)})"
        return self._leaf(expr)

    def _leaf(self, expr: Expr) -> str:
        if isinstance(expr, Constant):
            return const_text(expr.data, from_numpy(expr.data.dtype))
        if isinstance(expr, PrimValue):
            return f"R.prim_value({self.prim(expr.value)})"
        if isinstance(expr, StringImm):
            return f"R.str({quote(expr.value)})"
        if isinstance(expr, ShapeExpr):
            return f"R.shape([{', '.join(self.prim(v) for v in expr.values)}])"
        if isinstance(expr, ExternFunc):
            return f"R.ExternFunc({quote(expr.global_symbol)})"
        raise LazyParamsError(
            f"cannot print {type(expr).__name__} as a script expression; expected a node of ir.expr"
        )

    def _call(self, call: Call) -> tuple[str, list[str]]:
        """The callee spelling and the argument texts of a call."""
        args = [self.expr(a) for a in call.args]
        sinfo = ", ".join(self.body_sinfo(s) for s in call.sinfo_args)
        sinfo_tuple = f"({sinfo},)" if len(call.sinfo_args) == 1 else f"({sinfo})"
        pure_extern = isinstance(call.op, Op) and call.op.name == "call_pure_packed"
        if pure_extern and call.args and isinstance(call.args[0], ExternFunc):
            operands = args[1:]
            return "R.call_pure_packed", [
                quote(call.args[0].global_symbol),
                *operands,
                f"{self.spelling.sinfo_args}={sinfo_tuple}",
            ]
        if isinstance(call.op, Op) and call.op.name == "assert_op":
            return "R.assert_op", self._assert_parts(call)
        if isinstance(call.op, Op):
            return f"R.{call.op.name}", self._op_parts(call, args)
        if isinstance(call.op, ExternFunc):
            return "R.call_packed", [
                quote(call.op.global_symbol),
                *args,
                f"{self.spelling.sinfo_args}={sinfo_tuple}",
            ]
        if not isinstance(call.op, Var | GlobalVar):
            raise LazyParamsError(
                f"cannot print a call of {type(call.op).__name__}; "
                "expected an op, extern, var or cls.f"
            )
        if call.sinfo_args:
            args.append(f"{self.spelling.sinfo_args}={sinfo_tuple}")
        return self.expr(call.op), args

    def _assert_parts(self, call: Call) -> list[str]:
        """`R.assert_op(condition, [values], format="...")`: the message's values as a list, as
        both parsers read them."""
        parts = [self.expr(call.args[0])]
        values = call.args[1] if len(call.args) > 1 else None
        if isinstance(values, Tuple) and values.fields:
            parts.append(f"[{', '.join(self.expr(v) for v in values.fields)}]")
        if call.attrs.get("format"):
            parts.append(f"format={quote(str(call.attrs['format']))}")
        return parts

    def _op_parts(self, call: Call, args: list[str]) -> list[str]:
        """Arguments of `R.<op>(...)`: leading operands by position, the rest by keyword."""
        assert isinstance(call.op, Op)
        params = op_info(call.op).params
        expr_params = [p.name for p in params if p.kind == "expr"]
        required = sum(1 for p in params if p.kind == "expr" and p.required)
        if not required <= len(args) <= len(expr_params):
            raise LazyParamsError(
                f"cannot print R.{call.op.name} with {len(args)} operands; "
                f"expected {required} to {len(expr_params)}"
            )
        if len(args) > required and not self.spelling.tir_vars:
            raise LazyParamsError(
                f"cannot print R.{call.op.name} with {expr_params[len(args) - 1]}= in TVM 0.27's "
                "spelling, which has none; expected the ints as R.prim_value operands"
            )
        expr_params = expr_params[: len(args)]
        texts = dict(zip(expr_params, args, strict=True))
        texts |= {k: value_text(v, self.prim, lists=True) for k, v in call.attrs.items()}
        parts: list[str] = []
        for p in params:
            if p.kind == "expr" and p.required and len(parts) == params.index(p):
                parts.append(texts.pop(p.name))
        parts += [f"{k}={v}" for k, v in texts.items()]
        if call.sinfo_args:
            parts.append(self._sinfo_keyword(call))
        return parts

    def _sinfo_keyword(self, call: Call) -> str:
        assert isinstance(call.op, Op)
        keyword = SINFO_ARG_KEYWORDS.get(call.op.name, "sinfo_args")
        keyword = self.spelling.out_sinfo if keyword == "out_sinfo" else self.spelling.sinfo_args
        texts = [self.body_sinfo(s) for s in call.sinfo_args]
        if len(texts) == 1:
            return f"{keyword}={texts[0]}"
        return f"{keyword}=[{', '.join(texts)}]"
