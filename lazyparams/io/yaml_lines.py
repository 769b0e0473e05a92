"""A YAML document read as plain values, with the line of every key and item kept.

Configurations are untrusted and hand-written: an error about one of their keys names the
file and the line. `read_yaml` builds only plain data (safe loading: mappings with string keys,
lists, scalars), refuses anchors that expand past a size bound, and records the 1-based line
of each value under its path of keys and indices. Imports the io layer's reasons and PyYAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.reasons import os_reason, utf8_reason

MAX_YAML_BYTES = 1 << 20
"""The largest configuration read, in bytes."""
MAX_NODES = 100_000
"""The most values a configuration may expand to (aliases included)."""

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """A document's plain value and the line of each value by its path of keys."""

    path: Path
    value: Any
    lines: Mapping[KeyPath, int]

    def where(self, *keys: str | int) -> str:
        """`FILE, line N` for the value at `keys` (its nearest recorded parent's line)."""
        at = tuple(keys)
        while at and at not in self.lines:
            at = at[:-1]
        line = self.lines.get(at)
        return f"{self.path}" if line is None else f"{self.path}, line {line}"


def read_yaml(path: Path) -> YamlDocument:
    """The YAML document at `path`; CheckpointError naming the file (and line) when it is
    not one readable document of plain values."""
    import yaml

    text = _read_text(path)
    lines: dict[KeyPath, int] = {}
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        value = _Builder(path, lines).build(node, ()) if node is not None else None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = "" if mark is None else f", line {mark.line + 1}"
        problem = getattr(err, "problem", None) or "not valid YAML"
        raise CheckpointError(f"{path}{line}: not a readable YAML document: {problem}") from None
    except RecursionError:
        raise CheckpointError(f"{path}: not a readable YAML document: it nests too deep") from None
    except (ValueError, OverflowError) as err:  # a scalar that looks like a date or number
        raise CheckpointError(f"{path}: not a readable YAML document: {err}") from None
    return YamlDocument(path, value, lines)


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise CheckpointError(
                f"{path}: {size} bytes; expected a configuration under {MAX_YAML_BYTES} bytes"
            )
        return path.read_bytes().decode("utf-8")
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read: {os_reason(err)}") from None
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{path}: not UTF-8 text: {utf8_reason(err)}") from None


class _Builder:
    """Turns a composed node tree into plain values, counting nodes and recording lines."""

    def __init__(self, path: Path, lines: dict[KeyPath, int]) -> None:
        self.path, self.lines, self.count = path, lines, 0

    def build(self, node: Any, at: KeyPath) -> Any:
        import yaml

        self.count += 1
        if self.count > MAX_NODES:
            raise CheckpointError(f"{self.path}: expands to over {MAX_NODES} values")
        self.lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, at)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*at, i)) for i, item in enumerate(node.value)]
        return yaml.SafeLoader(node.value).construct_object(node)

    def _mapping(self, node: Any, at: KeyPath) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.build(key_node, at)
            where = f"{self.path}, line {key_node.start_mark.line + 1}"
            if not isinstance(key, str):
                raise CheckpointError(f"{where}: key {key!r}: expected a text key")
            if key in result:
                raise CheckpointError(f"{where}: key {key!r} is given twice")
            self.lines[(*at, key)] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, (*at, key))
        return result
