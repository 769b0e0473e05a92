"""A split GGUF set read as one checkpoint: every tensor of every part, or a clear refusal.

Any part (or a folder holding the parts) opens the whole set; the other parts are found by
llama.cpp's naming and checked against each other (count, index, total tensors, no duplicate
names), so a missing or foreign part is an error naming the file. Imports the io layer only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.base import CheckpointSource, TensorInfo
from lazyparams.io.gguf_format import GGUFSource
from lazyparams.io.gguf_split import SplitPosition, parse_part_name, part_path
from lazyparams.io.sharded_source import MultiFileSource


def open_gguf(path: str | os.PathLike[str]) -> CheckpointSource:
    """A GGUF file, or the whole split set when the file is one of its parts."""
    source = GGUFSource(path, split_part=True)
    if source.split is None or source.split.count == 1:
        return source
    return GGUFSplitSource(path, opened=source)


def open_gguf_folder(folder: Path, files: Sequence[Path]) -> CheckpointSource:
    """The split set that the several .gguf files of `folder` make up, or CheckpointError."""
    sets = {_set_of(file) for file in files}
    if None in sets or len(sets) > 1:
        names = ", ".join(file.name for file in files[:4])
        raise CheckpointError(
            f"{folder}: several .gguf files ({names}) that are not the parts of one split set; "
            "expected one .gguf file or the parts NAME-0000K-of-0000N.gguf of one set"
        )
    first = min(files, key=lambda file: file.name)
    return open_gguf(first)


def _set_of(file: Path) -> tuple[Path, int] | None:
    """(prefix, count) of a file named like a split part."""
    parsed = parse_part_name(file)
    return None if parsed is None else (parsed[0], parsed[2])


class GGUFSplitSource(MultiFileSource):
    """Every part of a split GGUF set; names come part by part, each in its file's order.

    `weight_map` maps each tensor to the name of the part file that holds it.
    """

    def __init__(self, path: str | os.PathLike[str], *, opened: GGUFSource | None = None) -> None:
        given = opened or GGUFSource(path, split_part=True)
        position = given.split
        if position is None:
            given.close()
            raise CheckpointError(f"{path}: has no split.* keys; expected a part of a split GGUF")
        self._members = []
        self._owner = {}
        self.weight_map: dict[str, str] = {}
        try:
            paths = _part_paths(Path(path), position)
            self.path = str(paths[0])
            for index, part_file in enumerate(paths):
                part = given if index == position.no else _open_part(part_file, self.path)
                self._add_part(part, index, position)
        except BaseException:
            given.close()
            self.close()
            raise
        self._check_total(position)

    def _add_part(self, part: GGUFSource, index: int, expected: SplitPosition) -> None:
        """Check that `part` is part `index` of the expected set, then take its tensors."""
        self._members.append(part)
        got = part.split
        if got != SplitPosition(index, expected.count, expected.tensors):
            said = "no split.* keys" if got is None else _describe(got)
            raise CheckpointError(
                f"{part.path}: has {said}; expected part {index + 1} of {expected.count} of a "
                f"set of {expected.tensors} tensors (it belongs to another split set)"
            )
        for name in part.names():
            if name in self._owner:
                other = getattr(self._owner[name], "path", "another part")
                raise CheckpointError(
                    f"{part.path}: tensor {name!r} is also in {other}; "
                    "expected each tensor of a split set in one part only"
                )
            self._owner[name] = part
            self.weight_map[name] = Path(part.path).name

    def info(self, name: str) -> TensorInfo:
        """Shape and dtype of `name`, as the part that holds it reads them."""
        owner = self._owner.get(name)
        if owner is None:
            raise CheckpointError(
                f"{self.path}: no tensor named {name!r}; expected one of the "
                f"{len(self._owner)} tensors of its {len(self._members)} parts"
            )
        return owner.info(name)

    def names(self) -> list[str]:
        """Every tensor of every part, part by part."""
        return list(self._owner)

    def _check_total(self, position: SplitPosition) -> None:
        if len(self._owner) != position.tensors:
            self.close()
            raise CheckpointError(
                f"{self.path}: the {position.count} parts hold {len(self._owner)} tensors; "
                f"expected {position.tensors} (the split.tensors.count of every part)"
            )


def _describe(position: SplitPosition) -> str:
    return (
        f"split.no {position.no} (part {position.no + 1}), split.count {position.count}, "
        f"split.tensors.count {position.tensors}"
    )


def _part_paths(path: Path, position: SplitPosition) -> list[Path]:
    """The files of the set that `path` (part `position.no`) belongs to, by llama.cpp's names."""
    parsed = parse_part_name(path)
    if parsed is None or parsed[1:] != (position.no, position.count):
        raise CheckpointError(
            f"{path}: is part {position.no + 1} of {position.count} of a split GGUF, but its "
            f"name is not {part_path(Path('NAME'), position.no, position.count).name}, so the "
            "other parts cannot be found; expected the parts under their llama.cpp names"
        )
    return [part_path(parsed[0], index, position.count) for index in range(position.count)]


def _open_part(path: Path, first: str) -> GGUFSource:
    """One part of the set; a missing file is named as such."""
    if not path.is_file():
        raise CheckpointError(
            f"{first}: split GGUF part {path.name} is missing ({path} does not exist); "
            "expected every part of the set beside the first"
        )
    return GGUFSource(path, split_part=True)
