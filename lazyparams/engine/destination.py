"""The destination of a conversion, checked before any data is read, then opened for writing.

DST is a path (of the format `format_choice` chooses from the registry, `io.output_formats`), a
dict (filled with the outputs once complete) or a sink object. Checks: the format and its
options, that the outputs' names and dtypes can be stored; then, holding DST's lock, that no
output file exists yet and, on resume, that the interrupted job is this one (by content). The
format's writer is one of the engine's two staged writers. Imports `io` and the engine's own
modules.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyparams.engine.dst_lock import DestinationLock
from lazyparams.engine.fingerprint import DEFAULT_MODE, fingerprints
from lazyparams.engine.format_choice import check_storable, registered
from lazyparams.engine.journal import work_dir
from lazyparams.engine.output import (
    SOURCE_FILES,
    Output,
    SinkOutput,
    StagedSafetensors,
    resumable_done,
)
from lazyparams.engine.staged import PUBLISHING_FILE, StagedFiles, verified_done
from lazyparams.errors import ConvertError
from lazyparams.io import CheckpointSink, DictSink, TensorInfo, check_gguf_metadata
from lazyparams.io.output_formats import (
    DEFAULT,
    LayoutOptions,
    Metadata,
    OutputFormat,
    Writer,
    format_of_suffix,
    output_format,
    output_formats,
)
from lazyparams.io.output_layout import Layout
from lazyparams.io.source_formats import source_files

JOB_VERSION = 4
"""4: the transform is identified by its structural hash, not its printed text."""


@dataclass(slots=True)
class Destination:
    """Where the outputs go; `prepare` reads what an interrupted run left, `open` writes."""

    target: Path | MutableMapping[str, Any] | CheckpointSink
    outputs: tuple[TensorInfo, ...]
    format: str = DEFAULT
    shard_size: int | None = None
    resume: bool = False
    metadata: Mapping[str, Any] | None = None
    done: set[str] = field(default_factory=set)
    resuming: bool = False
    lock: DestinationLock | None = None
    records: dict[str, int] = field(default_factory=dict)
    header_metadata: dict[str, str] | None = None
    """The safetensors `__metadata__` of every output file (the source's, kept)."""
    side_files: dict[str, bytes] = field(default_factory=dict)
    """Files a folder destination gets beside the tensors (a merged model's config.json and
    tokenizer), each written whole and renamed into place once the tensors are published."""
    _layout: Layout | None = field(default=None, init=False, repr=False)

    @property
    def path(self) -> Path | None:
        """The destination path, or None for a dict or sink object."""
        return self.target if isinstance(self.target, Path) else None

    def publish_side_files(self) -> None:
        """Write `side_files` into the published folder (each to a temporary name, then
        renamed, so none is ever seen half-written)."""
        folder = self.path
        if folder is None or not self.side_files:
            return
        for name, content in self.side_files.items():
            temporary = folder / f".{name}.partial"
            temporary.write_bytes(content)
            os.replace(temporary, folder / name)

    @property
    def output_format(self) -> OutputFormat:
        """The registered format written."""
        return output_format(self.format)

    def files(self) -> list[Path]:
        """The paths the finished conversion publishes."""
        if self.path is None:
            return []
        return self.output_format.files(self.path, self.outputs, self._options())

    def _options(self, scratch: Path | None = None) -> LayoutOptions:
        """The options the format lays out with: the shard size, its checked metadata."""
        kind = self.output_format.metadata
        metadata: Any = self.header_metadata if kind is Metadata.STRINGS else None
        if kind is Metadata.GGUF:
            metadata = check_gguf_metadata(self.metadata, where=str(self.path))
        return LayoutOptions(self.shard_size, metadata, scratch)

    @property
    def has_partial(self) -> bool:
        """Whether an interrupted conversion left a work folder for this path."""
        return self.path is not None and work_dir(self.path).exists()

    def prepare(self, job: dict[str, Any]) -> None:
        """Lock the destination, refuse an existing output; on resume, read (and for npz, npy
        and GGUF verify) the outputs already written. The lock is held until `release`."""
        if self.path is None:
            return
        self.lock = DestinationLock(self.path)
        try:
            self._check_free()
            if self.resume:
                self._read_partial(job)
        except BaseException:
            self.release()
            raise

    def _check_free(self) -> None:
        assert self.path is not None
        publishing = (work_dir(self.path) / PUBLISHING_FILE).exists()
        for path in [self.path, *self.files()]:
            if not path.exists() or (publishing and self.resume):
                continue
            if publishing:
                raise ConvertError(
                    f"{path}: published by an interrupted conversion that was stopped while "
                    f"moving its parts into place (the rest are in {work_dir(self.path)}); "
                    "rerun with --resume to finish publishing"
                )
            raise ConvertError(
                f"{path}: already exists; expected a destination that does not exist "
                "(remove it or choose another)"
            )

    def _read_partial(self, job: dict[str, Any]) -> None:
        assert self.path is not None
        done = resumable_done(self.path, job)
        self.resuming = done is not None
        if done is not None and self.output_format.writer is Writer.SLOTS:
            self.records = verified_done(self.path, self.layout())
            done = set(self.records)
        self.done = done or set()

    def layout(self) -> Layout:
        """Where each output goes in a destination written by slots (computed once)."""
        lay_out = self.output_format.lay_out
        assert self.path is not None and lay_out is not None
        if self._layout is None:
            options = self._options(scratch=work_dir(self.path) / "layout")
            self._layout = lay_out(self.path, self.outputs, options)
        return self._layout

    def release(self) -> None:
        """Let go of the destination's lock (idempotent)."""
        if self.lock is not None:
            self.lock.release()

    def open(self, job: dict[str, Any]) -> Output:
        """Start writing: creates the output's temporaries (which also checks it is writable)."""
        if isinstance(self.target, MutableMapping):
            return DictOutput(self.target, self.outputs)
        if self.path is None:
            return SinkOutput(self.target, [])  # type: ignore[arg-type]
        if self.output_format.writer is Writer.SHARDS:
            return StagedSafetensors(
                self.path, self.outputs, self.shard_size, job, self.resuming, self.header_metadata
            )
        done = self.records if self.resuming else None
        return StagedFiles(self.path, self.layout(), self.outputs, job, done)


class DictOutput(SinkOutput):
    """Collects the outputs in memory; the caller's dict receives them once all are there."""

    def __init__(self, target: MutableMapping[str, Any], outputs: Sequence[TensorInfo]) -> None:
        super().__init__(DictSink(outputs), [])
        self.target = target

    def finalize(self) -> None:
        super().finalize()
        assert isinstance(self.sink, DictSink)
        self.target.update(self.sink.tensors)


def destination(
    dst: Any,
    outputs: Sequence[TensorInfo],
    *,
    format: str | None,
    shard_size: int | None,
    resume: bool,
    metadata: Mapping[str, Any] | None = None,
) -> Destination:
    """Check DST and its options (nothing is created) and describe the destination.

    GGUF metadata is checked here too, so a bad pair is refused before any data is read.
    """
    if isinstance(dst, str | os.PathLike):
        path = Path(dst)
        chosen = registered(format) if format else format_of_suffix(path) or registered(None)
        if shard_size is not None and not chosen.shardable:
            shardable = " and ".join(f.name for f in output_formats() if f.shardable)
            raise ConvertError(f"shard_size: sharding is for {shardable} output, not {chosen.name}")
        check_storable(str(path), chosen.name, outputs, metadata)
        if chosen.check_path is not None:
            chosen.check_path(path, outputs)
        return Destination(path, tuple(outputs), chosen.name, shard_size, resume, metadata)
    options = (("format", format), ("shard_size", shard_size), ("resume", resume))
    for name, value in (*options, ("metadata", metadata)):
        if value:
            raise ConvertError(f"{name}: applies to a destination path, got a {type(dst).__name__}")
    if isinstance(dst, MutableMapping):
        return Destination(dst, tuple(outputs))
    if all(callable(getattr(dst, m, None)) for m in ("write", "finalize", "abort")):
        _check_declared(dst, outputs)
        return Destination(dst, tuple(outputs))
    raise ConvertError(f"expected a destination path, dict or sink, got {type(dst).__name__}")


def write_tensors(
    dst: str | os.PathLike[str],
    infos: Sequence[TensorInfo],
    array: Callable[[TensorInfo], Any],
    *,
    format: str | None = None,
    shard_size: int | None = None,
) -> list[Path]:
    """Write `array(info)` for every tensor to DST through the staged writer a conversion
    uses (checked, locked and published whole, as `convert` does); the published files."""
    target = destination(dst, infos, format=format, shard_size=shard_size, resume=False)
    target.prepare({})
    try:
        output = target.open({})
        try:
            for info in infos:
                output.write(info.name, array(info))
            output.finalize()
        except BaseException:
            output.abort()
            raise
    finally:
        target.release()
    return target.files()


def _check_declared(sink: Any, outputs: Sequence[TensorInfo]) -> None:
    declared = getattr(sink, "infos", None)
    expected = {info.name: info for info in outputs}
    if isinstance(declared, dict) and declared != expected:
        wrong = next((i for i in outputs if declared.get(i.name) != i), None)
        what = f"tensor {wrong.name!r} as {wrong}" if wrong else f"only the {len(outputs)} outputs"
        raise ConvertError(f"sink {type(sink).__name__}: expected it to declare {what}")


def job_description(
    transform_id: str,
    source: Any,
    outputs: Sequence[TensorInfo],
    dst: Destination,
    verify: str = DEFAULT_MODE,
) -> dict[str, Any]:
    """What identifies a conversion, so that a resume continues only the same one: digests of
    the transform, the source's tensors and the outputs, the options, and the source files'
    content fingerprints (`verify`: full, the default, or sampled; see `fingerprint`). A
    destination that is no path (a dict, a sink) cannot be resumed: its source files are not
    read for fingerprints."""
    inputs = [(n, source.info(n).shape, source.info(n).dtype) for n in source.names()]
    files = source_files(source) if dst.path is not None else []
    return {
        "version": JOB_VERSION,
        "transform": _digest(transform_id),
        "source": _digest(inputs),
        SOURCE_FILES: fingerprints(files, verify),
        "outputs": _digest([(i.name, i.shape, i.dtype) for i in outputs]),
        "format": dst.format,
        "shard_size": dst.shard_size,
    }


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_header_metadata(source: Any) -> dict[str, str] | None:
    """A safetensors source's `__metadata__` (text keys and values, such as `format: pt`),
    which a safetensors output keeps; None for a source without any."""
    metadata = getattr(source, "metadata", None)
    if not isinstance(metadata, Mapping) or not metadata:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        return None
    return dict(metadata)
