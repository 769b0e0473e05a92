"""Keeps the import direction of DESIGN.md: each layer imports only the layers before it.

An import is an import statement, or a string that names a lazyparams module (what
`importlib.import_module`, `__import__` and lazy-attribute tables are given), in full or as the
constant head of an f-string. DESIGN's order is the rule; `NEVER` adds the narrower constraints
the code keeps, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lazyparams"

# DESIGN.md's layer list: a layer may import every layer before it, none after it
ORDER = [
    "ir",
    "tir",
    "op",
    "script",
    "analysis",
    "transform",
    "runtime",
    "io",
    "frontend",
    "targets",
    "engine",
    "cluster",
    "cli",
]
COMPILER = {"ir", "tir", "op", "script", "analysis", "transform", "runtime"}

# "layer X additionally never imports Y", and why
NEVER: dict[str, tuple[set[str], str]] = {
    "analysis": ({"script"}, "analyses read IR; the text of their messages is the ir printer's"),
    "transform": ({"script"}, "passes build IR with the BlockBuilder and ops, never from text"),
    "runtime": (
        {"script", "transform"},
        "the VM runs the module it is given; which passes ran is the caller's business",
    ),
    "io": (COMPILER, "formats read and write bytes and dtypes: a checkpoint opens without IR"),
    "frontend": (
        {"script", "analysis", "transform", "runtime", "io"},
        "tracing only builds IR from Python calls; the engine joins it to passes, VM and data",
    ),
    "targets": (COMPILER, "a target is data over the frontend's ops and io's formats"),
    "cluster": (
        set(ORDER[: ORDER.index("engine")]) - {"io"},
        "the Dask executor implements the engine's executor interface and sees the rest through it",
    ),
}

ALLOWED: dict[str, set[str]] = {
    layer: set(ORDER[:i]) - NEVER.get(layer, (set(), ""))[0] for i, layer in enumerate(ORDER)
}
SHARED = {"errors", "block_types", "lazy_names", "dtypes"}

# a whole dotted lazyparams path, or the constant head of an f-string ("lazyparams.io.")
_MODULE_PATH = re.compile(r"lazyparams(\.[A-Za-z_]\w*)+")
_MODULE_HEAD = re.compile(r"lazyparams(\.[A-Za-z_]\w*)*\.")


def _is_module(name: str) -> bool:
    """Whether `lazyparams.<name>` is a subpackage or module (not a name the package defines)."""
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _string_imports(node: ast.AST) -> list[str]:
    """Module paths a string constant or an f-string's constant head names."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if _MODULE_PATH.fullmatch(node.value) else []
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return [head.value.rstrip(".")] if _MODULE_HEAD.fullmatch(head.value) else []
    return []


def _statement_imports(node: ast.AST) -> list[str]:
    """Module paths an import statement names (absolute ones; relative ones stay in a layer)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module == "lazyparams":  # modules only: `__version__` is no layer
            return [f"lazyparams.{a.name}" for a in node.names]
        return [node.module]
    return []


def _imported_layers(path: Path) -> set[str]:
    """The lazyparams subpackages a source file imports (at any depth, lazily or not)."""
    layers: set[str] = set()
    tree = ast.parse(path.read_text())
    # an f-string's head is a JoinedStr's child: skip those constants, seen through the JoinedStr
    heads = {id(n.values[0]) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) and n.values}
    for node in ast.walk(tree):
        if id(node) in heads:
            continue
        for name in _statement_imports(node) + _string_imports(node):
            parts = name.split(".")
            if parts[0] == "lazyparams" and len(parts) > 1 and _is_module(parts[1]):
                layers.add(parts[1])
    return layers


def test_every_layer_imports_only_downward() -> None:
    violations = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            bad = _imported_layers(path) - allowed - SHARED - {layer}
            if bad:
                violations.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert violations == []


def test_every_package_file_belongs_to_a_layer() -> None:
    top_level = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py"}
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert layers <= set(ORDER)
    assert top_level <= {"__init__", "__main__", *SHARED}


def test_the_narrower_rules_only_narrow_design_order() -> None:
    for layer, (never, reason) in NEVER.items():
        assert never <= set(ORDER[: ORDER.index(layer)]), layer
        assert reason, layer


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text("from lazyparams.engine import convert\nimport lazyparams.runtime.vm\n")
    assert _imported_layers(source) == {"engine", "runtime"}


def test_the_checker_sees_a_string_import(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text(
        "import importlib\n"
        "def load(module):\n"
        '    importlib.import_module("lazyparams.engine")\n'
        '    __import__("lazyparams.cli")\n'
        '    return importlib.import_module(f"lazyparams.io.{module}")\n'
    )
    assert _imported_layers(source) == {"engine", "cli", "io"}


def test_the_checker_ignores_prose_and_names_that_are_no_module(tmp_path: Path) -> None:
    source = tmp_path / "fine.py"
    source.write_text(
        '"""Uses lazyparams.engine to convert."""\n'
        'GROUP = "lazyparams.executors"\n'
        'HINT = f"see lazyparams.cli for {GROUP}"\n'
        'PREFIX = f"lazyparams.{GROUP}"\n'
    )
    assert _imported_layers(source) == set()
