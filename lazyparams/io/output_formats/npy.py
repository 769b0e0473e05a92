"""npy output: a folder with one `name.npy` file per tensor (a `/` in a name makes a subfolder).

A dtype numpy cannot spell is stored as raw bits and tagged in the folder's `dtypes.json`.
Keeps no metadata. `--format npy` names it for a folder; a destination ending in `.npy` is one
`.npy` file, for an output of one tensor only. Imports the io layer; numpy's header code only
when laying out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.base import TensorInfo
from lazyparams.io.output_formats import LayoutOptions, OutputFormat, io_sink
from lazyparams.io.output_layout import FOLDER, Layout, Slot
from lazyparams.io.output_names import check_file_names


def check(where: str, infos: Sequence[TensorInfo]) -> None:
    """Refuse GGML block types and names that are no file name."""
    from lazyparams.io.numpy_sink import refuse_block_types

    refuse_block_types(where, infos)
    check_file_names(where, [info.name for info in infos])


def check_path(dst: Path, infos: Sequence[TensorInfo]) -> None:
    """A `.npy` destination is one file: one tensor, of a dtype numpy spells (no tag file)."""
    from lazyparams.io.dtypes import EXTENSION_DTYPES

    if not _one_file(dst):
        return
    if len(infos) != 1:
        raise CheckpointError(
            f"{dst}: a .npy file holds one tensor, and this conversion writes {len(infos)}; "
            "expected a folder name without a suffix and --format npy (one .npy file per "
            "tensor), or NAME.npz (one archive)"
        )
    if infos[0].dtype in EXTENSION_DTYPES:
        raise CheckpointError(
            f"{dst}: tensor {infos[0].name!r} is {infos[0].dtype}, which a lone .npy file "
            "cannot tag; expected a folder (--format npy, tagged in dtypes.json) or NAME.npz"
        )


def _one_file(dst: Path) -> bool:
    return dst.suffix.lower() == ".npy"


def lay_out(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> Layout:
    """One file per tensor (its npy header, then its bytes), the dtype tags last; the whole
    folder is renamed into place. A `.npy` destination is its one tensor's file."""
    from lazyparams.io.dtypes import EXTENSION_DTYPES
    from lazyparams.io.npy_format import DTYPES_FILE, npy_header

    if _one_file(dst):
        header = npy_header(infos[0])
        size = len(header) + infos[0].nbytes
        slot = Slot(0, 0, header, len(header), size, 0)
        name = Path(dst.name)
        return Layout((name,), (size,), (b"",), {infos[0].name: slot}, ((name, dst),), numpy=True)
    files, sizes, prefixes, slots = [], [], [], {}
    for index, info in enumerate(infos):
        header = npy_header(info)
        files.append(Path(f"{info.name}.npy"))
        sizes.append(len(header) + info.nbytes)
        prefixes.append(b"")
        slots[info.name] = Slot(index, 0, header, len(header), sizes[-1], 0)
    tags = {info.name: info.dtype for info in infos if info.dtype in EXTENSION_DTYPES}
    if tags:
        text = json.dumps(tags, indent=1, sort_keys=True) + "\n"
        files.append(Path(DTYPES_FILE))
        prefixes.append(text.encode("utf-8"))
        sizes.append(len(prefixes[-1]))
    return Layout(tuple(files), tuple(sizes), tuple(prefixes), slots, ((FOLDER, dst),), numpy=True)


FORMAT = OutputFormat(
    name="npy",
    suffixes=(".npy",),
    check_path=check_path,
    writes="a folder of .npy files, one per tensor (or one .npy file for one tensor)",
    check=check,
    lay_out=lay_out,
    sink=io_sink("numpy_sink", "NpyFolderSink"),
)
