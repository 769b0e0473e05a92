"""The reference readers: what the format's own library makes of a file lazyparams accepted.

The safetensors library (`safetensors.deserialize`) and numpy (`np.load`) read the same files;
a file they refuse that lazyparams accepts is `laxer`, one where they give other tensors is
`differs` (a silently wrong read). Torch and GGUF have no reference here: torch is not a test
dependency and the gguf package's reader is itself one of the things being fuzzed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import safetensors

Tensors = dict[str, tuple[tuple[int, ...], bytes]]


class ReferenceDisagrees(Exception):
    """The reference library refused what lazyparams accepted, or read other tensors."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _safetensors_file(path: Path) -> Tensors:
    entries = safetensors.deserialize(path.read_bytes())
    return {name: (tuple(spec["shape"]), bytes(spec["data"])) for name, spec in entries}


def _sharded(folder: Path) -> Tensors | None:
    indexes = sorted(folder.glob("*.index.json"))
    if not indexes:  # the index was dropped or renamed: not a sharded checkpoint any more
        return None
    index = indexes[0]
    shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    found: Tensors = {}
    for shard in shards:
        found |= _safetensors_file(folder / shard)
    return found


def _npz(path: Path) -> Tensors:
    """The arrays of the archive's .npy members (numpy hands other members back as bytes,
    read with their CRC checked; they are no tensors, and lazyparams does not read them)."""
    with np.load(path, allow_pickle=False) as archive:
        names = [n[: -len(".npy")] for n in archive.zip.namelist() if n.endswith(".npy")]
        arrays = {name: archive[name] for name in names}
    return {name: (a.shape, _native_bytes(a)) for name, a in arrays.items()}


def _native_bytes(array: Any) -> bytes:
    """The array's bytes in native byte order: lazyparams reads a big-endian member into the
    native dtype (the same values), where numpy keeps the member's byte order."""
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return bytes(np.ascontiguousarray(array).tobytes())


def _merge(path: Path) -> Tensors | None:
    """The models a merge seed's configuration still names (folders a and b), read by the
    safetensors library and named as the source set names them."""
    import yaml

    try:
        config = yaml.safe_load(path.read_text())
        named = {str(m.get("model")) for m in config["models"] if isinstance(m, dict)}
    except Exception:  # no longer a configuration PyYAML reads as a merge
        return None
    found: Tensors = {}
    for alias in sorted(named & {"a", "b"}):
        model = path.parent / alias / "model.safetensors"
        found.update({f"{alias}::{k}": v for k, v in _safetensors_file(model).items()})
    return found


READERS: dict[str, Any] = {
    "safetensors": _safetensors_file,
    "sharded": _sharded,
    "npz": _npz,
    "merge": _merge,
}


def compare(format: str, target: Path, ours: Tensors) -> None:
    """Raise ReferenceDisagrees unless the reference reads `target` as `ours` (names and bits)."""
    reader = READERS.get(format)
    if reader is None:
        return
    try:
        theirs = reader(target)
    except Exception as err:
        last = f"{type(err).__name__}: {str(err)[:200]}"
        raise ReferenceDisagrees(
            "laxer", f"the reference refuses what was accepted: {last}"
        ) from None
    if theirs is None:  # no longer a checkpoint of this format (lazyparams read it as another)
        return
    for name, (shape, data) in ours.items():
        if name in theirs and theirs[name] != (shape, data):
            got = theirs[name][0]
            raise ReferenceDisagrees(
                "differs",
                f"tensor {name!r}: read as {shape}, the reference reads {got} or other bytes",
            )
    missing = sorted(set(ours) - set(theirs))
    if missing:
        raise ReferenceDisagrees("differs", f"tensors the reference does not have: {missing[:3]}")


def snapshot(shape: tuple[int, ...], array: Any) -> tuple[tuple[int, ...], bytes]:
    """What `compare` needs of one loaded tensor."""
    return tuple(shape), np.ascontiguousarray(array).tobytes()
