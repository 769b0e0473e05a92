"""Hostile torch checkpoints: pickles that nest, loop, collide, alter what they load or lie about
their tensors, and storages that are corrupt or compressed bombs. Every one is a CheckpointError
naming the file and the culprit, with nothing left at DST; honest files still read."""

from __future__ import annotations

import collections
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import lazyparams.io.pickle_bounds as pickle_bounds
import lazyparams.io.torch_pickle as torch_pickle
from lazyparams.engine import convert
from lazyparams.errors import CheckpointError
from lazyparams.io import TorchSource
from tests.io.rawzip import STORED, entry, write_zip
from tests.io.torch_pickles import (
    glob,
    integer,
    long,
    state_dict_pickle,
    tensor_opcodes,
    text,
    torch_zip,
    tup,
)

FOUR = np.arange(4, dtype=np.float32)
TENSOR = tensor_opcodes("FloatStorage", "0", 0, (4,), (1,))


def refused(path: Path, tmp_path: Path, pattern: str) -> str:
    """Convert `path`, expecting a CheckpointError matching `pattern` that starts with the
    file's path, and nothing at the destination."""
    dst = tmp_path / "out.safetensors"
    with pytest.raises(CheckpointError, match=pattern) as caught:
        convert("cast:float16", path, dst, progress=False)
    assert str(caught.value).startswith(str(path))
    assert not dst.exists()
    return str(caught.value)


def checkpoint(tmp_path: Path, pickled: bytes, storage: bytes = FOUR.tobytes()) -> Path:
    return torch_zip(tmp_path / "m.bin", pickled, {"0": storage})


def test_dicts_nested_5000_deep_are_refused(tmp_path: Path) -> None:
    depth = 5000
    pickled = b"\x80\x02}" + (text("k") + b"}") * depth + b"s" * depth + b"."
    refused(checkpoint(tmp_path, pickled), tmp_path, r"data\.pkl: dicts nest deeper than 64")


def test_a_dict_containing_itself_is_refused(tmp_path: Path) -> None:
    pickled = b"\x80\x02}q\x00(" + text("w") + TENSOR + text("me") + b"h\x00u."
    refused(checkpoint(tmp_path, pickled), tmp_path, r"data\.pkl: the dict at 'me' contains itself")


def test_a_dict_shared_everywhere_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 levels of a dict holding the next one twice: 2**40 key paths if walked naively
    monkeypatch.setattr(pickle_bounds, "MAX_ENTRIES", 5000)
    pickled = b"\x80\x02}q\x00" + text("w") + TENSOR + b"s"
    for level in range(1, 41):
        pickled += b"}q" + bytes([level]) + b"(" + text("a") + b"h" + bytes([level - 1])
        pickled += text("b") + b"h" + bytes([level - 1]) + b"u"
    refused(checkpoint(tmp_path, pickled + b"."), tmp_path, r"more than 5000 dict entries")


def test_names_colliding_after_joining_keys_are_refused(tmp_path: Path) -> None:
    nested = b"}" + text("b") + TENSOR + b"s"
    pickled = b"\x80\x02}(" + text("a.b") + TENSOR + text("a") + nested + b"u."
    refused(
        checkpoint(tmp_path, pickled), tmp_path,
        r"tensor name 'a\.b' comes from two key paths, \['a\.b'\] and \['a', 'b'\]; expected "
        r"unique names",
    )  # fmt: skip


def test_a_name_with_a_nul_is_refused(tmp_path: Path) -> None:
    path = checkpoint(tmp_path, state_dict_pickle({"a\x00b": TENSOR}))
    refused(path, tmp_path, r"tensor name 'a\\x00b' contains a NUL character")


def test_keys_that_are_neither_str_nor_int_are_refused(tmp_path: Path) -> None:
    pickled = b"\x80\x02}" + tup(integer(1), integer(2)) + TENSOR + b"s."
    refused(checkpoint(tmp_path, pickled), tmp_path, r"key \(1, 2\) .* is a tuple; expected str")


def test_a_one_bit_flip_in_data_pkl_is_refused(tmp_path: Path) -> None:
    path = checkpoint(tmp_path, state_dict_pickle({"w": TENSOR}))
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("archive/data.pkl")
    data = bytearray(path.read_bytes())
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 40
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
    refused(path, tmp_path, r"\[archive/data\.pkl\]: CRC-32 [0-9a-f]{8} does not match")


@pytest.mark.parametrize(
    ("size", "stride", "numel"),
    [((1 << 30,), (0,), 1), ((3, 3), (1, 1), 5), ((2, 3), (2, 1), 5), ((4, 2), (1, 3), 8)],
    ids=["stride0_4GiB", "overlap", "interleaved", "partial_overlap"],
)
def test_strides_making_elements_share_storage_are_refused(
    tmp_path: Path, size: tuple[int, ...], stride: tuple[int, ...], numel: int
) -> None:
    pickled = state_dict_pickle({"w": tensor_opcodes("FloatStorage", "0", 0, size, stride, numel)})
    path = checkpoint(tmp_path, pickled, bytes(4 * numel))
    refused(
        path, tmp_path,
        rf"tensor 'w': strides {list(stride)} for shape {list(size)} make elements share storage"
        .replace("[", r"\[").replace("]", r"\]"),
    )  # fmt: skip


def test_legal_views_of_one_storage_are_read(tmp_path: Path) -> None:
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    views = {
        "t": tensor_opcodes("FloatStorage", "0", 0, (4, 3), (1, 4), 12),
        "col": tensor_opcodes("FloatStorage", "0", 1, (3,), (4,), 12),
        "one": tensor_opcodes("FloatStorage", "0", 5, (1, 1), (0, 0), 12),
    }
    path = checkpoint(tmp_path, state_dict_pickle(views), matrix.tobytes())
    with TorchSource(path) as source:
        assert np.array_equal(source.load("t"), matrix.T)
        assert np.array_equal(source.load("col"), matrix[:, 1])
        assert source.load("one").tolist() == [[5.0]]


def test_storage_size_other_than_declared_is_refused(tmp_path: Path) -> None:
    path = checkpoint(tmp_path, state_dict_pickle({"w": TENSOR}), bytes(20))
    refused(
        path, tmp_path,
        r"tensor 'w': storage 'archive/data/0' holds 20 bytes; the pickle declares 4 elements "
        r"\(16 bytes\)",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("offset", "size", "stride", "pattern"),
    [
        (0, (long(2**300),), (1,), r"dimension <huge int> is not an integer in \[0, 2\*\*62\]"),
        (0, (integer(-1),), (1,), r"dimension -1 is not an integer in \[0, 2\*\*62\]"),
        (0, (b"\x88",), (1,), r"dimension True is not an integer"),
        (long(2**300), (4,), (1,), r"offset <huge int> .*expected integers in \[0, 2\*\*62\]"),
        (0, (4,), (integer(-1),), r"stride \(-1,\); expected integers in \[0, 2\*\*62\]"),
        (0, (4, 1), (1,), r"size \(4, 1\) and stride \(1,\); expected two tuples of one length"),
        (0, (1,) * 17, (1,) * 17, r"rank 17 exceeds the limit of 16"),
    ],
    ids=["huge_dim", "negative_dim", "bool_dim", "huge_offset", "negative_stride", "ranks",
         "rank17"],
)  # fmt: skip
def test_bad_shapes_offsets_and_strides_are_refused(
    tmp_path: Path, offset: object, size: tuple, stride: tuple, pattern: str
) -> None:
    record = tensor_opcodes("FloatStorage", "0", offset, size, stride, numel=4)  # type: ignore[arg-type]
    path = checkpoint(tmp_path, state_dict_pickle({"w": record}))
    refused(path, tmp_path, r"tensor 'w': .*" + pattern)


def test_build_cannot_alter_an_allowed_function(tmp_path: Path) -> None:
    defaults = torch_pickle._rebuild_v2.__defaults__
    state = b"N}" + text("__defaults__") + tup(integer(1)) + b"s\x86"
    pickled = b"\x80\x02" + glob("torch._utils", "_rebuild_tensor_v2") + state + b"b0}."
    refused(checkpoint(tmp_path, pickled), tmp_path, r"BUILD on a _Global; only an OrderedDict")
    assert torch_pickle._rebuild_v2.__defaults__ == defaults


def test_build_cannot_alter_a_tensor_record(tmp_path: Path) -> None:
    state = tup(b"N", b"}" + text("shape") + tup(integer(1 << 30)) + b"s")
    pickled = b"\x80\x02}" + text("w") + TENSOR + state + b"bs."
    refused(checkpoint(tmp_path, pickled), tmp_path, r"BUILD on a TensorRecord")


def test_torch_metadata_set_by_build_on_an_ordered_dict_is_accepted(tmp_path: Path) -> None:
    metadata = tup(b"}" + text("_metadata") + b"}s")
    state = glob("collections", "OrderedDict") + b")R" + metadata[1:-1] + b"b"
    pickled = b"\x80\x02" + state + text("w") + TENSOR + b"s."
    with TorchSource(checkpoint(tmp_path, pickled)) as source:
        assert np.array_equal(source.load("w"), FOUR)
    assert type(collections.OrderedDict()) is collections.OrderedDict


@pytest.mark.parametrize(
    ("payload", "name"),
    [
        (b"(" + b"\x8f" * 1000 + b"l", "EMPTY_SET"),
        (b"(" + text("x") + b"\x91", "FROZENSET"),
        (b"(" + glob("collections", "OrderedDict") + b"o", "OBJ"),
        (b"P0\n", "PERSID"),
        (b"I1\n", "INT"),
        (b"\x82\x01", "EXT1"),
    ],
    ids=["set", "frozenset", "obj", "persid", "text_int", "ext"],
)
def test_opcodes_no_state_dict_uses_are_refused(tmp_path: Path, payload: bytes, name: str) -> None:
    path = checkpoint(tmp_path, b"\x80\x02" + payload + b".")
    refused(path, tmp_path, rf"data\.pkl is not a readable state dict: opcode {name} is not used")


def test_a_pickle_past_its_step_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch_pickle, "MAX_PICKLE_STEPS", 1000)
    pickled = b"\x80\x02](" + b"}" * 400 + b"e."
    refused(checkpoint(tmp_path, pickled), tmp_path, r"more than \d+ steps; expected a state dict")


def test_an_empty_state_dict_is_blamed_on_the_checkpoint(tmp_path: Path) -> None:
    path = checkpoint(tmp_path, b"\x80\x02}(" + text("step") + integer(7) + b"u.")
    refused(path, tmp_path, r"m\.bin: the state dict holds no tensors; expected at least one")


def compressed_checkpoint(tmp_path: Path, pickled: bytes, storage: bytes) -> Path:
    members = [
        entry("archive/data.pkl", pickled, STORED),
        entry("archive/byteorder", b"little", STORED),
        entry("archive/data/0", storage),
    ]
    return write_zip(tmp_path / "m.bin", members)


def test_a_deflated_storage_bomb_inflates_only_the_tensor(tmp_path: Path) -> None:
    numel = 8 << 20  # 32 MiB of zeros, about 32 KiB deflated
    storage = bytearray(4 * numel)
    storage[-16:] = FOUR.tobytes()
    tail = tensor_opcodes("FloatStorage", "0", numel - 4, (4,), (1,), numel)
    head = tensor_opcodes("FloatStorage", "0", 0, (4,), (1,), numel)
    path = compressed_checkpoint(tmp_path, state_dict_pickle({"w": tail, "h": head}), storage)
    assert path.stat().st_size < 100_000
    with TorchSource(path) as source:
        assert np.array_equal(source.load("w"), FOUR)
        assert np.array_equal(source.load("h"), np.zeros(4, np.float32))
        assert source.read_buffer_bytes("w") < 1 << 20


def test_a_strided_tensor_of_a_deflated_storage_is_gathered(tmp_path: Path) -> None:
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    views = {
        "col": tensor_opcodes("FloatStorage", "0", 1, (3,), (4,), 12),
        "m": tensor_opcodes("FloatStorage", "0", 0, (3, 4), (4, 1), 12),
    }
    path = compressed_checkpoint(tmp_path, state_dict_pickle(views), matrix.tobytes())
    with TorchSource(path) as source:
        assert np.array_equal(source.load("col"), matrix[:, 1])
        assert source.load("col").flags.c_contiguous
        assert source.read_buffer_bytes("col") > source.read_buffer_bytes("m")
        assert np.array_equal(source.load_rows("m", 1, 3), matrix[1:3])


def test_a_corrupt_deflated_storage_is_refused_on_load(tmp_path: Path) -> None:
    storage = np.random.default_rng(0).standard_normal(4096).astype(np.float32).tobytes()
    record = tensor_opcodes("FloatStorage", "0", 0, (4096,), (1,))
    members = [
        entry("archive/data.pkl", state_dict_pickle({"w": record}), STORED),
        entry("archive/data/0", storage),
    ]
    broken = bytearray(members[1].data)
    broken[100:164] = bytes(64)
    members[1] = replace(members[1], data=bytes(broken))
    path = write_zip(tmp_path / "m.bin", members)
    refused(path, tmp_path, r"\[archive/data/0\]: (corrupt deflate|CRC-32|the deflate stream|"
            r"inflates to more)")  # fmt: skip


@pytest.mark.parametrize(
    ("pickled", "pattern"),
    [
        (b"\x80\x02}q\x00(X\x01\x00\x00\x00w", r"ends inside an opcode's argument \(truncated\)"),
        (b"\x80\x02}s.", r"an opcode takes more values than the pickle has pushed"),
        (b"\x80\x02}h\x07.", r"refers to a memo slot the pickle never filled"),
        (b"\x80\x02}]K\x01s.", r"values of the wrong kind"),
        (b"\x80\x09}.", r"an unknown pickle protocol; expected 2 to 5"),
    ],
    ids=["truncated", "underflow", "memo", "unhashable_key", "protocol"],
)
def test_pickles_that_pickle_cannot_read_are_refused_in_our_words(
    tmp_path: Path, pickled: bytes, pattern: str
) -> None:
    message = refused(checkpoint(tmp_path, pickled), tmp_path, pattern)
    assert "data.pkl is not a readable state dict" in message
    assert re.search(r"\(at byte \d+ of data\.pkl\)$", message), message


def test_a_persistent_id_holding_a_function_shows_no_address(tmp_path: Path) -> None:
    pid = tup(text("storage"), glob("torch._utils", "_rebuild_tensor_v2"), text("0"))
    pickled = b"\x80\x02}" + text("w") + pid + b"Qs."
    message = refused(checkpoint(tmp_path, pickled), tmp_path, r"unexpected persistent id")
    assert "<_Global>" in message and " at 0x" not in message
