"""Checkpoint formats: sources that list and load tensors one at a time, sinks that stream.

safetensors (single or sharded), .npz, folders of .npy, GGUF and zip-format torch files; every
error is a CheckpointError naming the file. Imports numpy, ml_dtypes, gguf and lazyparams.errors.
"""

from lazyparams.io.base import (
    CheckpointSink,
    CheckpointSource,
    SinkBase,
    SourceBase,
    TensorInfo,
    check_declared,
)
from lazyparams.io.detect import SINK_FORMATS, open_sink, open_source
from lazyparams.io.dtypes import DTYPE_NAMES, dtype_name, numpy_dtype
from lazyparams.io.gguf_format import GGUFSink, GGUFSource
from lazyparams.io.memory import DictSink, DictSource
from lazyparams.io.numpy_sink import NpyFolderSink, NpzSink
from lazyparams.io.numpy_source import NpyFolderSource, NpzSource
from lazyparams.io.safetensors_sink import SafetensorsSink, plan_shards
from lazyparams.io.safetensors_source import SafetensorsSource
from lazyparams.io.sharded_source import ShardedSource
from lazyparams.io.torch_source import TorchSource

__all__ = [
    "DTYPE_NAMES",
    "SINK_FORMATS",
    "CheckpointSink",
    "CheckpointSource",
    "DictSink",
    "DictSource",
    "GGUFSink",
    "GGUFSource",
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
    "dtype_name",
    "numpy_dtype",
    "open_sink",
    "open_source",
    "plan_shards",
]
