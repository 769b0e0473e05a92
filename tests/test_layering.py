"""Keeps the import direction of DESIGN.md: each layer imports only the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lazyparams"

ALLOWED: dict[str, set[str]] = {
    "ir": set(),
    "tir": {"ir"},
    "op": {"ir", "tir"},
    "script": {"ir", "tir", "op"},
    "analysis": {"ir", "tir", "op"},
    "transform": {"ir", "tir", "op", "analysis"},
    "runtime": {"ir", "tir", "op", "analysis"},
    "io": set(),
    "frontend": {"ir", "op", "tir"},
    "targets": {"frontend", "io"},
    "engine": {
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
    },
    "cluster": {"engine", "io"},
}
# the command line sits on top: it may import every layer
ALLOWED["cli"] = set(ALLOWED) - {"cli"}
SHARED = {"errors", "block_types", "lazy_names"}


def _is_module(name: str) -> bool:
    """Whether `lazyparams.<name>` is a subpackage or module (not a name the package defines)."""
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _imported_layers(path: Path) -> set[str]:
    """The lazyparams subpackages a source file imports (at any depth, lazily or not)."""
    layers: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "lazyparams":  # modules only: `__version__` is no layer
                names = [f"lazyparams.{a.name}" for a in node.names if _is_module(a.name)]
        for name in names:
            parts = name.split(".")
            if parts[0] == "lazyparams" and len(parts) > 1:
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
    assert layers <= set(ALLOWED)
    assert top_level <= {"__init__", "__main__", "errors", "block_types", "lazy_names"}


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text("from lazyparams.engine import convert\nimport lazyparams.runtime.vm\n")
    assert _imported_layers(source) == {"engine", "runtime"}
