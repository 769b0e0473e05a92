"""GGUF tensor infos and the data area: names, dimensions, types, blocks, offsets, and a data
area tiled exactly; each bad tensor refused naming the file, the tensor, the byte and what was
expected."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from lazyparams.io import GGUFSink, GGUFSource, TensorInfo
from lazyparams.io.gguf_reader import read_gguf_header
from tests.io.gguf_samples import patched, refused, spliced, tensor_at, write_sample

EMBD, ATTN, FFN, IDS, POS = (
    "tok_embd.weight",
    "blk.0.attn_q.weight",
    "blk.0.ffn.weight",
    "blk.0.ids",
    "blk.0.pos",
)


@pytest.fixture(name="sample")
def sample_fixture(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "m.gguf")


def test_a_name_longer_than_the_file_is_refused(sample: Path, tmp_path: Path) -> None:
    start = tensor_at(sample, ATTN)["start"]
    bad = patched(sample, tmp_path / "bad.gguf", start, "<Q", 2**50)
    refused(bad, f"tensor 1 at byte {start}", f"the tensor name (a string) needs {2**50} bytes")


@pytest.mark.parametrize(
    ("name", "message"),
    [(b"blk.0.\xc3(s", "is not valid UTF-8"), (b"blk.0\x00pos", "contains a NUL character")],
)
def test_a_name_that_is_not_clean_text_is_refused(
    sample: Path, tmp_path: Path, name: bytes, message: str
) -> None:
    start = tensor_at(sample, POS)["start"]
    bad = patched(sample, tmp_path / "bad.gguf", start + 8, "9s", name)
    refused(bad, f"tensor 4 at byte {start}", message)


def test_a_repeated_name_is_refused(sample: Path, tmp_path: Path) -> None:
    start = tensor_at(sample, POS)["start"]
    bad = patched(sample, tmp_path / "bad.gguf", start + 8, "9s", IDS.encode())
    refused(bad, f"tensor {IDS!r} at byte {start}", "is also the name of tensor 3", "unique")


@pytest.mark.parametrize("n_dims", [5, 2**32 - 1])
def test_more_than_four_dimensions_are_refused(sample: Path, tmp_path: Path, n_dims: int) -> None:
    where = tensor_at(sample, EMBD)
    bad = patched(sample, tmp_path / "bad.gguf", where["n_dims"], "<I", n_dims)
    refused(bad, f"tensor {EMBD!r} at byte {where['n_dims']}", f"{n_dims} dimensions", "at most 4")


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ((2**63, 3), "dimension 9223372036854775808 is not an integer in [0, 2**62]"),
        ((2**40, 2**40), "holds more than 2**62 elements"),
    ],
)
def test_dimensions_past_the_bounds_are_refused(
    sample: Path, tmp_path: Path, dims: tuple[int, int], message: str
) -> None:
    where = tensor_at(sample, EMBD)
    data = patched(sample, tmp_path / "bad.gguf", where["dims"], "<Q", dims[0])
    bad = patched(data, data, where["dims"] + 8, "<Q", dims[1])
    refused(bad, f"tensor {EMBD!r} at byte {where['start']}", message, "at most 2**62 elements")


def test_a_zero_dimension_is_an_empty_tensor(tmp_path: Path) -> None:
    infos = [TensorInfo.of("empty", (0, 3), "float32"), TensorInfo.of("w", (2,), "float32")]
    with GGUFSink(tmp_path / "m.gguf", infos) as sink:
        sink.write("empty", np.zeros((0, 3), np.float32))
        sink.write("w", np.ones(2, np.float32))
    with GGUFSource(tmp_path / "m.gguf") as source:
        assert source.load("empty").shape == (0, 3)
        assert source.load("w").tolist() == [1.0, 1.0]


@pytest.mark.parametrize("type_id", [4, 31, 99, 2**31])
def test_an_unknown_ggml_type_is_refused(sample: Path, tmp_path: Path, type_id: int) -> None:
    where = tensor_at(sample, IDS)
    bad = patched(sample, tmp_path / "bad.gguf", where["type"], "<I", type_id)
    refused(bad, f"tensor {IDS!r} at byte {where['type']}", f"GGML type id {type_id}", "0 (F32)")


def test_rows_that_are_not_whole_blocks_are_refused(sample: Path, tmp_path: Path) -> None:
    where = tensor_at(sample, FFN)
    bad = patched(sample, tmp_path / "bad.gguf", where["dims"], "<Q", 48)
    refused(
        bad,
        f"tensor {FFN!r} at byte {where['start']}",
        "rows of 48 values are not whole Q8_0",
        "a multiple of 32",
    )


def test_a_block_type_without_dimensions_is_refused(sample: Path, tmp_path: Path) -> None:
    where = tensor_at(sample, FFN)
    no_dims = spliced(sample, tmp_path / "bad.gguf", where["n_dims"], 4 + 16, b"\0" * 4)
    refused(no_dims, f"tensor {FFN!r}", "rows of 1 values are not whole Q8_0 blocks")


def test_an_unaligned_offset_is_refused(sample: Path, tmp_path: Path) -> None:
    where = tensor_at(sample, ATTN)
    bad = patched(sample, tmp_path / "bad.gguf", where["offset"], "<Q", 64 + 8)
    refused(bad, f"tensor {ATTN!r} at byte {where['offset']}", "data offset 72 is not a multiple")


@pytest.mark.parametrize("cut", [40, 150])
def test_a_truncated_data_area_is_refused_naming_the_tensor(
    sample: Path, tmp_path: Path, cut: int
) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(sample.read_bytes()[:-cut])
    message = refused(bad)
    assert "run past the end of the file" in message or "the data area" in message


def test_a_dimension_reaching_past_the_file_is_refused(sample: Path, tmp_path: Path) -> None:
    where = tensor_at(sample, IDS)
    bad = patched(sample, tmp_path / "bad.gguf", where["dims"], "<Q", 5000)
    refused(bad, f"tensor {IDS!r} at byte {where['start']}", "its 20000 bytes", "past the end")


def test_tensors_sharing_bytes_are_refused(sample: Path, tmp_path: Path) -> None:
    header = read_gguf_header(sample)
    inside_ffn = header.tensors[2].offset - header.data_offset + 32
    bad = patched(sample, tmp_path / "bad.gguf", tensor_at(sample, IDS)["offset"], "<Q", inside_ffn)
    message = refused(bad, "overlap those of tensor", "expected every tensor in bytes of its own")
    assert FFN in message and IDS in message


def test_unused_bytes_between_tensors_are_refused(sample: Path, tmp_path: Path) -> None:
    header = read_gguf_header(sample)
    last = header.tensors[-1]
    where = tensor_at(sample, POS)
    holed = spliced(sample, tmp_path / "bad.gguf", last.offset, 0, b"\0" * 64)
    bad = patched(holed, holed, where["offset"], "<Q", last.offset - header.data_offset + 64)
    refused(
        bad,
        f"tensor {POS!r} at byte {where['start']}",
        f"bytes after the end of tensor {IDS!r}",
        f"expected it at byte {last.offset}",
    )


def test_bytes_after_the_last_tensor_are_refused(sample: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(sample.read_bytes() + b"\0" * 40)
    refused(bad, "the data area at byte", f"follow the end of tensor {POS!r}", "to end by byte")


def test_a_last_tensor_without_its_padding_is_read(sample: Path, tmp_path: Path) -> None:
    last = read_gguf_header(sample).tensors[-1]
    short = tmp_path / "short.gguf"
    short.write_bytes(sample.read_bytes()[: last.offset + last.nbytes])
    with GGUFSource(short) as source:
        assert source.load(POS).tolist() == [0, 1, 2]


def test_a_file_without_tensors_may_end_after_its_padding_but_not_later(tmp_path: Path) -> None:
    sample = write_sample(tmp_path / "m.gguf", tensors=False)
    end = sample.stat().st_size
    padded = -(-end // 32) * 32
    (tmp_path / "pad.gguf").write_bytes(sample.read_bytes() + b"\0" * (padded - end))
    assert read_gguf_header(tmp_path / "pad.gguf").tensors == []
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(sample.read_bytes() + b"\0" * (padded - end + 32))
    refused(bad, "the data area", "follow the header")


def test_tensor_infos_need_not_follow_the_order_of_their_data(tmp_path: Path) -> None:
    infos = [TensorInfo.of(f"w{i}", (2, 8), "float32") for i in range(3)]
    with GGUFSink(tmp_path / "m.gguf", infos) as sink:
        for i, info in enumerate(infos):
            sink.write(info.name, np.full(info.shape, i, np.float32))
    data = bytearray((tmp_path / "m.gguf").read_bytes())
    first, last = (tensor_at(tmp_path / "m.gguf", f"w{i}")["offset"] for i in (0, 2))
    a, b = struct.unpack_from("<Q", data, first)[0], struct.unpack_from("<Q", data, last)[0]
    struct.pack_into("<Q", data, first, b)  # w0 and w2 swap places in the data area
    struct.pack_into("<Q", data, last, a)
    (tmp_path / "swapped.gguf").write_bytes(bytes(data))
    with GGUFSource(tmp_path / "swapped.gguf") as source:
        assert [float(source.load(f"w{i}")[0, 0]) for i in range(3)] == [2.0, 1.0, 0.0]
