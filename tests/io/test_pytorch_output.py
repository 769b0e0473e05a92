"""PyTorch output: torch.save's zip layout, read back by our reader (and by torch if installed)."""

from __future__ import annotations

import pickletools
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import TensorInfo, TorchSource
from lazyparams.io.output_formats import LayoutOptions, output_format
from lazyparams.io.output_formats.pytorch import state_dict_pickle
from lazyparams.io.output_layout import Layout

TENSORS = {
    "model.embed.weight": np.arange(24, dtype=np.float32).reshape(6, 4),
    "model.norm.weight": np.ones(4, dtype=np.float16),
    "scalar": np.array(7, dtype=np.int64),
    "empty": np.zeros((0, 3), dtype=np.int8),
    "mask": np.array([True, False]),
}


def write_state_dict(path: Path, tensors: dict[str, np.ndarray]) -> Layout:
    """Lay the tensors out as the pytorch format does and fill every slot, as a writer does."""
    import zlib

    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    layout = output_format("pytorch").lay_out(path, infos, LayoutOptions())  # type: ignore[misc]
    layout.create(path.parent)
    crcs = {}
    with open(path, "r+b") as fp:
        for name, array in tensors.items():
            slot, data = layout.slots[name], np.ascontiguousarray(array).tobytes()
            crcs[name] = zlib.crc32(data)
            fp.seek(slot.head_at)
            fp.write(layout.head(name, crcs[name]))
            fp.seek(slot.data_at)
            fp.write(data)
        fp.seek(layout.sizes[0])
        fp.write(layout.trailer(crcs))
    return layout


def test_the_archive_holds_torch_s_records_and_passes_zip_s_crc_check(tmp_path: Path) -> None:
    write_state_dict(tmp_path / "m.pt", TENSORS)
    with zipfile.ZipFile(tmp_path / "m.pt") as archive:
        assert archive.testzip() is None
        names = archive.namelist()
        assert names[:3] == ["archive/data.pkl", "archive/byteorder", "archive/version"]
        assert names[3:] == [f"archive/data/{i}" for i in range(len(TENSORS))]
        assert archive.read("archive/byteorder") == b"little"


def test_our_torch_reader_reads_every_tensor_back(tmp_path: Path) -> None:
    write_state_dict(tmp_path / "pytorch_model.bin", TENSORS)
    with TorchSource(tmp_path / "pytorch_model.bin") as source:
        assert source.names() == list(TENSORS)
        for name, array in TENSORS.items():
            got = source.load(name)
            assert got.dtype == array.dtype and got.shape == array.shape
            np.testing.assert_array_equal(got, array)


def test_the_pickle_is_well_formed_protocol_2() -> None:
    infos = [TensorInfo.from_array(n, a) for n, a in TENSORS.items()]
    pickled = state_dict_pickle(infos)
    ops = [op.name for op, _, _ in pickletools.genops(pickled)]
    assert ops[0] == "PROTO" and ops[-1] == "STOP"
    assert ops.count("BINPERSID") == len(TENSORS)


def test_torch_loads_it_with_weights_only(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    write_state_dict(tmp_path / "m.pt", TENSORS)
    loaded = torch.load(tmp_path / "m.pt", weights_only=True)
    assert list(loaded) == list(TENSORS)
    for name, array in TENSORS.items():
        np.testing.assert_array_equal(loaded[name].numpy(), array)


@pytest.mark.parametrize("dtype", ["q8_0", "int4", "float8_e4m3fn"])
def test_a_dtype_torch_has_no_storage_for_is_refused(dtype: str) -> None:
    shape = (2, 32) if dtype == "q8_0" else (2, 4)
    info = TensorInfo.of("w", shape, dtype)
    with pytest.raises(CheckpointError, match=f"no storage for {dtype}; expected one of float64"):
        output_format("pytorch").check("out.pt", [info])
