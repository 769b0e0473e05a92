"""llama.cpp's split GGUF layout: part names, which tensors and keys go in which part.

A set of N parts is `PREFIX-00001-of-0000N.gguf` ...; the first part holds every metadata pair,
each part holds the keys split.no (u16, from 0), split.count (u16) and split.tensors.count
(i32, the tensors of the whole set), after its other pairs. Imports gguf and the io layer only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gguf import GGUFValue, GGUFValueType, GGUFWriter
from gguf.constants import GGUF_DEFAULT_ALIGNMENT

from lazyparams.errors import CheckpointError
from lazyparams.io.base import TensorInfo
from lazyparams.io.gguf_metadata import INT_RANGES, GGUFMetadata

SPLIT_NO = "split.no"
SPLIT_COUNT = "split.count"
SPLIT_TENSORS = "split.tensors.count"
MAX_PARTS = INT_RANGES[GGUFValueType.UINT16][1]
_SPLIT_KEYS = (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS)
_PART_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


@dataclass(frozen=True, slots=True)
class GGUFPart:
    """One output file: its final path, its tensors in order and its key/value section."""

    path: Path
    infos: list[TensorInfo]
    metadata: GGUFMetadata


@dataclass(frozen=True, slots=True)
class SplitPosition:
    """What a part's split.* keys say: its index (from 0), the number of parts, all tensors."""

    no: int
    count: int
    tensors: int


def part_path(prefix: Path, index: int, count: int) -> Path:
    """The name llama.cpp gives part `index` (from 0) of `count`: PREFIX-0000K-of-0000N.gguf."""
    return prefix.with_name(f"{prefix.name}-{index + 1:05d}-of-{count:05d}.gguf")


def parse_part_name(path: Path) -> tuple[Path, int, int] | None:
    """(prefix, index from 0, count) of a file named like a split part, else None."""
    match = _PART_NAME.match(path.name)
    if match is None:
        return None
    return path.with_name(match["prefix"]), int(match["no"]) - 1, int(match["count"])


def plan_gguf_parts(
    path: Path, infos: Sequence[TensorInfo], max_size: int | None, metadata: GGUFMetadata
) -> list[GGUFPart]:
    """The files a GGUF output at `path` is written as.

    Without `max_size`, or when everything fits one part, that is `path` itself with no split
    keys, as llama.cpp's converter does. Otherwise tensors go, in order, into parts whose data
    (each tensor padded to the alignment) stays within `max_size` bytes; a larger tensor gets a
    part of its own. The prefix of the part names is `path` without its `.gguf`.
    """
    groups = _group(infos, max_size, metadata.alignment)
    if len(groups) == 1:
        return [GGUFPart(path, groups[0], metadata)]
    if len(groups) > MAX_PARTS:
        raise CheckpointError(
            f"{path}: {len(groups)} parts needed; a split GGUF has at most {MAX_PARTS} "
            "(expected a larger shard size)"
        )
    prefix = path.with_name(path.name.removesuffix(".gguf"))
    later = GGUFMetadata(None)
    return [
        GGUFPart(
            part_path(prefix, index, len(groups)),
            group,
            (metadata if index == 0 else later).with_values(
                split_keys(index, len(groups), len(infos))
            ),
        )
        for index, group in enumerate(groups)
    ]


def _group(
    infos: Sequence[TensorInfo], max_size: int | None, first_alignment: int
) -> list[list[TensorInfo]]:
    """Tensors in order, cut into runs whose padded data fits `max_size` (one run without it)."""
    groups: list[list[TensorInfo]] = [[]]
    size = 0
    for info in infos:
        alignment = first_alignment if len(groups) == 1 else GGUF_DEFAULT_ALIGNMENT
        padded = GGUFWriter.ggml_pad(info.nbytes, alignment)
        if max_size is not None and groups[-1] and size + padded > max_size:
            groups.append([])
            size = GGUFWriter.ggml_pad(info.nbytes, GGUF_DEFAULT_ALIGNMENT)
        else:
            size += padded
        groups[-1].append(info)
    return groups


def split_keys(index: int, count: int, tensors: int) -> dict[str, GGUFValue]:
    """The split.* pairs of part `index` (from 0) of `count`, for a set of `tensors` tensors."""
    return {
        SPLIT_NO: GGUFValue(index, GGUFValueType.UINT16),
        SPLIT_COUNT: GGUFValue(count, GGUFValueType.UINT16),
        SPLIT_TENSORS: GGUFValue(tensors, GGUFValueType.INT32),
    }


def split_position(values: Mapping[str, GGUFValue], where: str) -> SplitPosition | None:
    """What the split.* keys among a GGUF header's pairs say, or None for a file that is not a
    part; refused unless all three are integers in range (1 to MAX_PARTS parts, an index
    among them, a tensor count of at least 0)."""
    if not any(key in values for key in (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS)):
        return None
    position = SplitPosition(*(_split_number(values, key, where) for key in _SPLIT_KEYS))
    if not 1 <= position.count <= MAX_PARTS:
        raise CheckpointError(
            f"{where}: {SPLIT_COUNT} is {position.count}; expected 1 to {MAX_PARTS} parts"
        )
    if not 0 <= position.no < position.count:
        raise CheckpointError(
            f"{where}: {SPLIT_NO} is {position.no}; expected 0 to {position.count - 1} "
            f"for a set of {position.count} parts"
        )
    if position.tensors < 0:
        raise CheckpointError(
            f"{where}: {SPLIT_TENSORS} is {position.tensors}; expected a count of 0 or more"
        )
    return position


def _split_number(values: Mapping[str, GGUFValue], key: str, where: str) -> int:
    """The integer value of split key `key`."""
    value = values.get(key)
    if value is None or value.type not in INT_RANGES:
        got = "missing" if value is None else f"a {value.type.name}"
        raise CheckpointError(
            f"{where}: split key {key} is {got}; expected all of {', '.join(_SPLIT_KEYS)} "
            "as integers in a split GGUF part"
        )
    return int(value.value)
