"""The source format registry: what open_source, the fingerprinted files and messages consult."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import CheckpointSource, DictSource, open_source
from lazyparams.io.source_formats import (
    SOURCE_FORMATS,
    SourceFormat,
    format_list,
    format_of_suffix,
    register_source_format,
    source_files,
)

TOY_MAGIC = b"TOYCKPT\n"


def open_toy(path: Path) -> CheckpointSource:
    """A toy format: a magic line, then one `name value` per line (a one-element tensor)."""
    lines = Path(path).read_bytes().removeprefix(TOY_MAGIC).decode().split("\n")
    pairs = (line.split() for line in lines if line)
    return DictSource({name: np.array([float(value)], np.float32) for name, value in pairs})


@pytest.fixture(name="toy")
def toy_fixture() -> Iterator[SourceFormat]:
    """The toy format registered for one test, the registry restored after it."""
    saved = dict(SOURCE_FORMATS)
    entry = register_source_format(
        SourceFormat(
            "toy",
            "a text file of `name value` lines",
            __name__,
            (".toy",),
            opener="open_toy",
            sniff=lambda head, path: head.startswith(TOY_MAGIC[:4]),
        )
    )
    yield entry
    SOURCE_FORMATS.clear()
    SOURCE_FORMATS.update(saved)


def write_toy(path: Path) -> Path:
    path.write_bytes(TOY_MAGIC + b"a 1.5\nb 2\n")
    return path


def test_the_built_in_formats_and_their_suffixes() -> None:
    assert list(SOURCE_FORMATS) == ["safetensors", "gguf", "torch", "npz", "npy", "merge"]
    assert format_of_suffix(".pth") is SOURCE_FORMATS["torch"]
    assert format_of_suffix(".yml") is SOURCE_FORMATS["merge"]
    assert format_of_suffix(".npy") is None  # a folder format: no single .npy file opens
    assert "npy (folder of .npy)" in format_list()


def test_a_merge_configuration_opens_only_when_named(tmp_path: Path) -> None:
    """A model folder may hold YAML files of its own: they never make it a merge."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((2, 2), np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "notes.yml").write_text("not: a merge\n")
    with open_source(tmp_path) as source:
        assert source.names() == ["w"]
    with pytest.raises(CheckpointError, match=r"notes.yml, line 1: unknown key 'not'"):
        open_source(tmp_path / "notes.yml")


def test_a_registered_format_opens_by_suffix_in_a_folder_and_by_its_first_bytes(
    tmp_path: Path, toy: SourceFormat
) -> None:
    by_suffix = write_toy(tmp_path / "m.toy")
    (tmp_path / "folder").mkdir()
    in_folder = write_toy(tmp_path / "folder" / "weights.toy").parent
    by_bytes = write_toy(tmp_path / "weights")
    for path in (by_suffix, in_folder, by_bytes):
        with open_source(path) as source:
            assert list(source.names()) == ["a", "b"]
            assert source.load("b").tolist() == [2.0]


def test_messages_list_the_registered_formats(tmp_path: Path, toy: SourceFormat) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"expected .*\.npz, \.yml, \.yaml, \.toy, an index"):
        open_source(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"no checkpoint found; .*toy \(\.toy\)"):
        open_source(tmp_path / "empty")


def test_a_name_or_suffix_registered_twice_is_refused(toy: SourceFormat) -> None:
    with pytest.raises(CheckpointError, match="'toy' is registered twice"):
        register_source_format(toy)
    clash = SourceFormat("other", "", "x", (".pt",), opener="f")
    with pytest.raises(CheckpointError, match=r"suffix '\.pt' already belongs to 'torch'"):
        register_source_format(clash)


def test_a_folder_of_torch_files_with_two_suffixes_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.bin").write_bytes(b"")
    (tmp_path / "b.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"several \.bin / \.pt files \(a\.bin, b\.pt\)"):
        open_source(tmp_path)


def test_source_files_are_a_folders_files_or_a_file_and_its_shards(tmp_path: Path) -> None:
    w = {"w": np.zeros(2, np.float32)}
    save_file(w, str(tmp_path / "a.safetensors"))
    save_file({"v": w["w"]}, str(tmp_path / "b.safetensors"))
    index = tmp_path / "m.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": "a.safetensors", "v": "./b.safetensors"}}))
    with open_source(index) as indexed:
        files = source_files(indexed)
    assert [p.name for p in files] == [index.name, "b.safetensors", "a.safetensors"]
    assert all(p.is_absolute() for p in files)
    npy = tmp_path / "npy"
    npy.mkdir()
    np.save(npy / "w.npy", w["w"])
    (npy / ".hidden").write_text("")
    with open_source(npy) as folder:
        assert [p.name for p in source_files(folder)] == ["w.npy"]
    assert source_files(DictSource(w)) == []


def test_the_fuzz_campaign_covers_every_registered_format() -> None:
    from tests.fuzz.cases import MENUS
    from tests.fuzz.seeds import FORMATS

    missing = [name for name in SOURCE_FORMATS if name not in FORMATS or name not in MENUS]
    assert missing == [], "add seeds (tests/fuzz/seeds.py) and a mutation menu (cases.py)"
