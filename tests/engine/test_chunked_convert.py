"""Tensors larger than the budget: a conversion whose largest tensor is four times the budget
(the ratio of a 1 GiB embedding under 256 MiB) runs in blocks of rows within it, as the plan
predicts, writing the very bytes of the unchunked conversion to every kind of destination."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.engine import convert, plan
from lazyparams.engine.chunking import row_outputs
from lazyparams.engine.journal import JOURNAL_FILE, work_dir
from lazyparams.errors import BudgetError
from lazyparams.io import DictSource, TensorInfo, open_sink, open_source
from tests.engine.helpers import read_all, tree_bytes

TENSOR = 1024 * 256 * 4  # one float32 tensor: 1 MiB
BUDGET = TENSOR // 4


def weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    big = (1024, 256)
    return {
        "model.embed_tokens.weight": rng.standard_normal(big).astype(np.float32),
        "lm_head.weight": rng.standard_normal(big).astype(np.float32),
        "model.norm.weight": rng.standard_normal(256).astype(np.float32),
    }


@pytest.fixture(scope="module", name="src")
def src_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "model.safetensors"
    tensors = weights()
    with open_sink(path, [TensorInfo.from_array(n, a) for n, a in tensors.items()]) as sink:
        for name, array in tensors.items():
            sink.write(name, array)
    return path


class CountingRows(DictSource):
    """A source that records every read, whole or in blocks; it may fail after some blocks."""

    def __init__(self, tensors: dict[str, np.ndarray], fail_after: int | None = None) -> None:
        super().__init__(tensors, path="<counting>")
        self.reads: list[tuple[str, int, int]] = []
        self.fail_after = fail_after

    def load(self, name: str) -> Any:
        self.reads.append((name, 0, -1))
        return super().load(name)

    def load_rows(self, name: str, start: int, stop: int) -> Any:
        if self.fail_after is not None and len(self.reads) >= self.fail_after:
            raise OSError("the disk caught fire")
        self.reads.append((name, start, stop))
        return DictSource.load(self, name)[start:stop]


SPECS = [
    "cast:float16",
    "quantize-int8",
    "quantize-int4",
    "fuse-qkv+cast:bfloat16",  # lm_head is transposed: column blocks in, row blocks out
    "quantize-int8+cast:float16",
]


@pytest.mark.parametrize("spec", SPECS)
def test_a_tensor_four_times_the_budget_converts_within_it(
    src: Path, tmp_path: Path, spec: str
) -> None:
    whole = convert(spec, src, tmp_path / "whole.safetensors", progress=False)
    assert whole.predicted_peak_bytes > BUDGET
    planned = plan(spec, src, budget=BUDGET)
    assert planned.fits and planned.predicted_peak_bytes <= BUDGET
    assert planned.chunked_outputs == row_outputs(planned.module) != ()
    assert planned.summary()["chunked_outputs"] == list(planned.chunked_outputs)
    report = convert(spec, src, tmp_path / "rows.safetensors", budget=BUDGET, progress=False)
    assert report.predicted_peak_bytes == planned.predicted_peak_bytes
    assert report.measured_peak_bytes == report.predicted_peak_bytes
    assert (tmp_path / "rows.safetensors").read_bytes() == (
        tmp_path / "whole.safetensors"
    ).read_bytes()
    assert (report.tensors_read, report.bytes_read) == (whole.tensors_read, whole.bytes_read)
    assert (report.tensors_written, report.bytes_written) == (
        whole.tensors_written,
        whole.bytes_written,
    )


def test_without_a_budget_nothing_is_split(src: Path) -> None:
    assert row_outputs(plan("cast:float16", src).module) == ()
    roomy = plan("cast:float16", src, budget=4 * TENSOR)
    assert roomy.fits and row_outputs(roomy.module) == ()


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("m.npz", {}),
        ("npy", {"format": "npy"}),
        ("m.gguf", {}),
        ("sharded", {"shard_size": "600KiB"}),
    ],
)
def test_every_file_format_gets_the_same_bytes(
    src: Path, tmp_path: Path, name: str, kwargs: dict[str, Any]
) -> None:
    whole = tmp_path / "whole" / name
    rows = tmp_path / "rows" / name  # the same name: an archive or a folder compares as bytes
    convert("cast:float16", src, whole, progress=False, **kwargs)
    report = convert("cast:float16", src, rows, budget=BUDGET, progress=False, **kwargs)
    assert report.measured_peak_bytes == report.predicted_peak_bytes <= BUDGET
    assert tree_bytes(rows) == tree_bytes(whole)


def test_a_dict_destination_is_assembled_from_the_blocks(src: Path) -> None:
    want: dict[str, np.ndarray] = {}
    got: dict[str, np.ndarray] = {}
    convert("quantize-int4", src, want, progress=False)
    report = convert("quantize-int4", src, got, budget=BUDGET, progress=False)
    assert report.measured_peak_bytes == report.predicted_peak_bytes <= BUDGET
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].tobytes() == value.tobytes(), name


def test_blocks_are_read_as_planned(src: Path) -> None:
    source = CountingRows(read_all(src))
    convert("cast:float16", source, {}, budget=BUDGET, progress=False)
    embed = [r for r in source.reads if r[0] == "model.embed_tokens.weight"]
    assert len(embed) > 1 and all(stop > start >= 0 for _, start, stop in embed)
    assert sorted(start for _, start, _ in embed)[0] == 0
    assert sum(stop - start for _, start, stop in embed) == 1024
    assert ("model.norm.weight", 0, -1) in source.reads  # small tensors are read whole


class WholeOnlySink:
    """A user's sink with no `write_rows`: outputs can only be written whole."""

    def __init__(self, infos: list[TensorInfo]) -> None:
        self.infos = {info.name: info for info in infos}
        self.written: dict[str, np.ndarray] = {}

    def write(self, name: str, array: np.ndarray) -> None:
        self.written[name] = array

    def finalize(self) -> None:
        pass

    def abort(self) -> None:
        self.written.clear()


def test_a_sink_without_row_writes_is_refused_before_any_read(src: Path) -> None:
    tensors = read_all(src)
    source = CountingRows(tensors)
    infos = [TensorInfo.of(n, a.shape, "float16") for n, a in tensors.items()]
    sink = WholeOnlySink(infos)
    with pytest.raises(BudgetError, match=r"expected a budget of at least 1572864 bytes"):
        convert("cast:float16", source, sink, budget=BUDGET, progress=False)
    assert source.reads == [] and sink.written == {}


def test_a_budget_below_any_block_names_the_chunked_minimum(src: Path, tmp_path: Path) -> None:
    source = CountingRows(read_all(src))
    whole = plan("cast:float16", src).predicted_peak_bytes
    with pytest.raises(BudgetError, match="expected a budget of at least") as caught:
        convert("cast:float16", source, tmp_path / "out.safetensors", budget=64, progress=False)
    minimum = int(str(caught.value).split("at least ")[1].split(" ")[0])
    assert 64 < minimum < whole // 100  # one row of each large tensor, not the whole tensor
    assert source.reads == []
    assert list(tmp_path.iterdir()) == []


def test_a_failure_between_blocks_leaves_nothing_half_written_and_resumes(
    src: Path, tmp_path: Path
) -> None:
    tensors = read_all(src)
    dst = tmp_path / "out.safetensors"
    flaky = CountingRows(tensors, fail_after=3)
    with pytest.raises(OSError, match="the disk caught fire"):
        convert("cast:float16", flaky, dst, budget=BUDGET, progress=False)
    assert not dst.exists()
    journal = (work_dir(dst) / JOURNAL_FILE).read_text()
    chunked = row_outputs(plan("cast:float16", CountingRows(tensors), budget=BUDGET).module)
    assert not any(name in journal for name in chunked)  # a tensor whose rows were cut short
    report = convert(
        "cast:float16", CountingRows(tensors), dst, budget=BUDGET, resume=True, progress=False
    )
    assert report.measured_peak_bytes <= BUDGET
    whole = tmp_path / "whole.safetensors"
    convert("cast:float16", src, whole, progress=False)
    assert dst.read_bytes() == whole.read_bytes()
    assert not work_dir(dst).exists()


def test_a_failure_into_an_archive_leaves_nothing_at_dst(src: Path, tmp_path: Path) -> None:
    flaky = CountingRows(read_all(src), fail_after=3)
    dst = tmp_path / "m.npz"
    with pytest.raises(OSError, match="the disk caught fire"):
        convert("cast:float16", flaky, dst, budget=BUDGET, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == [work_dir(dst).name]  # kept for --resume


def test_two_workers_convert_in_blocks_within_the_budget(src: Path, tmp_path: Path) -> None:
    one = convert("cast:float16", src, tmp_path / "one.safetensors", budget=BUDGET, progress=False)
    two = convert(
        "cast:float16", src, tmp_path / "two.safetensors", budget=BUDGET, workers=2, progress=False
    )
    assert two.measured_peak_bytes is not None and two.measured_peak_bytes <= BUDGET
    assert (tmp_path / "two.safetensors").read_bytes() == (
        tmp_path / "one.safetensors"
    ).read_bytes()
    assert one.measured_peak_bytes == one.predicted_peak_bytes


def test_the_output_reads_back_as_the_eager_result(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "q.safetensors"
    convert("quantize-int8", src, dst, budget=BUDGET, progress=False)
    with open_source(dst) as out:
        q, scale = out.load("lm_head.weight"), out.load("lm_head.weight_scale")
        lm_head = weights()["lm_head.weight"]
        np.testing.assert_allclose(q * scale[:, None], lm_head, atol=float(scale.max()))
