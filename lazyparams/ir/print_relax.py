"""Printing Relax functions: signature, symbolic-dim declarations, blocks, bindings, return.

Every binding carries its struct info as an annotation. Dims in the signature are "strings",
since Python evaluates annotations before the parser reads them; in the body they are names
declared as `n = T.int64()`. Expressions are spelled by `ExprPrinter`. Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.ir.describe import sinfo_text, tuple_fields
from lazyparams.ir.expr import (
    PRIVATE,
    Binding,
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    MatchCast,
    SeqExpr,
    Var,
)
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar
from lazyparams.ir.print_expr import ExprPrinter
from lazyparams.ir.print_prim import Names, prim_vars, quote, walk
from lazyparams.ir.print_text import INDENT, LIMIT, attrs_lines, wrapped
from lazyparams.ir.spelling import SEED, Spelling
from lazyparams.ir.struct_info import ObjectStructInfo, PrimStructInfo, StructInfo


def _decorator(func: Function) -> str:
    """`@R.function`, with `pure=False` and `private=True` where they apply."""
    options = [] if func.is_pure else ["pure=False"]
    if func.attrs.get(PRIVATE) is True:
        options.append("private=True")
    return f"@R.function({', '.join(options)})" if options else "@R.function"


class RelaxPrinter(ExprPrinter):
    """Prints one Relax function as the lines of a `def` (without module indentation)."""

    def __init__(
        self, name: str, func: Function, module_name: str, spelling: Spelling = SEED
    ) -> None:
        super().__init__(Names(("R", "T", "I", "cls", module_name)), spelling)
        self.name, self.func, self.module_name = name, func, module_name
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
        return sinfo_text(sinfo or ObjectStructInfo(), self._sig_dim, self.spelling)

    def _sig_dim(self, dim: PrimExpr) -> str:
        text = self.prim(dim)
        return text if isinstance(dim, IntImm) and dim.dtype == "int64" else quote(text)

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
        head, parts = self.value_parts(binding)
        one_line = f"{head}({', '.join(parts)})" if head else parts[0]
        lines = [f"{indent}{name}: {self.body_sinfo(sinfo)} = {one_line}"]
        fields = tuple_fields(sinfo, self.body_sinfo)
        if len(lines[0]) > LIMIT and fields:
            lines = wrapped(f"{name}: R.Tuple(", fields, f") = {one_line}", indent)
        if len(lines[-1]) > LIMIT and head:
            prefix = lines[-1].strip()[: -len(one_line)]
            lines[-1:] = wrapped(f"{prefix}{head}(", parts, ")", indent)
        return lines
