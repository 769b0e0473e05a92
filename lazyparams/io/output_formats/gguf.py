"""GGUF output: the file llama.cpp loads, or its split parts (`NAME-0000K-of-0000N.gguf`).

Stores element dtypes and GGML block types, and GGUF key-values (a tokenizer among them); the
header and tensor table are written first, each tensor then lands at its aligned offset.
Imports the io layer; gguf's library only when checking or laying out.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from lazyparams.io.base import TensorInfo
from lazyparams.io.output_formats import LayoutOptions, Metadata, OutputFormat, io_sink
from lazyparams.io.output_layout import Layout, Slot
from lazyparams.io.output_names import check_gguf_names


def check(where: str, infos: Sequence[TensorInfo]) -> None:
    """Refuse a dtype GGUF has no type for, and names llama.cpp cannot read."""
    from lazyparams.io.gguf_format import check_gguf_dtypes

    check_gguf_dtypes(where, infos)
    check_gguf_names(where, [info.name for info in infos])


def files(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> list[Path]:
    """The file, or its parts when `shard_size` splits it."""
    from lazyparams.io.gguf_split import plan_gguf_parts

    return [part.path for part in plan_gguf_parts(dst, infos, options.shard_size, options.metadata)]


def lay_out(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> Layout:
    """One file per part; each header is written into `options.scratch` (made and removed
    here) to learn its bytes."""
    from lazyparams.io.gguf_format import lay_out_gguf
    from lazyparams.io.gguf_split import plan_gguf_parts

    assert options.scratch is not None
    files, sizes, prefixes, slots = [], [], [], {}
    options.scratch.mkdir(parents=True, exist_ok=True)
    try:
        parts = plan_gguf_parts(dst, infos, options.shard_size, options.metadata)
        for index, part in enumerate(parts):
            scratch = options.scratch / part.path.name
            offsets, size = lay_out_gguf(scratch, part.infos, metadata=part.metadata)
            with open(scratch, "rb") as fp:
                prefixes.append(fp.read(min(offsets.values(), default=size)))
            files.append(Path(part.path.name))
            sizes.append(size)
            for info in part.infos:
                at = offsets[info.name]
                slots[info.name] = Slot(index, at, b"", at, at + info.nbytes, at)
    finally:
        shutil.rmtree(options.scratch, ignore_errors=True)
    published = tuple((Path(f.name), dst.with_name(f.name)) for f in files)
    return Layout(tuple(files), tuple(sizes), tuple(prefixes), slots, published)


FORMAT = OutputFormat(
    name="gguf",
    suffixes=(".gguf",),
    writes="a GGUF file (metadata and tokenizer included)",
    metadata=Metadata.GGUF,
    check=check,
    lay_out=lay_out,
    files=files,
    shardable=True,
    sink=io_sink("gguf_format", "GGUFSink"),
)
