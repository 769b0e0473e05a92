"""A source file that shrinks while its tensors are mapped: a CheckpointError naming the file
and tensor, never a crash (SIGBUS) or a tensor of zeros written as output.

Each dangerous read runs in a child process, so that a regression kills the child, not the
test run; the tests assert on the child's output and exit code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import filemap, mapguard

ROOT = Path(__file__).resolve().parents[2]
WEIGHT = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
"""A tensor of 32 pages, so that truncating the file leaves most of it past the end."""
KEEP = 3 * 4096

needs_guard = pytest.mark.skipif(
    mapguard._guard() is None, reason="the compiled extension is not built"
)


def write_safetensors(path: Path) -> Path:
    save_file({"w": WEIGHT}, str(path))
    return path


def write_gguf(path: Path) -> Path:
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor("w", WEIGHT)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def run_child(
    code: str, *args: str | Path, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run `code` (dedented) in a fresh interpreter with `args` as sys.argv[1:]."""
    command = [sys.executable, *flags, "-c", textwrap.dedent(code), *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )


SHRINK_UNDER_A_MAP = """
    import gc, os, sys
    import numpy as np
    from lazyparams.errors import CheckpointError
    from lazyparams.io import GGUFSource, SafetensorsSource
    from lazyparams.io.filemap import write_array_at
    from lazyparams.io.mapguard import raise_if_source_shrank

    path, how, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    source = (GGUFSource if path.endswith(".gguf") else SafetensorsSource)(path)
    array = source.load("w")
    before = os.path.getsize(path)
    os.truncate(path, keep)
    out = os.open(path + ".out", os.O_RDWR | os.O_CREAT)
    try:
        if how == "read":
            total = float(np.asarray(array, np.float64).sum())  # reads past the end
            raise_if_source_shrank()
        elif how == "dropped":
            copy = array.copy()  # the map faults, then goes before anything is checked
            del array
            gc.collect()
            raise_if_source_shrank()
        elif how == "computed":
            write_array_at(out, array.astype(np.float16), 0)
        else:  # "passed through": written from the map as it is
            write_array_at(out, array, 0)
    except CheckpointError as err:
        print(err)
        sys.exit(3)
    print("no error")
"""


@needs_guard
@pytest.mark.parametrize("how", ["read", "dropped", "computed", "passed through"])
@pytest.mark.parametrize("write", [write_safetensors, write_gguf], ids=["safetensors", "gguf"])
def test_a_file_shrunk_under_a_map_is_an_error_naming_file_and_tensor(
    tmp_path: Path, how: str, write: object
) -> None:
    path = write(tmp_path / ("m.gguf" if write is write_gguf else "m.safetensors"))  # type: ignore[operator]
    done = run_child(SHRINK_UNDER_A_MAP, path, how, KEEP)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    message = done.stdout.strip()
    assert message.startswith(f"{path}: tensor 'w': the file shrank to {KEEP} bytes while ")
    assert "the source changed while it was being read" in message


TWO_FAULTS_ONE_ERROR = """
    import os, sys
    import numpy as np
    from safetensors.numpy import save_file
    from lazyparams.errors import CheckpointError
    from lazyparams.io import SafetensorsSource
    from lazyparams.io.mapguard import forget_earlier_faults, raise_if_source_shrank

    path, keep = sys.argv[1], int(sys.argv[2])
    save_file({"a": np.ones(32 * 1024, np.float32), "b": np.ones(32 * 1024, np.float32)}, path)
    source = SafetensorsSource(path)
    a, b, left = source.load("a"), source.load("b"), source.load("a")
    os.truncate(path, keep)
    a.sum(), b.sum()  # both maps fault
    try:
        raise_if_source_shrank()
    except CheckpointError as err:
        print(err)
    raise_if_source_shrank()  # nothing left pending: one error for the run
    left.sum()  # a map kept past its run (a dict destination's) faults later
    forget_earlier_faults()  # the next conversion starts clean
    raise_if_source_shrank()
    print("clean")
"""


@needs_guard
def test_faults_are_raised_once_and_do_not_outlive_their_run(tmp_path: Path) -> None:
    done = run_child(TWO_FAULTS_ONE_ERROR, tmp_path / "m.safetensors", KEEP)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert "(and 1 more maps of it or others)" in first and "the file shrank" in first
    assert second == "clean"


def test_a_map_that_did_not_fault_raises_nothing(tmp_path: Path) -> None:
    path = write_safetensors(tmp_path / "m.safetensors")
    from lazyparams.io import SafetensorsSource

    with SafetensorsSource(path) as source:
        array = source.load("w")
        assert np.array_equal(array, WEIGHT) and not array.flags.writeable
        mapguard.raise_if_source_shrank()
        out = os.open(tmp_path / "out", os.O_RDWR | os.O_CREAT)
        try:
            filemap.write_array_at(out, array, 0)
        finally:
            os.close(out)
    assert (tmp_path / "out").read_bytes() == WEIGHT.tobytes()


def test_without_the_guard_tensors_are_read_into_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No extension: a tensor is a copy, which a later truncation cannot touch."""
    path = write_safetensors(tmp_path / "m.safetensors")
    monkeypatch.setattr(filemap, "guarded_map", lambda *args: None)
    from lazyparams.io import SafetensorsSource

    with SafetensorsSource(path) as source:
        array = source.load("w")
        os.truncate(path, KEEP)
        assert np.array_equal(array, WEIGHT) and not array.flags.writeable


def test_a_read_that_finds_the_file_shorter_is_an_error(tmp_path: Path) -> None:
    path = write_safetensors(tmp_path / "m.safetensors")
    fd = os.open(path, os.O_RDONLY)
    try:
        info = os.fstat(fd)
        os.truncate(path, KEEP)
        with pytest.raises(CheckpointError) as caught:
            mapguard.read_range(fd, 100, info.st_size - 100, f"{path}: tensor 'w'", info)
    finally:
        os.close(fd)
    assert str(caught.value) == (
        f"{path}: tensor 'w': the file shrank to {KEEP} bytes while its bytes [100, "
        f"{info.st_size}) were being read; expected at least {info.st_size} bytes (it had "
        f"{info.st_size} when the read began): the source changed while it was being read"
    )


@needs_guard
def test_a_gguf_header_read_from_a_shrinking_file_says_it_shrank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lazyparams.io import gguf_reader

    path = write_gguf(tmp_path / "m.gguf")
    parse = gguf_reader.parse_gguf_header

    def shrinking(data: object, where: str) -> object:
        os.truncate(path, 0)  # before a byte of the header is read
        return parse(data, where)

    monkeypatch.setattr(gguf_reader, "parse_gguf_header", shrinking)
    with pytest.raises(CheckpointError) as caught:
        gguf_reader.read_gguf_header(path)
    assert str(caught.value).startswith(f"{path}: the header: the file shrank to 0 bytes while")


UNGUARDED_FAULT = """
    import ctypes, faulthandler, mmap, os, sys
    import numpy as np
    from lazyparams.io import SafetensorsSource

    path, other, when = sys.argv[1:4]
    if when == "before":
        faulthandler.enable()
    guarded = SafetensorsSource(path).load("w")  # the guard's handler is installed
    if when == "after":
        faulthandler.enable()
    with open(other, "rb") as file:
        plain = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate(other, 0)
    address = np.frombuffer(plain, np.uint8).ctypes.data
    print("reading", flush=True)
    ctypes.string_at(address, 4096)  # a fault outside every guarded map
    print("survived", flush=True)
"""


@needs_guard
@pytest.mark.parametrize("when", ["never", "before", "after"])
def test_a_fault_outside_the_guarded_maps_still_kills(tmp_path: Path, when: str) -> None:
    """The handler passes faults it does not own on: to faulthandler where it was enabled
    before or after, else to the default action, which ends the process with SIGBUS."""
    path = write_safetensors(tmp_path / "m.safetensors")
    other = tmp_path / "other.bin"
    other.write_bytes(b"\1" * 8192)
    done = run_child(UNGUARDED_FAULT, path, other, when)
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "reading\n"
    assert ("Fatal Python error: Bus error" in done.stderr) == (when != "never")


REPLACED_HANDLER = """
    import faulthandler, os, sys
    import numpy as np
    from lazyparams.io import SafetensorsSource

    path = sys.argv[1]
    source = SafetensorsSource(path)
    first = source.load("w")  # the guard's handler is installed
    faulthandler.enable()  # and replaced: later tensors are read, not mapped
    second = source.load("w")
    os.truncate(path, 0)
    print(bool(np.array_equal(second, np.arange(128 * 256, dtype=np.float32).reshape(128, 256))))
"""


@needs_guard
def test_a_replaced_handler_makes_later_tensors_copies(tmp_path: Path) -> None:
    path = write_safetensors(tmp_path / "m.safetensors")
    done = run_child(REPLACED_HANDLER, path)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


CONVERT_WHILE_SHRINKING = """
    import os, sys
    from lazyparams.cli import main
    from lazyparams.io import SafetensorsSource

    keep, argv = int(sys.argv[1]), sys.argv[2:]
    load = SafetensorsSource.load

    def load_then_shrink(self, name):
        array = load(self, name)
        os.truncate(self.path, keep)  # another process rewrites the checkpoint meanwhile
        return array

    SafetensorsSource.load = load_then_shrink
    sys.exit(main(argv))
"""


@needs_guard
@pytest.mark.parametrize("recipe", ["cast:float16", "cast:float32"])
def test_convert_of_a_file_that_shrinks_exits_1_naming_it(tmp_path: Path, recipe: str) -> None:
    """The source is truncated right after its tensor is mapped (from get_item): the cast
    (or the copy, where the recipe keeps the dtype) reads past the new end. A source error:
    nothing is kept for a resume."""
    src = write_safetensors(tmp_path / "m.safetensors")
    dst = tmp_path / "out.safetensors"
    argv = ["convert", recipe, str(src), str(dst), "--no-progress"]
    done = run_child(CONVERT_WHILE_SHRINKING, KEEP, *argv)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"error: {src}: tensor 'w': the file shrank to {KEEP} bytes while its bytes "
    )
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no partial output kept


CONVERT_INTO_A_DICT = """
    import os, sys
    from lazyparams import convert
    from lazyparams.errors import CheckpointError
    from lazyparams.io import SafetensorsSource

    keep, src = int(sys.argv[1]), sys.argv[2]
    load = SafetensorsSource.load

    def load_then_shrink(self, name):
        array = load(self, name)
        os.truncate(self.path, keep)
        return array

    SafetensorsSource.load = load_then_shrink
    try:
        convert("cast:float16", src, {}, progress=False)
    except CheckpointError as err:
        print(err)
"""


@needs_guard
def test_a_destination_in_memory_is_refused_too(tmp_path: Path) -> None:
    """A dict keeps the computed (partly zero-filled) array without writing a file: the
    engine checks the guard after each output and at the end."""
    src = write_safetensors(tmp_path / "m.safetensors")
    done = run_child(CONVERT_INTO_A_DICT, KEEP, src)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{src}: tensor 'w': the file shrank to {KEEP} bytes")


@pytest.mark.skipif(
    os.environ.get("LAZYPARAMS_REQUIRE_NATIVE") != "1", reason="the extension is optional here"
)
def test_the_guard_is_built_with_the_extension() -> None:
    assert mapguard._guard() is not None
