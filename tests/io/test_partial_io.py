"""Partial tensor I/O: row and column blocks read from every source, row blocks written to every
sink (byte-identical to whole writes), and every misuse refused with nothing left behind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams.io.base as io_base
import lazyparams.io.partial as partial
from lazyparams.errors import CheckpointError
from lazyparams.io import (
    DictSink,
    DictSource,
    SinkBase,
    TensorInfo,
    open_sink,
    open_source,
)
from lazyparams.io.gguf_format import DTYPE_TO_GGML
from lazyparams.io.numpy_sink import NpzSink
from lazyparams.io.partial import RowLedger, accepts_rows, load_cols, load_rows
from lazyparams.io.safetensors_format import DTYPE_TO_CODE

Check = Callable[[Any, np.ndarray], None]
MakeSink = Callable[[Path, list[TensorInfo]], SinkBase]

SINKS: dict[str, tuple[MakeSink, list[str]]] = {
    "safetensors": (lambda d, i: open_sink(d / "m.safetensors", i), list(DTYPE_TO_CODE)),
    "sharded": (lambda d, i: open_sink(d / "out", i, shard_size=100), list(DTYPE_TO_CODE)),
    "npz": (lambda d, i: open_sink(d / "m.npz", i), ["float32", "bfloat16", "int4", "int8"]),
    "npz-deflate": (lambda d, i: NpzSink(d / "m.npz", i, compress=True), ["float16", "int32"]),
    "npy": (lambda d, i: open_sink(d / "out", i, format="npy"), ["float32", "bfloat16", "int4"]),
    "gguf": (lambda d, i: open_sink(d / "m.gguf", i), list(DTYPE_TO_GGML)),
    "dict": (lambda d, i: DictSink(i, path=str(d / "memory")), ["float32", "bfloat16", "int4"]),
}


def tensors_for(dtypes: list[str], make_tensors: Any) -> dict[str, np.ndarray]:
    """Sample tensors with at least one row (the shapes a row block can be cut from)."""
    return {n: a for n, a in make_tensors(dtypes).items() if a.ndim and a.shape[0]}


def infos_of(tensors: dict[str, np.ndarray]) -> list[TensorInfo]:
    return [TensorInfo.from_array(name, array) for name, array in tensors.items()]


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in files_under(folder) if p.is_file()}


def write_in_blocks(sink: SinkBase, tensors: dict[str, np.ndarray], mix: bool = True) -> None:
    """Every tensor in blocks of one or two rows, shuffled; with `mix`, the blocks of all
    tensors together, else tensor by tensor (an archive's order is the order tensors finish)."""
    rng = np.random.default_rng(0)
    groups: list[list[tuple[str, int, np.ndarray]]] = []
    for name, array in tensors.items():
        start, groups = 0, [*groups, []]
        while start < array.shape[0]:
            stop = min(array.shape[0], start + int(rng.integers(1, 3)))
            groups[-1].append((name, start, array[start:stop]))
            start = stop
    for group in [[b for g in groups for b in g]] if mix else groups:
        for i in rng.permutation(len(group)):
            sink.write_rows(*group[i])


# Sources -------------------------------------------------------------------------------------


def write_checkpoint(folder: Path, kind: str, tensors: dict[str, np.ndarray]) -> Path:
    make = {
        "safetensors": lambda: open_sink(folder / "m.safetensors", infos_of(tensors)),
        "sharded": lambda: open_sink(folder / "out", infos_of(tensors), shard_size=200),
        "npz": lambda: open_sink(folder / "m.npz", infos_of(tensors)),
        "npz-deflate": lambda: NpzSink(folder / "m.npz", infos_of(tensors), compress=True),
        "npy": lambda: open_sink(folder / "out", infos_of(tensors), format="npy"),
        "gguf": lambda: open_sink(folder / "m.gguf", infos_of(tensors)),
    }[kind]
    with make() as sink:
        for name, array in tensors.items():
            sink.write(name, array)
    return Path(sink.path)


SOURCE_DTYPES = {
    "safetensors": ["float32", "bfloat16", "int8", "float16"],
    "sharded": ["float32", "int64"],
    "npz": ["float32", "bfloat16"],
    "npz-deflate": ["float16", "int32"],
    "npy": ["float32", "int4"],
    "gguf": ["float32", "float16", "int16"],
}


@pytest.mark.parametrize("kind", sorted(SOURCE_DTYPES))
def test_every_source_reads_row_and_column_blocks(
    tmp_path: Path, kind: str, make_tensors: Any, assert_same: Check
) -> None:
    tensors = tensors_for(SOURCE_DTYPES[kind], make_tensors)
    with open_source(write_checkpoint(tmp_path, kind, tensors)) as source:
        for name, want in tensors.items():
            rows = want.shape[0]
            assert_same(source.load_rows(name, 0, rows), want)  # type: ignore[attr-defined]
            assert_same(source.load_rows(name, rows - 1, rows), want[rows - 1 :])  # type: ignore[attr-defined]
            if want.ndim == 2:
                block = source.load_cols(name, 1, want.shape[1])  # type: ignore[attr-defined]
                assert block.flags.c_contiguous
                assert_same(block, want[:, 1:])


def test_safetensors_maps_only_the_rows_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
    mapped: list[tuple[tuple[int, ...], int]] = []
    real = io_base.map_array

    def recording(fd: int, offset: int, dtype: Any, shape: Any, *args: Any, **kw: Any) -> Any:
        mapped.append((tuple(shape), offset))
        return real(fd, offset, dtype, shape, *args, **kw)

    monkeypatch.setattr(io_base, "map_array", recording)
    with open_source(write_checkpoint(tmp_path, "safetensors", {"w": want})) as source:
        block = source.load_rows("w", 10, 13)  # type: ignore[attr-defined]
        whole_offset = mapped[0][1] - 10 * 6 * 4 if mapped else 0
    assert mapped == [((3, 6), whole_offset + 10 * 6 * 4)]
    np.testing.assert_array_equal(block, want[10:13])


def test_column_blocks_are_gathered_band_by_band(monkeypatch: pytest.MonkeyPatch) -> None:
    want = np.arange(50 * 8, dtype=np.float32).reshape(50, 8)
    source = DictSource({"w": want})
    bands: list[tuple[int, int]] = []
    real = source.load_rows
    monkeypatch.setattr(source, "load_rows", lambda n, a, b: bands.append((a, b)) or real(n, a, b))
    np.testing.assert_array_equal(source.load_cols("w", 2, 5), want[:, 2:5])
    assert bands[:2] == [(0, 18), (18, 36)]  # no larger than the block: 50 x 3 of 4 bytes
    bands.clear()
    monkeypatch.setattr(partial, "BAND_BYTES", 4 * 8 * 4)  # at most four rows a band
    np.testing.assert_array_equal(source.load_cols("w", 2, 5), want[:, 2:5])
    assert bands[0] == (0, 4) and bands[-1] == (48, 50) and len(bands) == 13


class _PlainSource:
    """A user source with only the protocol's `load`."""

    path = "<plain>"

    def __init__(self, tensors: dict[str, np.ndarray]) -> None:
        self.inner = DictSource(tensors)

    def info(self, name: str) -> TensorInfo:
        return self.inner.info(name)

    def load(self, name: str) -> np.ndarray:
        return self.inner.load(name)


def test_a_source_without_partial_reads_is_sliced() -> None:
    want = np.arange(12, dtype=np.int32).reshape(4, 3)
    plain = _PlainSource({"w": want})
    np.testing.assert_array_equal(load_rows(plain, "w", 1, 3), want[1:3])
    np.testing.assert_array_equal(load_cols(plain, "w", 0, 2), want[:, :2])
    with pytest.raises(CheckpointError, match=r"<plain>: tensor 'w': expected rows"):
        load_rows(plain, "w", 3, 9)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.load_rows("w", 2, 2), r"expected rows 0 <= start < stop <= 4, got \[2, 2\)"),
        (lambda s: s.load_rows("w", -1, 2), r"expected rows 0 <= start < stop <= 4, got \[-1, 2\)"),
        (lambda s: s.load_rows("w", 0, 5), r"expected rows 0 <= start < stop <= 4, got \[0, 5\)"),
        (lambda s: s.load_rows("w", 0.5, 2), r"expected int bounds of rows, got 0.5, 2"),
        (lambda s: s.load_rows("w", True, 2), r"expected int bounds of rows, got True, 2"),
        (lambda s: s.load_rows("s", 0, 1), r"tensor 's' is 0-d; expected rows to slice"),
        (lambda s: s.load_cols("w", 0, 4), r"expected columns 0 <= start < stop <= 3"),
        (lambda s: s.load_cols("c", 0, 1), r"expected a 2-D tensor for a column block, got"),
        (lambda s: s.load_rows("x", 0, 1), r"no tensor named 'x'"),
    ],
)
def test_bad_blocks_are_refused(tmp_path: Path, call: Any, message: str) -> None:
    tensors = {
        "w": np.zeros((4, 3), np.float32),
        "s": np.zeros((), np.float32),
        "c": np.zeros((2, 2, 2), np.float32),
    }
    with open_source(write_checkpoint(tmp_path, "safetensors", tensors)) as source:
        with pytest.raises(CheckpointError, match=message) as caught:
            call(source)
        assert str(caught.value).startswith(str(tmp_path))


# Sinks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_rows_in_any_order_make_the_same_bytes_as_whole_writes(
    tmp_path: Path, kind: str, make_tensors: Any, assert_same: Check
) -> None:
    make, dtypes = SINKS[kind]
    tensors = tensors_for(dtypes, make_tensors)
    (tmp_path / "whole").mkdir()
    (tmp_path / "rows").mkdir()
    with make(tmp_path / "whole", infos_of(tensors)) as whole:
        for name, array in tensors.items():
            whole.write(name, array)
    with make(tmp_path / "rows", infos_of(tensors)) as rows:
        assert accepts_rows(rows)
        write_in_blocks(rows, tensors, mix=not kind.startswith("npz"))
    if isinstance(rows, DictSink):
        assert isinstance(whole, DictSink)
        for name, want in tensors.items():
            assert_same(rows.tensors[name], want)
        assert list(rows.tensors) == list(whole.tensors)
        return
    assert tree_bytes(tmp_path / "rows") == tree_bytes(tmp_path / "whole")


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_rows_of_a_stack_s_flat_view_make_the_same_bytes(
    tmp_path: Path, kind: str, assert_same: Check
) -> None:
    """A 3-D tensor written as blocks of rows of its last axis (part of one index of its
    first axis each, as the compiler writes a stacked expert's rows) and as whole indices."""
    stack = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    tensors = {"stack": stack, "other": stack[1:].copy()}
    (tmp_path / "whole").mkdir()
    (tmp_path / "rows").mkdir()
    make = SINKS[kind][0]
    with make(tmp_path / "whole", infos_of(tensors)) as whole:
        for name, array in tensors.items():
            whole.write(name, array)
    with make(tmp_path / "rows", infos_of(tensors)) as rows:
        flat = stack.reshape(24, 8)
        for start in (20, 0, 8, 4, 16, 12):  # rows of 4 across the experts' bounds
            rows.write_rows("stack", start, flat[start : start + 4])  # type: ignore[attr-defined]
        rows.write_rows("other", 1, tensors["other"][1:])  # type: ignore[attr-defined]
        rows.write_rows("other", 0, tensors["other"][0].reshape(6, 8))  # type: ignore[attr-defined]
    if isinstance(rows, DictSink):
        for name, want in tensors.items():
            assert_same(rows.tensors[name], want)
        return
    assert tree_bytes(tmp_path / "rows") == tree_bytes(tmp_path / "whole")


def test_flat_rows_that_overlap_whole_indices_or_fit_no_view_are_refused(tmp_path: Path) -> None:
    infos = [TensorInfo.of("stack", (2, 3, 4), "float32")]
    with (
        pytest.raises(CheckpointError, match=r"rows \[3, 4\) were written twice"),
        open_sink(tmp_path / "a.safetensors", infos) as sink,
    ):
        sink.write_rows("stack", 1, np.zeros((1, 3, 4), np.float32))  # type: ignore[attr-defined]
        sink.write_rows("stack", 3, np.zeros((1, 4), np.float32))  # type: ignore[attr-defined]
    with (
        pytest.raises(CheckpointError, match=r"expected rows float32\[n, 4\], got"),
        open_sink(tmp_path / "b.safetensors", infos) as sink,
    ):
        sink.write_rows("stack", 0, np.zeros((2, 6), np.float32))  # type: ignore[attr-defined]
    assert files_under(tmp_path) == []


def test_rows_and_whole_tensors_mix_in_one_sink(tmp_path: Path, assert_same: Check) -> None:
    tensors = {"a": np.arange(6, dtype=np.int16).reshape(3, 2), "b": np.ones(4, np.float32)}
    with open_sink(tmp_path / "m.safetensors", infos_of(tensors)) as sink:
        sink.write_rows("a", 2, tensors["a"][2:])  # type: ignore[attr-defined]
        sink.write("b", tensors["b"])
        sink.write_rows("a", 0, tensors["a"][:2])  # type: ignore[attr-defined]
    with open_source(tmp_path / "m.safetensors") as source:
        for name, want in tensors.items():
            assert_same(source.load(name), want)


ROW_MISUSE = {
    "overlap": (
        lambda s: (
            s.write_rows("w", 0, np.zeros((2, 3), np.float32)),
            s.write_rows("w", 1, np.zeros((1, 3), np.float32)),
        ),
        r"tensor 'w': rows \[1, 2\) were written twice; expected each row once",
    ),
    "past_the_end": (
        lambda s: s.write_rows("w", 3, np.zeros((2, 3), np.float32)),
        r"tensor 'w': expected rows 0 <= start < stop <= 4, got \[3, 5\)",
    ),
    "empty": (
        lambda s: s.write_rows("w", 1, np.zeros((0, 3), np.float32)),
        r"expected rows 0 <= start < stop <= 4, got \[1, 1\)",
    ),
    "wrong_dtype": (
        lambda s: s.write_rows("w", 0, np.zeros((1, 3), np.float16)),
        r"tensor 'w': expected rows float32\[n, 3\], got float16\[1, 3\]",
    ),
    "wrong_width": (
        lambda s: s.write_rows("w", 0, np.zeros((1, 2), np.float32)),
        r"tensor 'w': expected rows float32\[n, 3\], got float32\[1, 2\]",
    ),
    "zero_d": (
        lambda s: s.write_rows("s", 0, np.zeros((1,), np.float32)),
        r"tensor 's' is 0-d; expected rows to write",
    ),
    "undeclared": (
        lambda s: s.write_rows("nope", 0, np.zeros((1, 3), np.float32)),
        r"tensor 'nope' was not declared",
    ),
    "rows_after_whole": (
        lambda s: (
            s.write("w", np.zeros((4, 3), np.float32)),
            s.write_rows("w", 0, np.zeros((1, 3), np.float32)),
        ),
        r"tensor 'w' was written twice",
    ),
    "whole_after_rows": (
        lambda s: (
            s.write_rows("w", 0, np.zeros((1, 3), np.float32)),
            s.write("w", np.zeros((4, 3), np.float32)),
        ),
        r"tensor 'w' was written twice",
    ),
    "rows_after_all_rows": (
        lambda s: (
            s.write_rows("w", 0, np.zeros((4, 3), np.float32)),
            s.write_rows("w", 0, np.zeros((1, 3), np.float32)),
        ),
        r"tensor 'w' was written twice",
    ),
    "bad_start": (
        lambda s: s.write_rows("w", "0", np.zeros((1, 3), np.float32)),
        r"expected int bounds of rows, got '0', None",
    ),
}


@pytest.mark.parametrize(
    ("kind", "case"),
    [
        (kind, case)
        for kind in ("safetensors", "npz", "npy", "gguf", "dict")
        for case in sorted(ROW_MISUSE)
        if (kind, case) != ("gguf", "zero_d")  # GGUF has no 0-d tensors
    ],
)
def test_row_misuse_is_refused_and_abort_leaves_nothing(
    tmp_path: Path, kind: str, case: str
) -> None:
    misuse, message = ROW_MISUSE[case]
    infos = [TensorInfo.of("w", (4, 3), "float32"), TensorInfo.of("s", (), "float32")]
    if kind == "gguf":
        infos = infos[:1]
    with pytest.raises(CheckpointError, match=message), SINKS[kind][0](tmp_path, infos) as sink:
        misuse(sink)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("kind", ["safetensors", "sharded", "npz", "npy", "gguf", "dict"])
def test_finalize_with_rows_missing_names_them_and_leaves_nothing(
    tmp_path: Path, kind: str
) -> None:
    sink = SINKS[kind][0](tmp_path, [TensorInfo.of("w", (4, 2), "int32")])
    sink.write_rows("w", 1, np.ones((2, 2), np.int32))
    with pytest.raises(CheckpointError, match="tensor 'w' got only 2 of its 4 rows"):
        sink.finalize()
    assert files_under(tmp_path) == []
    with pytest.raises(CheckpointError, match="already aborted"):
        sink.write_rows("w", 0, np.ones((1, 2), np.int32))


def test_blocks_from_many_threads_land_once(tmp_path: Path) -> None:
    want = np.arange(256 * 4, dtype=np.float32).reshape(256, 4)
    sink = open_sink(tmp_path / "m.safetensors", [TensorInfo.of("w", want.shape, "float32")])
    starts = list(range(0, 256, 8))
    errors: list[BaseException] = []

    def write(mine: list[int]) -> None:
        try:
            for start in mine:
                sink.write_rows("w", start, want[start : start + 8])  # type: ignore[attr-defined]
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=write, args=(starts[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    sink.finalize()
    with open_source(tmp_path / "m.safetensors") as source:
        np.testing.assert_array_equal(source.load("w"), want)


def test_the_ledger_reports_completion_once_every_row_is_stored() -> None:
    info = TensorInfo.of("w", (5, 2), "int8")
    written: set[str] = set()
    ledger = RowLedger("<here>", {"w": info}, written.__contains__)
    first, block = ledger.claim("w", 3, np.zeros((2, 2), np.int8).astype(">i1"))
    assert first == 3 and block.dtype.isnative
    assert ledger.started("w") and ledger.progress("w") == (0, 5)
    assert not ledger.stored("w", 2)
    ledger.claim("w", 0, np.zeros((3, 2), np.int8))
    assert ledger.missing_message("w") == "tensor 'w' got only 2 of its 5 rows"
    assert ledger.stored("w", 3)
    assert not ledger.started("w") and ledger.progress("w") is None


def test_the_ledger_counts_a_stack_in_rows_of_its_last_axis() -> None:
    ledger = RowLedger("<here>", {"s": TensorInfo.of("s", (2, 3, 4), "int8")}, set().__contains__)
    first, block = ledger.claim("s", 1, np.zeros((1, 3, 4), np.int8))  # all of index 1
    assert (first, block.shape) == (3, (3, 4)) and ledger.progress("s") == (0, 6)
    assert not ledger.stored("s", 3)
    assert ledger.claim("s", 1, np.zeros((2, 4), np.int8))[0] == 1  # rows 1-2 of index 0
    assert ledger.missing_message("s") == "tensor 's' got only 3 of its 6 rows"


def test_only_sinks_with_write_rows_take_rows() -> None:
    assert not accepts_rows(object())
    assert accepts_rows(DictSink([TensorInfo.of("w", (1,), "int8")]))
