"""The registry of output formats: every format found, looked up by name and suffix, declared whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import SINK_FORMATS, TensorInfo, open_sink
from lazyparams.io.output_formats import (
    DEFAULT,
    LayoutOptions,
    Metadata,
    Writer,
    format_names,
    format_of_suffix,
    output_format,
    output_formats,
)


def test_every_format_module_is_registered_with_the_default_first() -> None:
    assert format_names()[0] == DEFAULT
    assert set(format_names()) == {"safetensors", "npz", "npy", "gguf", "pytorch"}
    assert set(SINK_FORMATS) == {"safetensors", "npz", "npy", "gguf"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("m.safetensors", "safetensors"),
        ("m.npz", "npz"),
        ("x.npy", "npy"),
        ("m.GGUF", "gguf"),
        ("pytorch_model.bin", "pytorch"),
        ("m.pt", "pytorch"),
        ("m.pth", "pytorch"),
        ("out", None),
        ("out.onnx", None),
    ],
)
def test_a_suffix_names_at_most_one_format(name: str, expected: str | None) -> None:
    found = format_of_suffix(name)
    assert (found.name if found else None) == expected
    claimed = [s for f in output_formats() for s in f.suffixes]
    assert len(claimed) == len(set(claimed))


def test_each_format_declares_what_the_engine_needs() -> None:
    for fmt in output_formats():
        assert fmt.writes and isinstance(fmt.metadata, Metadata)
        assert (fmt.lay_out is not None) == (fmt.writer is Writer.SLOTS), fmt.name


def test_an_unknown_format_is_refused_listing_the_registered_ones() -> None:
    with pytest.raises(CheckpointError, match=r"expected one of safetensors, gguf, npy, npz"):
        output_format("onnx")


def test_open_sink_refuses_a_format_without_an_io_sink(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"pytorch output has no sink .* one of safetensors"):
        open_sink(tmp_path / "m.pt", [TensorInfo.of("w", (2,), "float32")])


def test_a_layout_places_every_tensor_inside_its_file(tmp_path: Path) -> None:
    infos = [TensorInfo.of("a", (3, 4), "float32"), TensorInfo.of("b", (5,), "int8")]
    for fmt in output_formats():
        if fmt.lay_out is None:
            continue
        dst = tmp_path / ("out" if fmt.check_path else f"out{fmt.suffix}")  # npy: a folder
        options = LayoutOptions(metadata=_metadata(fmt.metadata), scratch=tmp_path / "scratch")
        layout = fmt.lay_out(dst, infos, options)
        for info in infos:
            slot = layout.slots[info.name]
            assert slot.end - slot.data_at == info.nbytes
            assert slot.end <= layout.sizes[slot.file]


def _metadata(kind: Metadata) -> object:
    from lazyparams.io import check_gguf_metadata

    return check_gguf_metadata({"general.architecture": "test"}) if kind is Metadata.GGUF else None
