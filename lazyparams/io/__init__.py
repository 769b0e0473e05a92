"""Checkpoint formats: sources that list and load tensors one at a time, sinks that stream.

safetensors (single or sharded), .npz, folders of .npy, GGUF (single or split, with metadata)
and zip-format torch files; every error is a CheckpointError naming the file. Imports numpy,
ml_dtypes, gguf and lazyparams.errors, each format's module on first use of its names, so that
a command loads only the formats it reads and writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazyparams.lazy_names import lazy_package

if TYPE_CHECKING:
    from lazyparams.io.base import (
        CheckpointSink,
        CheckpointSource,
        SinkBase,
        SourceBase,
        TensorInfo,
        check_declared,
    )
    from lazyparams.io.detect import open_source
    from lazyparams.io.dtypes import DTYPE_NAMES, dtype_name, numpy_dtype
    from lazyparams.io.gguf_format import GGUFSink, GGUFSource
    from lazyparams.io.gguf_metadata import GGUFMetadata, check_gguf_metadata, read_gguf_metadata
    from lazyparams.io.gguf_split import GGUFPart, plan_gguf_parts
    from lazyparams.io.gguf_split_source import GGUFSplitSource
    from lazyparams.io.memory import DictSink, DictSource
    from lazyparams.io.numpy_sink import NpyFolderSink, NpzSink
    from lazyparams.io.numpy_source import NpyFolderSource, NpzSource
    from lazyparams.io.output_formats import SINK_FORMATS, open_sink
    from lazyparams.io.safetensors_sink import SafetensorsSink, plan_shards
    from lazyparams.io.safetensors_source import SafetensorsSource
    from lazyparams.io.sharded_source import ShardedSource
    from lazyparams.io.torch_source import TorchSource

_MODULE_OF: dict[str, str] = {
    **dict.fromkeys(
        (
            "CheckpointSink",
            "CheckpointSource",
            "SinkBase",
            "SourceBase",
            "TensorInfo",
            "check_declared",
        ),
        "base",
    ),
    "open_source": "detect",
    **dict.fromkeys(("SINK_FORMATS", "open_sink"), "output_formats"),
    **dict.fromkeys(("DTYPE_NAMES", "dtype_name", "numpy_dtype"), "dtypes"),
    **dict.fromkeys(("GGUFSink", "GGUFSource"), "gguf_format"),
    **dict.fromkeys(("GGUFMetadata", "check_gguf_metadata", "read_gguf_metadata"), "gguf_metadata"),
    **dict.fromkeys(("GGUFPart", "plan_gguf_parts"), "gguf_split"),
    "GGUFSplitSource": "gguf_split_source",
    **dict.fromkeys(("DictSink", "DictSource"), "memory"),
    **dict.fromkeys(("NpyFolderSink", "NpzSink"), "numpy_sink"),
    **dict.fromkeys(("NpyFolderSource", "NpzSource"), "numpy_source"),
    **dict.fromkeys(("SafetensorsSink", "plan_shards"), "safetensors_sink"),
    "SafetensorsSource": "safetensors_source",
    "ShardedSource": "sharded_source",
    "TorchSource": "torch_source",
}

__all__ = [
    "DTYPE_NAMES",
    "SINK_FORMATS",
    "CheckpointSink",
    "CheckpointSource",
    "DictSink",
    "DictSource",
    "GGUFMetadata",
    "GGUFPart",
    "GGUFSink",
    "GGUFSource",
    "GGUFSplitSource",
    "NpyFolderSink",
    "NpyFolderSource",
    "NpzSink",
    "NpzSource",
    "SafetensorsSink",
    "SafetensorsSource",
    "ShardedSource",
    "SinkBase",
    "SourceBase",
    "TensorInfo",
    "TorchSource",
    "check_declared",
    "check_gguf_metadata",
    "dtype_name",
    "numpy_dtype",
    "open_sink",
    "open_source",
    "plan_gguf_parts",
    "plan_shards",
    "read_gguf_metadata",
]

__getattr__, __dir__ = lazy_package(__name__, _MODULE_OF)
