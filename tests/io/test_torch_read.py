"""TorchSource: zip-format torch.save files read without torch and without running pickles."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import TorchSource, open_source
from tests.io.torch_pickles import glob, state_dict_pickle, tensor_opcodes, text, torch_zip, tup

Check = Callable[[Any, np.ndarray], None]
TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8"]
TORCH_DTYPES += ["uint8", "bool", "float8_e4m3fn", "float8_e5m2"]


# -- tests without torch --------------------------------------------------------------------------


def test_hand_built_state_dict_is_read(tmp_path: Path) -> None:
    storage = np.arange(12, dtype=np.float32)
    bf16 = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    entries = {
        "w": tensor_opcodes("FloatStorage", "0", 0, (3, 4), (4, 1)),
        "w_t": tensor_opcodes("FloatStorage", "0", 0, (4, 3), (1, 4)),
        "row": tensor_opcodes("FloatStorage", "0", 4, (4,), (1,), numel=12),
        "h": tensor_opcodes("BFloat16Storage", "1", 0, (2,), (1,)),
    }
    path = torch_zip(
        tmp_path / "m.bin",
        state_dict_pickle(entries),
        {"0": storage.tobytes(), "1": bf16.tobytes()},
    )
    with TorchSource(path) as source:
        assert source.names() == ["w", "w_t", "row", "h"]
        assert source.info("w_t").shape == (4, 3)
        assert np.array_equal(source.load("w"), storage.reshape(3, 4))
        assert np.array_equal(source.load("w_t"), storage.reshape(3, 4).T)
        assert np.array_equal(source.load("row"), storage[4:8])
        assert source.load("h").dtype == ml_dtypes.bfloat16
        assert not source.load("w").flags.writeable


def test_pickle_that_would_run_code_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = glob("os", "system") + tup(text(f"touch {marker}")) + b"R."
    path = torch_zip(tmp_path / "evil.pt", b"\x80\x02" + payload, {})
    with pytest.raises(CheckpointError, match=r"refusing to load global 'os\.system'") as caught:
        TorchSource(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert not marker.exists()


def test_stack_global_to_builtins_is_refused(tmp_path: Path) -> None:
    # protocol 4: STACK_GLOBAL takes module and name from the stack
    payload = b"\x80\x04" + text("builtins") + text("eval") + b"\x93" + tup(text("1")) + b"R."
    path = torch_zip(tmp_path / "evil.bin", payload, {})
    with pytest.raises(CheckpointError, match=r"refusing to load global 'builtins\.eval'"):
        open_source(path)


def test_legacy_and_non_zip_files_are_refused(tmp_path: Path) -> None:
    legacy = tmp_path / "old.pt"
    legacy.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(CheckpointError, match=r"not a zip-format torch\.save file .*legacy"):
        TorchSource(legacy)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello")
    with pytest.raises(CheckpointError, match=r"junk\.bin: not a zip-format torch\.save file$"):
        TorchSource(junk)


@pytest.mark.parametrize(
    ("entries", "storages", "message"),
    [
        (
            {"w": tensor_opcodes("FloatStorage", "0", 0, (4,), (1,))},
            {},
            "storage 'archive/data/0', which is missing",
        ),
        (
            {"w": tensor_opcodes("FloatStorage", "0", 2, (4,), (1,), numel=4)},
            {"0": bytes(16)},
            r"tensor 'w' reaches past the end of its storage 'archive/data/0' \(elements \[2, 6\)",
        ),
    ],
    ids=["missing_storage", "tensor_past_storage"],
)
def test_bad_storage_references_are_refused_on_open(
    tmp_path: Path, entries: dict[str, bytes], storages: dict[str, bytes], message: str
) -> None:
    path = torch_zip(tmp_path / "m.bin", state_dict_pickle(entries), storages)
    with pytest.raises(CheckpointError, match=message):
        TorchSource(path)


def test_non_dict_pickle_is_refused(tmp_path: Path) -> None:
    path = torch_zip(tmp_path / "m.bin", b"\x80\x02]q\x00.", {})
    with pytest.raises(CheckpointError, match="expected a dict of tensors, got list"):
        TorchSource(path)


# -- tests against real torch.save output ---------------------------------------------------------


def torch_bits(tensor: Any) -> np.ndarray:
    torch = pytest.importorskip("torch")
    wide = {1: torch.uint8, 2: torch.int16}.get(tensor.element_size())
    raw = tensor.contiguous().view(wide) if wide is not None else tensor.contiguous()
    return raw.numpy().reshape(-1).view(np.uint8)


def test_real_torch_files_of_every_dtype(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state = {f"t.{d}": base.to(getattr(torch, d)) for d in TORCH_DTYPES}
    state["transposed"] = base.t()
    state["shared_row"] = base[2]
    state["column"] = base[:, 1]
    state["scalar"] = torch.tensor(3.5)
    state["empty"] = torch.zeros(0, 3)
    torch.save(state, tmp_path / "m.pt")
    with TorchSource(tmp_path / "m.pt") as source:
        assert source.names() == list(state)
        for name, tensor in state.items():
            got = source.load(name)
            assert source.info(name).shape == tuple(tensor.shape)
            got_bits = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
            assert np.array_equal(got_bits, torch_bits(tensor)), name


def test_real_module_state_dict_and_nested_checkpoint(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    torch.save({"model": model.state_dict(), "step": 7, "tag": "x"}, tmp_path / "ckpt.pth")
    with open_source(tmp_path / "ckpt.pth") as source:
        assert source.names() == [f"model.{n}" for n in model.state_dict()]
        for name, tensor in model.state_dict().items():
            assert np.array_equal(source.load(f"model.{name}"), tensor.numpy())


def test_sharded_torch_checkpoint_is_read_through_its_index(tmp_path: Path) -> None:
    one = tensor_opcodes("IntStorage", "0", 0, (2,), (1,))
    two = tensor_opcodes("CharStorage", "0", 0, (3,), (1,))
    torch_zip(tmp_path / "a.bin", state_dict_pickle({"x": one}), {"0": np.int32([5, 6]).tobytes()})
    torch_zip(tmp_path / "b.bin", state_dict_pickle({"y": two}), {"0": bytes([1, 2, 3])})
    weight_map = {"x": "a.bin", "y": "b.bin"}
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with open_source(tmp_path) as source:
        assert source.names() == ["x", "y"]
        assert source.load("x").tolist() == [5, 6]
        assert source.load("y").dtype == np.int8


def test_load_after_close_is_refused(tmp_path: Path) -> None:
    entries = {"w": tensor_opcodes("FloatStorage", "0", 0, (1,), (1,))}
    source = TorchSource(torch_zip(tmp_path / "m.bin", state_dict_pickle(entries), {"0": bytes(4)}))
    source.close()
    with pytest.raises(CheckpointError, match="the source is closed"):
        source.load("w")
