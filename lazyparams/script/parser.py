"""Entry points of the script parser: text, `@I.ir_module` classes and decorated functions.

The parser reads Python source with `ast` and never executes it. A module's functions may
refer to each other (`cls.f`) in any order. Imports `ir`, `tir`, `op` and the script helpers.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lazyparams.errors import ParseError
from lazyparams.ir.expr import PRIVATE, BaseFunc, GlobalVar
from lazyparams.ir.module import IRModule
from lazyparams.script.parse_prim import literal
from lazyparams.script.parse_relax import parse_relax_function
from lazyparams.script.parse_relax_expr import ModuleContext
from lazyparams.script.parse_sinfo import bool_arg
from lazyparams.script.parse_tir import parse_prim_func
from lazyparams.script.source import DEFAULT_ALIASES, Source, bind_call, show, source_of

_NAMESPACE_MODULES = {"ir": "I", "relax": "R", "tir": "T"}


def parse(text: str, file: str = "<string>") -> IRModule:
    """Parse script text (as `IRModule.script()` prints it) into a module.

    The text holds one `@I.ir_module` class, or top-level `@R.function` / `@T.prim_func`
    definitions that together form the module.
    """
    tree = _syntax_tree(text, file)
    src = Source(file, text.splitlines(), _import_aliases(tree), _type_vars(tree))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if len(classes) > 1:
        raise src.error(classes[1], f"expected one @I.ir_module class, got {len(classes)} classes")
    if classes:
        return parse_class_node(src, classes[0])
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not funcs:
        raise src.error(
            tree.body[0] if tree.body else None,
            "expected a class decorated with @I.ir_module, got none",
        )
    return _module_of(src, funcs, ModuleContext(""))


def _syntax_tree(text: str, file: str) -> ast.Module:
    """The Python AST of `text`; a syntax error becomes a ParseError at its location."""
    try:
        return ast.parse(text, filename=file)
    except SyntaxError as err:
        lines = text.splitlines()
        line = err.lineno or 0
        source_line = lines[line - 1] if 0 < line <= len(lines) else None
        message = f"invalid Python syntax: {err.msg}"
        raise ParseError(
            message, file=file, line=line, col=err.offset or 0, source_line=source_line
        ) from None


def _type_vars(tree: ast.Module) -> tuple[str, ...]:
    """The names of top-level `n = TypeVar("n")` statements: symbolic vars every function of
    the text may use (each function binds its own)."""
    names = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "TypeVar"
            and [literal_str(a) for a in value.args] == [target.id]
        ):
            names.append(target.id)
    return tuple(names)


def literal_str(node: ast.AST) -> str | None:
    """The string a constant node holds, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Names under which `from lazyparams.script import ir as I, ...` imported the namespaces."""
    aliases = dict(DEFAULT_ALIASES)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "lazyparams.script":
            for alias in node.names:
                if alias.name in _NAMESPACE_MODULES:
                    aliases[alias.asname or alias.name] = _NAMESPACE_MODULES[alias.name]
    return aliases


def parse_class_node(src: Source, node: ast.ClassDef) -> IRModule:
    """The module a `@I.ir_module class Name:` spells."""
    decorators = node.decorator_list
    if len(decorators) == 1 and src.callee(decorators[0]) == "I.ir_module":
        _module_options(src, decorators[0])
    elif [_module_decorator(src, d) for d in decorators] not in ([], ["I.ir_module"]):
        raise src.error(
            node.decorator_list[0],
            f"expected @I.ir_module on class {node.name}, got {show(node.decorator_list[0])}",
        )
    funcs: list[ast.FunctionDef] = []
    attrs: dict[str, Any] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef):
            funcs.append(stmt)
        elif isinstance(stmt, ast.Expr) and src.callee(stmt.value) == "I.module_attrs":
            assert isinstance(stmt.value, ast.Call)
            attrs.update(_module_attrs(src, stmt.value))
        elif not (isinstance(stmt, ast.Pass) or _is_docstring(stmt)):
            raise src.error(
                stmt,
                f"class {node.name}: expected @R.function or @T.prim_func definitions, "
                f"got {show(stmt)}",
            )
    return _module_of(src, funcs, ModuleContext(node.name), attrs)


def _module_decorator(src: Source, deco: ast.expr) -> str | None:
    """`I.ir_module` for `@I.ir_module` and for TVM's long spelling `@tvm.script.ir_module`."""
    return "I.ir_module" if ast.unparse(deco) == "tvm.script.ir_module" else src.qualname(deco)


def _module_of(
    src: Source,
    funcs: list[ast.FunctionDef],
    module: ModuleContext,
    attrs: Mapping[str, Any] | None = None,
) -> IRModule:
    for f in funcs:
        if f.name in module.gvars:
            raise src.error(f, f"expected unique function names, got a second {f.name!r}")
        module.gvars[f.name] = GlobalVar(f.name)
    functions: dict[str | GlobalVar, BaseFunc] = {
        module.gvars[f.name]: parse_function_node(src, f, module) for f in funcs
    }
    return IRModule(functions, attrs)


def parse_function_node(
    src: Source, node: ast.FunctionDef, module: ModuleContext | None
) -> BaseFunc:
    """A `@R.function` or `@T.prim_func` definition, by its decorator."""
    if len(node.decorator_list) != 1:
        got = f"{len(node.decorator_list)} decorators"
        raise src.error(
            node,
            f"function {node.name}: expected one decorator, @R.function or @T.prim_func, got {got}",
        )
    deco = node.decorator_list[0]
    name = src.callee(deco) if isinstance(deco, ast.Call) else src.qualname(deco)
    if name == "T.prim_func":
        _decorator_options(src, deco, name)
        prim_func = parse_prim_func(src, node)
        if not _is_private(src, deco):
            return prim_func
        return replace(prim_func, attrs={**prim_func.attrs, PRIVATE: True})
    if name == "R.function":
        is_pure = _decorator_options(src, deco, name)
        func = parse_relax_function(src, node, module, is_pure)
        return func.with_attr(PRIVATE, True) if _is_private(src, deco) else func
    raise src.error(
        deco, f"function {node.name}: expected @R.function or @T.prim_func, got @{show(deco)}"
    )


def _is_private(src: Source, deco: ast.expr) -> bool:
    """`private=` of `@R.function(private=True)` or `@T.prim_func(private=True)`: the
    function is not public."""
    options = {kw.arg: kw.value for kw in deco.keywords} if isinstance(deco, ast.Call) else {}
    return bool_arg(src, options.get("private"), "@R.function private", False)


def _decorator_options(src: Source, deco: ast.expr, name: str) -> bool:
    """`pure=` of `@R.function(pure=False)`, checking the other options; a Relax function's
    and a PrimFunc's `private=` are read by `_is_private`."""
    if not isinstance(deco, ast.Call):
        return True
    names = ["pure", "private"] if name == "R.function" else ["private", "s_tir"]
    if deco.args:
        raise src.error(
            deco.args[0], f"@{name}: expected keyword arguments only, got {show(deco.args[0])}"
        )
    args = {kw.arg or "**": kw.value for kw in deco.keywords}
    for key, value in args.items():
        if key not in names:
            raise src.error(
                value,
                f"@{name}: expected keyword {' or '.join(n + '=' for n in names)}, got {key}=",
            )
        bool_arg(src, value, f"@{name} {key}", True)
    return bool_arg(src, args.get("pure"), f"@{name} pure", True)


def _module_options(src: Source, deco: ast.expr) -> None:
    """`@I.ir_module(s_tir=True)`, TVM 0.27's spelling: `s_tir=` is the only option."""
    assert isinstance(deco, ast.Call)
    args = bind_call(src, deco, ["s_tir"], what="@I.ir_module")
    bool_arg(src, args.get("s_tir"), "@I.ir_module s_tir", False)


def _module_attrs(src: Source, call: ast.Call) -> dict[str, Any]:
    args = bind_call(src, call, ["attrs"], required=["attrs"], what="I.module_attrs")
    attrs = literal(src, args["attrs"], "I.module_attrs")
    if not isinstance(attrs, dict):
        raise src.error(
            args["attrs"], f"I.module_attrs: expected a dict, got {show(args['attrs'])}"
        )
    return attrs


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


# Decorated Python objects ---------------------------------------------------------------------


def parse_class(cls: type, aliases: Mapping[str, str]) -> IRModule:
    """The module an `@I.ir_module` class spells, read from its source file."""
    src, node = source_of(cls, ast.ClassDef)
    src.aliases = aliases
    assert isinstance(node, ast.ClassDef)
    return parse_class_node(src, node)


def parse_function(func: Any, aliases: Mapping[str, str]) -> BaseFunc:
    """The Function or PrimFunc a standalone decorated `def` spells, read from its source file."""
    src, node = source_of(func, ast.FunctionDef)
    src.aliases = aliases
    assert isinstance(node, ast.FunctionDef)
    return parse_function_node(src, node, None)
