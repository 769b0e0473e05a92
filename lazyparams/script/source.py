"""Where parsed script text comes from: the file, its AST, namespace aliases and error locations.

Every parser error goes through `Source.error`, so each one names file:line:col, shows the line
with a caret and says what was expected. Imports `lazyparams.errors` only.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lazyparams.errors import ParseError

DEFAULT_ALIASES: dict[str, str] = {"I": "I", "R": "R", "T": "T"}
"""Names the namespaces go by in script text: alias -> canonical letter."""


@dataclass
class Source:
    """One file's text, the names under which `I`, `R` and `T` are imported in it, and the
    symbolic vars it declares at its top level (`n = TypeVar("n")`, as TVM 0.27 prints them)."""

    file: str
    lines: list[str]
    aliases: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_ALIASES))
    module_dims: tuple[str, ...] = ()

    def error(self, node: ast.AST | None, message: str) -> ParseError:
        """A ParseError at `node` (line and 1-based column of the user's file)."""
        line = int(getattr(node, "lineno", 0) or 0)
        offset = int(getattr(node, "col_offset", 0) or 0)
        text = self.lines[line - 1].rstrip("\r\n") if 0 < line <= len(self.lines) else None
        # ast columns count UTF-8 bytes; the caret counts characters.
        col = len(text.encode()[:offset].decode(errors="ignore")) + 1 if text else offset + 1
        return ParseError(message, file=self.file, line=line, col=col, source_line=text)

    def qualname(self, node: ast.AST) -> str | None:
        """`R.vm.kill_object` for an attribute chain rooted at a namespace alias, else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        parts.append(self.aliases[node.id])
        return ".".join(reversed(parts))

    def callee(self, node: ast.AST) -> str | None:
        """The qualname of a call's function (`R.Tensor` for `R.Tensor(...)`), else None."""
        return self.qualname(node.func) if isinstance(node, ast.Call) else None


def show(node: ast.AST, limit: int = 60) -> str:
    """A node's source text, shortened, for "got ..." in messages."""
    text = re.sub(r"\s*\n\s*", " ", ast.unparse(node))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bind_call(
    src: Source,
    call: ast.Call,
    names: Sequence[str],
    *,
    required: Sequence[str] = (),
    aliases: Mapping[str, str] | None = None,
    what: str,
) -> dict[str, ast.expr]:
    """Map a call's positional and keyword arguments onto `names`, refusing anything else."""
    bound: dict[str, ast.expr] = {}
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) or i >= len(names):
            got = "*args" if isinstance(arg, ast.Starred) else f"{len(call.args)}"
            raise src.error(arg, f"{what}: expected at most {len(names)} arguments, got {got}")
        bound[names[i]] = arg
    for kw in call.keywords:
        name = (aliases or {}).get(kw.arg or "", kw.arg)
        if name is None or name not in names:
            got = "**kwargs" if name is None else f"{kw.arg}="
            expected = ", ".join(f"{n}=" for n in names) or "no keywords"
            raise src.error(kw, f"{what}: expected one of {expected}, got {got}")
        if name in bound:
            raise src.error(kw, f"{what}: expected {name} once, got it twice")
        bound[name] = kw.value
    missing = [n for n in required if n not in bound]
    if missing:
        raise src.error(call, f"{what}: expected argument {missing[0]}, got none")
    return bound


# Reading Python objects' source -------------------------------------------------------------


def _file_tree(file: str, text: str) -> ast.Module:
    return ast.parse(text, filename=file)


_cached_tree = functools.lru_cache(maxsize=32)(_file_tree)


def source_of(
    obj: object, kind: type[ast.ClassDef] | type[ast.FunctionDef]
) -> tuple[Source, ast.AST]:
    """The Source of the file defining a class or function, and that definition's AST node.

    The whole file is parsed so that every location is the user's own line and column.
    """
    name = getattr(obj, "__name__", "?")
    try:
        file = inspect.getsourcefile(obj)  # type: ignore[arg-type]
        _, first = inspect.getsourcelines(obj)  # type: ignore[arg-type]
    except (OSError, TypeError) as err:
        raise ParseError(
            f"cannot read the source of {name}: {err}; expected a definition in a source file"
        ) from err
    lines = linecache.getlines(file or "")
    if not file or not lines:
        raise ParseError(f"cannot read the source of {name}; expected a definition in a file")
    tree = _cached_tree(file, "".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, kind) and node.name == name and _first_line(node) == first:
            return Source(file, lines), node
    raise ParseError(f"cannot find the definition of {name} in {file} at line {first}")


def _first_line(node: ast.ClassDef | ast.FunctionDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def namespace_aliases(
    namespace: Mapping[str, object], modules: Mapping[str, object]
) -> dict[str, str]:
    """The default aliases plus every global name bound to one of the namespace modules."""
    aliases = dict(DEFAULT_ALIASES)
    for name, value in namespace.items():
        for letter, module in modules.items():
            if value is module:
                aliases[name] = letter
    return aliases
