"""The destination's format and the recipe agree before any data is read, or the run is refused.

Each refusal names what the recipe writes and what to do, and leaves nothing behind; what the
output cannot hold is said in a notice, never dropped silently.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert
from lazyparams.engine.demo import LlamaShape
from lazyparams.engine.demo_model import write_model_files
from lazyparams.errors import ConvertError, LazyParamsError
from lazyparams.io import DictSource, SafetensorsSink, TensorInfo, TorchSource
from tests.engine.helpers import read_all, run_cli, small_llama

SHAPE = LlamaShape(layers=1, hidden=64, intermediate=128, vocab=320)


@pytest.fixture(scope="module", name="model")
def model_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small llama folder the gguf recipe converts (config.json and tokenizer included)."""
    folder = small_llama(tmp_path_factory.mktemp("model") / "llama", SHAPE)
    write_model_files(folder, SHAPE)
    return folder


GGUF_INTO_SAFETENSORS = (
    "recipe 'gguf:auto' writes a GGUF file (metadata and tokenizer included); expected a "
    "destination ending in .gguf, or --format gguf"
)


def test_the_gguf_recipe_into_safetensors_is_refused(model: Path, tmp_path: Path) -> None:
    with pytest.raises(ConvertError) as caught:
        convert("gguf", model, tmp_path / "out.safetensors", progress=False)
    assert GGUF_INTO_SAFETENSORS in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_the_gguf_recipe_with_another_format_asked_names_both(model: Path, tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"or --format gguf \(not npz\)"):
        convert("gguf", model, tmp_path / "out", format="npz", progress=False)


def test_a_format_the_suffix_contradicts_is_refused(model: Path, tmp_path: Path) -> None:
    with pytest.raises(ConvertError) as caught:
        convert("cast:float16", model, tmp_path / "out.safetensors", format="npz", progress=False)
    message = str(caught.value)
    assert "names safetensors output, but the format asked for is npz" in message
    assert "expected a destination ending in .npz, or no --format" in message
    assert list(tmp_path.iterdir()) == []


def test_many_tensors_into_one_npy_file_are_refused(model: Path, tmp_path: Path) -> None:
    with pytest.raises(LazyParamsError) as caught:
        convert("cast:float16", model, tmp_path / "out" / "x.npy", progress=False)
    message = str(caught.value)
    assert "x.npy: a .npy file holds one tensor, and this conversion writes 12" in message
    assert "--format npy" in message and "NAME.npz" in message
    assert list(tmp_path.iterdir()) == []


def test_one_tensor_into_a_npy_file_is_that_file(tmp_path: Path) -> None:
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    convert("cast:float16", DictSource({"w": weight}), tmp_path / "w.npy", progress=False)
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), weight.astype(np.float16))


def test_a_plain_recipe_into_gguf_says_llama_cpp_will_not_load_it(
    model: Path, tmp_path: Path
) -> None:
    notices: list[str] = []
    convert("cast:float16", model, tmp_path / "m.gguf", progress=False, notice=notices.append)
    assert any("no general.architecture" in n and "gguf[:TYPE]" in n for n in notices)
    notices.clear()
    arch = {"general.architecture": "llama"}
    convert("cast:float16", model, tmp_path / "n.gguf", metadata=arch, notice=notices.append)
    assert not any("general.architecture" in n for n in notices)


def test_source_metadata_the_output_cannot_keep_is_named(tmp_path: Path) -> None:
    src = tmp_path / "src.safetensors"
    with SafetensorsSink(src, [TensorInfo.of("w", (2,), "float32")]) as sink:
        sink.write("w", np.ones(2, np.float32))
    _with_metadata(src, {"format": "pt"})
    notices: list[str] = []
    convert("cast:float16", src, tmp_path / "m.npz", progress=False, notice=notices.append)
    assert any(
        "metadata (a map of text keys to text values) is not kept by npz" in n for n in notices
    )
    notices.clear()
    convert("cast:float16", src, tmp_path / "m.safetensors", progress=False, notice=notices.append)
    assert notices == []


def _with_metadata(path: Path, metadata: dict[str, str]) -> None:
    """Rewrite a safetensors file's header with `__metadata__`."""
    from lazyparams.io.safetensors_format import build_header

    infos = [TensorInfo.of("w", (2,), "float32")]
    data = path.read_bytes()[-8:]
    header, _ = build_header(infos, metadata, path=str(path))
    path.write_bytes(header + data)


def test_a_pytorch_state_dict_round_trips_through_our_reader(model: Path, tmp_path: Path) -> None:
    report = convert("cast:float16", model, tmp_path / "pytorch_model.bin", progress=False)
    assert report.files == (str(tmp_path / "pytorch_model.bin"),)
    expected = {n: a.astype(np.float16) for n, a in read_all(model).items()}
    with TorchSource(tmp_path / "pytorch_model.bin") as source:
        got = {name: np.array(source.load(name)) for name in source.names()}
    assert got.keys() == expected.keys()
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array)


def test_the_cli_refuses_a_mismatch_and_lists_every_format(model: Path, tmp_path: Path) -> None:
    done = run_cli("convert", "gguf", model, tmp_path / "out.safetensors", cwd=tmp_path)
    assert done.returncode == 1
    assert GGUF_INTO_SAFETENSORS in done.stderr and "Traceback" not in done.stderr
    done = run_cli("convert", "cast:float16", model, tmp_path / "x.npy", cwd=tmp_path)
    assert done.returncode == 1 and "a .npy file holds one tensor" in done.stderr
    done = run_cli("convert", "--help", cwd=tmp_path)
    assert "pytorch" in done.stdout and ".bin, .pt, .pth" in done.stdout
    assert not (tmp_path / "out.safetensors").exists() and not (tmp_path / "x.npy").exists()
