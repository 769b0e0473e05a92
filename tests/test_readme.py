"""The README's commands, run as a reader runs them: the quick start (CLI and Python), a SPEC
file, and a run killed with SIGKILL then resumed. Each block the README marks with
`<!-- readme-test: NAME -->` (or `<!-- readme-test: file NAME -->`: the block is that file's
text) runs in a fresh folder, shell blocks under `bash -e`, Python blocks in a new interpreter,
with `lazyparams` and `python` being this interpreter's; the outputs they claim are checked."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"
FIRST_LINES = """# lazyparams

```sh
pip install -e . && lazyparams demo
pip install -e ".[test]" && python -m pytest
```
"""
_BLOCK = re.compile(
    r"<!-- readme-test: (?:file (?P<file>\S+)|(?P<name>[\w-]+)) -->\n"
    r"```(?P<lang>\w+)\n(?P<code>.*?)^```$",
    re.S | re.M,
)
_LANGS = {"checkpoint": "python", "quickstart-cli": "sh", "quickstart-python": "python"}
EXPECTED = {
    **_LANGS,
    "file my_spec.py": "python",
    "spec-cli": "sh",
    "resume-kill": "sh",
    "resume-continue": "sh",
    "merge-models": "python",
    "file merge.yml": "yaml",
    "merge-cli": "sh",
}
LAYERS, D = 4, 256
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}


@dataclass(frozen=True, slots=True)
class Block:
    lang: str
    code: str
    file: str | None


def readme_blocks() -> dict[str, Block]:
    blocks: dict[str, Block] = {}
    for found in _BLOCK.finditer(README.read_text(encoding="utf-8")):
        key = f"file {found['file']}" if found["file"] else found["name"]
        assert key not in blocks, f"README marks {key!r} twice"
        blocks[key] = Block(found["lang"], found["code"], found["file"])
    return blocks


BLOCKS = readme_blocks()


def interpreter_bin(tmp: Path) -> dict[str, str]:
    """An environment whose `lazyparams` and `python` are this interpreter's."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, command in (("python", ""), ("lazyparams", " -m lazyparams")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{command} "$@"\n')
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"}


def run(key: str, folder: Path, env: dict[str, str]) -> str:
    """Run the README's block `key` in `folder` (a file block is written there); its stdout."""
    block = BLOCKS[key]
    if block.file is not None:
        (folder / block.file).write_text(block.code, encoding="utf-8")
        return ""
    done = run_code(block, folder, env)
    assert done.returncode == 0, f"README block {key!r} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def run_code(block: Block, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a code block in `folder`, whatever its exit status."""
    argv = ["bash", "-e", "-c", block.code] if block.lang == "sh" else ["python", "-c", block.code]
    return subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file's tensors (bfloat16 too, which safetensors.numpy cannot load)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__", None)
    data = memoryview(raw)[8 + size :]
    return {
        name: np.frombuffer(
            data[slice(*entry["data_offsets"])], _SAFETENSORS_DTYPES[entry["dtype"]]
        )
        .reshape(entry["shape"])
        .copy()
        for name, entry in header.items()
    }


def reader_folder(tmp_path: Path) -> tuple[Path, dict[str, str], dict[str, np.ndarray]]:
    """A fresh folder holding the quick start's checkpoint, made by the README's two lines."""
    env = interpreter_bin(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    run("checkpoint", folder, env)
    source = read_safetensors(folder / "model.safetensors")
    names = {f"model.layers.{i}.self_attn.{p}_proj.weight" for i in range(LAYERS) for p in "qkvo"}
    assert set(source) == names
    assert all(w.shape == (D, D) and w.dtype == np.float32 for w in source.values())
    return folder, env, source


def test_the_readme_starts_with_the_two_commands() -> None:
    assert README.read_text(encoding="utf-8").startswith(FIRST_LINES)


def test_every_marked_block_is_run_here() -> None:
    assert {key: block.lang for key, block in BLOCKS.items()} == EXPECTED


def test_quick_start(tmp_path: Path) -> None:
    folder, env, source = reader_folder(tmp_path)
    printed = run("quickstart-cli", folder, env)
    assert "4.8 MiB" in printed and "1.1 MiB" in printed  # the peaks the README states
    fused = read_safetensors(folder / "fused.safetensors")
    assert len(fused) == 2 * LAYERS
    for i in range(LAYERS):
        attn = f"model.layers.{i}.self_attn."
        qkv = np.concatenate([source[f"{attn}{p}_proj.weight"] for p in "qkv"]).T
        np.testing.assert_array_equal(fused[f"{attn}qkv_proj.weight"], qkv.astype(np.float16))
        o = source[f"{attn}o_proj.weight"].T.astype(np.float16)
        np.testing.assert_array_equal(fused[f"{attn}o_proj.weight"], o)

    lines = run("quickstart-python", folder, env).splitlines()
    predicted, eager = (int(word) for word in lines[0].split() if word.isdigit())
    assert 0 < predicted < eager
    half = read_safetensors(folder / "half.safetensors")
    assert half.keys() == source.keys()
    for name, value in source.items():
        np.testing.assert_array_equal(half[name], value.astype(np.float16))
    assert "'half.safetensors'" in lines[1]
    assert lines[2] == f"{4 * LAYERS} ({D}, {D})"


def test_a_spec_file(tmp_path: Path) -> None:
    folder, env, source = reader_folder(tmp_path)
    run("file my_spec.py", folder, env)
    printed = run("spec-cli", folder, env)
    assert "@I.ir_module" in printed  # show's traced program
    mine = read_safetensors(folder / "mine.safetensors")
    assert len(mine) == 2 * LAYERS
    for i in range(LAYERS):
        attn = f"model.layers.{i}.self_attn."
        qkv = np.concatenate([source[f"{attn}{p}_proj.weight"] for p in "qkv"]).T
        np.testing.assert_array_equal(
            mine[f"{attn}qkv_proj.weight"], qkv.astype(ml_dtypes.bfloat16)
        )
        o = source[f"{attn}o_proj.weight"].astype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(mine[f"{attn}o_proj.weight"], o)


def test_a_killed_run_resumes(tmp_path: Path) -> None:
    env = interpreter_bin(tmp_path)
    folder = tmp_path / "work"
    for _ in range(3):  # on a busy machine the run may finish before the kill reaches it
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        done = run_code(BLOCKS["resume-kill"], folder, env)
        if not (folder / "big-f16").exists():
            break
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    partial = folder / ".big-f16.lazyparams-partial"
    journal = (partial / "journal").read_text(encoding="utf-8").splitlines()
    assert not (folder / "big-f16").exists(), "the run finished before it was killed"
    assert 0 < len(journal) < 32, journal

    printed = run("resume-continue", folder, env)
    assert "resumed" in printed
    assert not partial.exists()
    shards = sorted((folder / "big-f16").glob("model-*-of-00032.safetensors"))
    assert len(shards) == 32 and (folder / "big-f16" / "model.safetensors.index.json").is_file()
    outputs: dict[str, np.ndarray] = {}
    for shard in shards:
        outputs.update(read_safetensors(shard))
    assert sorted(outputs) == sorted(f"w{i}" for i in range(32))
    for value in outputs.values():
        assert value.dtype == np.float16 and value.shape == (512, 1024)
        assert np.all(value == 1)


def test_a_merge(tmp_path: Path) -> None:
    env = interpreter_bin(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    run("merge-models", folder, env)
    run("file merge.yml", folder, env)
    printed = run("merge-cli", folder, env)
    assert "linear merge" in printed
    a = read_safetensors(folder / "a" / "model.safetensors")
    b = read_safetensors(folder / "b" / "model.safetensors")
    merged = read_safetensors(folder / "merged" / "model.safetensors")
    assert sorted(merged) == sorted(a)
    for name, value in merged.items():  # products added with one rounding, as mergekit's
        fused = (a[name] * np.float32(0.7)).astype(np.float64) + b[name] * np.float64(
            np.float32(0.3)
        )
        want = fused.astype(np.float32) / np.float32(np.float32(0.7) + np.float32(0.3))
        np.testing.assert_array_equal(value, want.astype(ml_dtypes.bfloat16))
    assert (folder / "merged.gguf").is_file()


def test_the_merge_method_table_lists_the_registry() -> None:
    from lazyparams.targets.merge import merge_methods

    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- merge-methods -->")[1].split("<!-- /merge-methods -->")[0]
    rows = table.strip().splitlines()[2:]
    listed = set(re.findall(r"`([a-z_]+)`", " ".join(row.split("|")[1] for row in rows)))
    assert listed == {m.name for m in merge_methods()} | {
        alias for m in merge_methods() for alias in m.aliases
    }


def test_the_gguf_architecture_table_lists_the_registry() -> None:
    from lazyparams.targets.llamacpp.architectures import ARCHITECTURES

    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- gguf-architectures -->")[1].split("<!-- /gguf-architectures -->")[0]
    rows = [row.split("|") for row in table.strip().splitlines()[2:]]
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row[1])}
    arches = {name for row in rows for name in re.findall(r"`([\w.-]+)`", row[2])}
    assert listed == {name for arch in ARCHITECTURES for name in arch.hf_names}
    assert arches == {arch.gguf_arch for arch in ARCHITECTURES}
