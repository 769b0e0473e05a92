"""Several checkpoints read as one source: each tensor named `ALIAS::NAME`.

A merge reads the same tensor in N models; the engine plans, budgets, chunks and resumes one
source. `SourceSet` is that source: the union of its members, each member's tensors behind its
alias, loaded (whole, by rows, by columns) by the member that holds them. Imports the io layer.
"""

from __future__ import annotations

from collections.abc import Mapping

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, CheckpointSource, TensorInfo
from lazyparams.io.partial import load_cols, load_rows, read_buffer_bytes
from lazyparams.io.sharded_source import MultiFileSource

SEPARATOR = "::"
"""Between a member's alias and a tensor's own name."""


def qualified(alias: str, name: str) -> str:
    """The name under which the source set lists tensor `name` of member `alias`."""
    return f"{alias}{SEPARATOR}{name}"


def split_name(name: str) -> tuple[str, str]:
    """(alias, the member's own name) of a qualified name; CheckpointError when unqualified."""
    alias, separator, own = name.partition(SEPARATOR)
    if not separator:
        raise CheckpointError(
            f"tensor {name!r}: expected a name ALIAS{SEPARATOR}NAME of a source set"
        )
    return alias, own


class SourceSet(MultiFileSource):
    """The union of several sources (`members`: alias -> source), names qualified by alias.

    `path` names the set in reports (the merge configuration it came from); `files` are the
    members' own files, for fingerprints. The set owns its members: closing it closes them.
    """

    def __init__(self, path: str, members: Mapping[str, CheckpointSource]) -> None:
        self.path = path
        self.members = dict(members)
        self._members = list(self.members.values())
        self._owner = {}
        self._infos = {}
        for alias, member in self.members.items():
            if SEPARATOR in alias or not alias:
                raise CheckpointError(
                    f"{path}: source alias {alias!r}: expected a non-empty name without "
                    f"{SEPARATOR!r}"
                )
            for name in member.names():
                info = member.info(name)
                full = qualified(alias, name)
                self._infos[full] = TensorInfo(full, info.shape, info.dtype, info.nbytes)
                self._owner[full] = member

    def member_names(self, alias: str) -> list[str]:
        """The own names of member `alias`'s tensors, in its order."""
        return self._member(alias).names()

    def member_info(self, alias: str, name: str) -> TensorInfo:
        """What member `alias` says of its tensor `name` (named as the member names it)."""
        return self._member(alias).info(name)

    def _member(self, alias: str) -> CheckpointSource:
        """The member called `alias`; CheckpointError listing the aliases when none is."""
        member = self.members.get(alias)
        if member is None:
            known = ", ".join(self.members)
            raise CheckpointError(f"{self.path}: no source {alias!r}; expected one of {known}")
        return member

    def load(self, name: str) -> Array:
        """Tensor `name` (qualified), read by its member."""
        self.info(name)
        return self._owner[name].load(split_name(name)[1])

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name` (qualified), read by its member."""
        self.info(name)
        return load_rows(self._owner[name], split_name(name)[1], start, stop)

    def load_cols(self, name: str, start: int, stop: int) -> Array:
        """Columns [start, stop) of the 2-D tensor `name` (qualified), read by its member."""
        self.info(name)
        return load_cols(self._owner[name], split_name(name)[1], start, stop)

    def read_buffer_bytes(self, name: str) -> int:
        """The bytes a load of tensor `name` (qualified) holds beside the tensor, as its
        member says."""
        self.info(name)
        return read_buffer_bytes(self._owner[name], [split_name(name)[1]])
