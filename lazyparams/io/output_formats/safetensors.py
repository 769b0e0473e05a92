"""safetensors output: one file, or shards with a Hugging Face index; the default format.

Written by the engine's shard writer, each tensor at its offset in files whose headers are
written first (the parts of a cluster run write into them too); keeps a text `__metadata__`.
Imports the io layer; its sink and header code only when used.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.base import TensorInfo
from lazyparams.io.output_formats import LayoutOptions, Metadata, OutputFormat, Writer, io_sink


def check(where: str, infos: Sequence[TensorInfo]) -> None:
    """Refuse a dtype safetensors has no code for (GGML block types among them)."""
    from lazyparams.io.safetensors_format import DTYPE_TO_CODE

    for info in infos:
        if info.dtype not in DTYPE_TO_CODE:
            raise CheckpointError(
                f"{where}: tensor {info.name!r}: safetensors has no dtype for {info.dtype}; "
                f"expected one of {', '.join(DTYPE_TO_CODE)} (GGML block types are written "
                "to .gguf)"
            )


def files(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> list[Path]:
    """The shards, then the index if there is one."""
    from lazyparams.io.safetensors_sink import plan_shards

    plan = plan_shards(dst, infos, options.shard_size)
    return [final for final, _ in plan.shards] + ([] if plan.index is None else [plan.index])


FORMAT = OutputFormat(
    name="safetensors",
    suffixes=(".safetensors",),
    writes="a safetensors file (or a folder of shards with an index)",
    check=check,
    metadata=Metadata.STRINGS,
    writer=Writer.SHARDS,
    files=files,
    shardable=True,
    sink=io_sink("safetensors_sink", "SafetensorsSink", shard_size="max_shard_size"),
)
