"""npz output: one stored zip of `.npy` members, readable by plain `np.load`.

Members follow the declared order; a dtype numpy cannot spell is stored as raw bits and tagged
in its member's comment (see `npy_format`). Keeps no metadata. Imports the io layer; numpy's
header code only when laying out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lazyparams.io.base import TensorInfo
from lazyparams.io.output_formats import LayoutOptions, OutputFormat, io_sink
from lazyparams.io.output_layout import Layout, stored_zip
from lazyparams.io.output_names import check_member_names


def check(where: str, infos: Sequence[TensorInfo]) -> None:
    """Refuse GGML block types and names that are no member name."""
    from lazyparams.io.numpy_sink import refuse_block_types

    refuse_block_types(where, infos)
    check_member_names(where, [info.name for info in infos])


def lay_out(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> Layout:
    """One member `name.npy` per tensor: its npy header, then its bytes."""
    from lazyparams.io.npy_format import dtype_comment, npy_header

    tensors = [
        (info.name, f"{info.name}.npy", dtype_comment(info.dtype), npy_header(info), info.nbytes)
        for info in infos
    ]
    return stored_zip(dst, (), tensors, numpy=True)


FORMAT = OutputFormat(
    name="npz",
    suffixes=(".npz",),
    writes="one .npz archive",
    check=check,
    lay_out=lay_out,
    sink=io_sink("numpy_sink", "NpzSink"),
)
