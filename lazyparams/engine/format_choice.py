"""Which format a conversion writes, agreed between DST, `--format` and the recipe, before any data.

The format is `--format`, else the one DST's suffix names (see `io.output_formats`), else the
one a target recipe writes (`gguf`), else safetensors. Each disagreement is refused naming what
each side asks for and what to do: a suffix naming another format than `--format`, a recipe
whose output another format cannot hold (a GGUF target into `.safetensors` would drop its
key-values and tokenizer). Notices name what the output will lack: metadata the source has and
the format cannot keep, the architecture of a GGUF written as a plain tensor container.
Imports `io` (gguf's metadata code only when checking metadata) and the engine's specs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lazyparams.engine.specs import ResolvedSpec
from lazyparams.errors import CheckpointError, ConvertError
from lazyparams.io import TensorInfo
from lazyparams.io.output_formats import (
    DEFAULT,
    Metadata,
    OutputFormat,
    format_of_suffix,
    output_format,
    with_metadata,
)

ARCH_KEY = "general.architecture"


def choose_format(dst: Any, format: str | None, resolved: ResolvedSpec) -> str | None:
    """The name of the format written to DST (None for a dict or sink destination)."""
    if not isinstance(dst, str | os.PathLike):
        return format
    asked = registered(format) if format else None
    named = format_of_suffix(dst)
    if asked is not None and named is not None and named is not asked:
        raise ConvertError(
            f"{dst}: its suffix {Path(dst).suffix!r} names {named.name} output, but the format "
            f"asked for is {asked.name}; expected a destination ending in "
            f"{_endings(asked)}, or no --format"
        )
    writes = registered(resolved.output_format) if resolved.output_format else None
    chosen = asked or named or writes or output_format(DEFAULT)
    if writes is not None and chosen is not writes:
        how = (
            f"--format {writes.name}"
            if asked is None
            else f"--format {writes.name} (not {asked.name})"
        )
        raise ConvertError(
            f"{dst}: recipe {resolved.name!r} writes {writes.writes}; expected a destination "
            f"ending in {_endings(writes)}, or {how}"
        )
    return chosen.name


def registered(name: str | None) -> OutputFormat:
    """The registered format `name` (the default for None), as a ConvertError if unknown."""
    try:
        return output_format(name or DEFAULT)
    except CheckpointError as err:
        raise ConvertError(str(err)) from None


def check_storable(
    where: str, format: str, outputs: Sequence[TensorInfo], metadata: Mapping[str, Any] | None
) -> None:
    """Refuse outputs (names, dtypes) or metadata that `format` cannot hold, before any data.

    Depends on the format alone, not on the destination's path, so `plan` runs it too: `where`
    starts the messages (the destination, or what a plan calls the output).
    """
    chosen = registered(format)
    chosen.check(where, outputs)
    if metadata is not None and chosen.metadata is not Metadata.GGUF:
        kept = " and ".join(with_metadata(Metadata.GGUF))
        raise ConvertError(f"metadata: key/value metadata is for {kept} output, not {chosen.name}")
    if metadata is not None:
        from lazyparams.io.gguf_metadata import check_gguf_metadata

        check_gguf_metadata(metadata, where=where)


def _endings(chosen: OutputFormat) -> str:
    if not chosen.suffixes:
        return "no suffix (a folder)"
    return " or ".join(chosen.suffixes)


def file_metadata(
    resolved: ResolvedSpec,
    outputs: Sequence[TensorInfo],
    given: Mapping[str, Any] | None,
    chosen: str | None,
) -> Mapping[str, Any] | None:
    """The SPEC's metadata for a format that keeps GGUF key-values, overridden by the
    caller's (`given`); `given` alone for any other format (which refuses it)."""
    if chosen is None or output_format(chosen).metadata is not Metadata.GGUF:
        return given
    merged = resolved.metadata(outputs)
    merged.update(given or {})
    return merged or None


def format_notices(
    source: Any, chosen: str | None, resolved: ResolvedSpec, metadata: Mapping[str, Any] | None
) -> tuple[str, ...]:
    """One-line notices about the output, before any data: the source's metadata it cannot
    keep, a GGUF that names no architecture."""
    notes = [lost_metadata(source, chosen)]
    if chosen is not None and output_format(chosen).metadata is Metadata.GGUF:
        notes.append(_no_architecture(resolved, metadata))
    return tuple(note for note in notes if note is not None)


def _no_architecture(resolved: ResolvedSpec, metadata: Mapping[str, Any] | None) -> str | None:
    """GGUF is also a plain tensor container (the one format for GGML block types a SPEC
    quantizes to), so a recipe without an architecture still writes one; the notice says
    that llama.cpp will not load it, and what writes a file it loads."""
    if metadata is not None and ARCH_KEY in metadata:
        return None
    return (
        f"recipe {resolved.name!r} gives the GGUF file no {ARCH_KEY}: it is written as a plain "
        "tensor container, which llama.cpp does not load; for llama.cpp's file use the gguf "
        f"recipe (gguf[:TYPE]: its names, key-values and tokenizer), or --metadata {ARCH_KEY}=NAME"
    )


def lost_metadata(source: Any, chosen: str | None) -> str | None:
    """A notice when the source holds metadata the chosen format cannot keep, else None."""
    if chosen is None:
        return None
    kind = output_format(chosen).metadata
    held = _source_metadata(source)
    if held is None or held is kind:
        return None
    if held is Metadata.GGUF:
        return (
            f"the source's GGUF key-values are not written to {chosen} output (only "
            f"{' and '.join(with_metadata(Metadata.GGUF))} keeps them: --metadata-from SRC)"
        )
    keeps = " and ".join(with_metadata(held))
    return f"the source's metadata ({held.value}) is not kept by {chosen} output (only {keeps})"


def _source_metadata(source: Any) -> Metadata | None:
    """The kind of metadata a source holds: text pairs, GGUF key-values, or none."""
    metadata = getattr(source, "metadata", None)
    if isinstance(metadata, Mapping) and metadata:
        text = all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        return Metadata.STRINGS if text else Metadata.GGUF
    path = getattr(source, "path", None)
    named = format_of_suffix(path) if isinstance(path, str) else None
    if named is not None and named.metadata is Metadata.GGUF:
        return Metadata.GGUF  # every GGUF file holds key-values, its architecture first
    return None
