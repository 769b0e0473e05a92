"""`lazyparams convert` into GGUF: --metadata, --metadata-from, --shard-size, bad spellings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValue, GGUFWriter
from gguf import GGUFValueType as T

from lazyparams.cli import main
from lazyparams.io import read_gguf_metadata
from tests.engine.helpers import read_all

COPY_SPEC = "def transform(params):\n    return dict(params)\n"
TENSORS = {f"blk.{i}.attn_q.weight": np.full((16, 32), i, np.float16) for i in range(4)}


@pytest.fixture(name="src")
def src_fixture(tmp_path: Path) -> Path:
    """A GGUF with tensors and metadata of the kinds a vocab-only file holds."""
    writer = GGUFWriter(tmp_path / "src.gguf", "llama")
    writer.add_string("general.name", "source")
    writer.add_uint32("llama.context_length", 2048)
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"])
    writer.add_array("tokenizer.ggml.scores", [0.0, -1.5, -2.5])
    writer.add_key_value("tokenizer.ggml.token_type", [3, 1, 1], T.ARRAY, T.INT32)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    for name, array in TENSORS.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    (tmp_path / "copy.py").write_text(COPY_SPEC)
    return tmp_path / "src.gguf"


def convert_argv(src: Path, dst: Path, *options: str) -> list[str]:
    return ["convert", str(src.parent / "copy.py"), str(src), str(dst), "--no-progress", *options]


def test_metadata_options_are_typed_and_written(src: Path, tmp_path: Path) -> None:
    options = [
        "--metadata=llama.context_length:u32=4096",
        "--metadata=general.name=Mine",
        '--metadata=general.tags:str[]=["x", "y"]',
        "--metadata=llama.rope.freq_base=10000.0",
    ]
    assert main(convert_argv(src, tmp_path / "out.gguf", *options)) == 0
    got = read_gguf_metadata(tmp_path / "out.gguf")
    assert got == {
        "general.architecture": GGUFValue("unknown", T.STRING),
        "llama.context_length": GGUFValue(4096, T.UINT32),
        "general.name": GGUFValue("Mine", T.STRING),
        "general.tags": GGUFValue(["x", "y"], T.ARRAY, T.STRING),
        "llama.rope.freq_base": GGUFValue(10000.0, T.FLOAT32),
    }


def test_metadata_from_copies_every_pair_and_metadata_overrides(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "out.gguf"
    argv = convert_argv(src, dst, "--metadata-from", str(src), "--metadata", "general.name=new")
    assert main(argv) == 0
    want = read_gguf_metadata(src)
    want["general.name"] = GGUFValue("new", T.STRING)
    assert list(read_gguf_metadata(dst).items()) == list(want.items())
    assert read_gguf_metadata(dst)["tokenizer.ggml.token_type"].sub_type == T.INT32


def test_shard_size_splits_gguf_and_the_parts_read_back(src: Path, tmp_path: Path) -> None:
    argv = convert_argv(src, tmp_path / "out" / "m.gguf", "--metadata-from", str(src))
    assert main([*argv, "--shard-size", "1KiB"]) == 0
    parts = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in parts] == [f"m-0000{k}-of-00004.gguf" for k in range(1, 5)]
    again = tmp_path / "again.gguf"
    assert main(convert_argv(src, again, "--metadata-from", str(parts[0]))) == 0
    assert again.read_bytes() == Path(src).read_bytes()  # a copy through the split is exact
    assert {k: v.tobytes() for k, v in read_all(parts[1]).items()} == {
        k: v.tobytes() for k, v in TENSORS.items()
    }
    assert len(GGUFReader(parts[3]).fields) == 3 + 3  # GGUF.* header fields and split.*


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--metadata=k:u99=1", "unknown type 'u99'"),
        ("--metadata=k:u8=300", "expected a UINT8 in [0, 255], got 300"),
        ("--metadata=novalue", "expected KEY=VALUE or KEY:TYPE=VALUE"),
        ("--metadata=split.count=2", "written by the file format itself"),
    ],
)
def test_bad_metadata_spellings_are_usage_errors(
    src: Path, tmp_path: Path, option: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(convert_argv(src, tmp_path / "out.gguf", option)) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.gguf").exists()


def test_metadata_for_safetensors_output_is_refused(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "out.safetensors"
    assert main(convert_argv(src, dst, "--metadata", "a=1")) == 1
    assert capsys.readouterr().err == (
        "error: metadata: key/value metadata is for gguf output, not safetensors\n"
    )
    assert not dst.exists()


def test_metadata_from_a_missing_file_is_one_line(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = convert_argv(src, tmp_path / "out.gguf", "--metadata-from", str(tmp_path / "no.gguf"))
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'no.gguf'}: not a readable GGUF file")
    assert len(err.splitlines()) == 1 and not (tmp_path / "out.gguf").exists()
