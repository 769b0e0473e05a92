"""Conversions on a LocalCluster of two single-threaded worker processes (one per module).

Each is compared byte for byte with the one-machine conversion; the fault tests kill a worker
mid-part, kill the client between parts, hide SRC from a worker, and fail a tensor's load.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from lazyparams.cluster import MEMORY_RESOURCE, convert_on_cluster  # noqa: E402
from lazyparams.engine import convert  # noqa: E402
from lazyparams.engine.journal import read_journal, work_dir  # noqa: E402
from lazyparams.engine.part_files import partial_work, parts_path  # noqa: E402
from lazyparams.errors import BudgetError, CheckpointError, ConvertError  # noqa: E402
from tests.cluster import helpers  # noqa: E402
from tests.engine.helpers import SMALL_SHARD, cli_env, run_cli, small_llama, tree_bytes  # noqa: E402

SPEC = "fuse-qkv+cast:float16"
PART = 24 * 1024  # about eight parts of the small llama


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            resources={MEMORY_RESOURCE: 1 << 30},
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as connected,
    ):
        yield connected


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("src") / "llama")


@pytest.fixture(autouse=True)
def _healthy(client: distributed.Client) -> Iterator[None]:
    client.wait_for_workers(2, timeout=300)  # a killed worker is restarted by its nanny
    yield
    client.run(helpers.restore)


def _one_machine(source: Path, dst: Path, **options: object) -> dict[str, bytes]:
    convert(SPEC, source, dst, progress=False, **options)  # type: ignore[arg-type]
    return tree_bytes(dst)


@pytest.mark.parametrize(
    ("name", "options"),
    [("sharded", {"shard_size": SMALL_SHARD}), ("out.npz", {}), ("out.gguf", {})],
)
def test_output_is_byte_identical_to_one_machine(
    client: distributed.Client, source: Path, tmp_path: Path, name: str, options: dict[str, int]
) -> None:
    expected = _one_machine(source, tmp_path / "one" / name, **options)
    dst = tmp_path / "two" / name
    report = convert_on_cluster(
        SPEC, source, dst, cluster=client, part_size=PART, progress=False, **options
    )
    assert tree_bytes(dst) == expected
    assert report.parts_run == len(report.partition.parts) > 2
    assert len(report.workers) == 2  # both workers ran parts
    assert not work_dir(dst).exists()
    assert report.measured_peak_bytes == report.predicted_peak_bytes


def test_a_worker_killed_mid_part_is_replaced_and_the_result_is_identical(
    client: distributed.Client, source: Path, tmp_path: Path
) -> None:
    expected = _one_machine(source, tmp_path / "one", shard_size=SMALL_SHARD)
    marker = tmp_path / "died"
    victim = sorted(client.scheduler_info()["workers"])[0]
    client.run(helpers.die_on_first_write, str(marker), workers=[victim])
    dst = tmp_path / "two"
    convert_on_cluster(
        SPEC, source, dst, cluster=client, shard_size=SMALL_SHARD, part_size=PART, progress=False
    )
    assert marker.exists()  # the worker died with a part half done
    assert tree_bytes(dst) == expected


KILLING_CLIENT = """
import os, sys
from lazyparams.cluster import convert_on_cluster
from lazyparams.engine.output import StagedSafetensors
from lazyparams.engine.staged import StagedFiles

record, copy = StagedSafetensors.record_written, StagedFiles.write
copied = []

def record_then_die(self, names):
    record(self, names)
    os.kill(os.getpid(), 9)  # the client dies right after journaling its first part

def copy_then_die(self, name, array):
    copy(self, name, array)
    copied.append(name)
    if len(copied) == 3:  # the client dies publishing, three outputs copied and journaled
        self._drain()
        os.kill(os.getpid(), 9)

if sys.argv[4] == "parts":
    StagedSafetensors.record_written = record_then_die
else:
    StagedFiles.write = copy_then_die
convert_on_cluster("{spec}", sys.argv[1], sys.argv[2], cluster=sys.argv[3], part_size={part},
                   progress=False, **{options})
"""

RESUMABLE = [
    ("sharded", {"shard_size": SMALL_SHARD}, "parts"),
    ("out.npz", {}, "parts"),
    ("out.gguf", {"shard_size": 2 * SMALL_SHARD}, "parts"),
    ("out.npz", {}, "publish"),
    ("out.gguf", {}, "publish"),
]


def _killed_client(source: Path, dst: Path, address: str, options: dict[str, int], at: str) -> None:
    """Run a client in a process of its own that is killed at `at` (parts, or publish)."""
    script = KILLING_CLIENT.format(spec=SPEC, part=PART, options=options)
    done = subprocess.run(
        [sys.executable, "-c", script, str(source), str(dst), address, at],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, done.stderr


@pytest.mark.parametrize(("name", "options", "at"), RESUMABLE)
def test_a_killed_client_resumes_with_only_the_missing_parts(
    client: distributed.Client,
    source: Path,
    tmp_path: Path,
    name: str,
    options: dict[str, int],
    at: str,
) -> None:
    expected = _one_machine(source, tmp_path / "one" / name, **options)
    dst = tmp_path / "two" / name
    _killed_client(source, dst, client.scheduler.address, options, at)
    parts_work = work_dir(dst if name == "sharded" else parts_path(dst))
    journaled = read_journal(parts_work)
    assert journaled and not dst.exists() and partial_work(dst) is not None
    report = convert_on_cluster(
        SPEC, source, dst, cluster=client, part_size=PART, resume=True, progress=False, **options
    )
    if at == "parts":
        assert report.resumed_outputs == len(journaled)
        assert 0 < report.parts_run < len(report.partition.parts)
    else:  # every part was written: only the copy into the output is left
        assert report.parts_run == 0 and report.resumed_outputs == len(
            report.partition.output_infos
        )
    assert tree_bytes(dst.parent) == tree_bytes(tmp_path / "one")
    assert partial_work(dst) is None


def test_a_budget_too_small_for_a_part_is_refused_before_any_part_runs(
    client: distributed.Client, source: Path, tmp_path: Path
) -> None:
    dst = tmp_path / "out"
    with pytest.raises(BudgetError, match=r"part \d+ .* needs .* per-worker budget of 1\.0 KiB"):
        convert_on_cluster(SPEC, source, dst, cluster=client, budget=1024, progress=False)
    assert not dst.exists() and not work_dir(dst).exists()


def test_a_worker_that_cannot_see_src_is_named_before_any_data_moves(
    client: distributed.Client, source: Path, tmp_path: Path
) -> None:
    blind = sorted(client.scheduler_info()["workers"])[1]
    client.run(helpers.hide_path, str(source), workers=[blind])
    dst = tmp_path / "out"
    with pytest.raises(ConvertError, match=re.escape(f"worker {blind}: cannot see {source}")):
        convert_on_cluster(SPEC, source, dst, cluster=client, progress=False)
    assert not dst.exists() and not work_dir(dst).exists()


def test_a_lazyparams_error_in_a_part_stops_the_run_without_output(
    client: distributed.Client, source: Path, tmp_path: Path
) -> None:
    client.run(helpers.fail_load_of, "model.layers.1.mlp.down_proj.weight")
    dst = tmp_path / "out"
    with pytest.raises(CheckpointError, match=r"down_proj\.weight'. damaged data"):
        convert_on_cluster(SPEC, source, dst, cluster=client, part_size=PART, progress=False)
    assert not dst.exists()
    assert partial_work(dst) is None  # a source error: a rerun reads the same bytes


def test_local_n_starts_its_own_cluster_and_checks_n(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="expected local:N with N a positive number"):
        convert(SPEC, source, tmp_path / "out", cluster="local:zero", progress=False)


def test_the_cli_converts_on_a_running_scheduler(
    client: distributed.Client, source: Path, tmp_path: Path
) -> None:
    expected = _one_machine(source, tmp_path / "one", shard_size=SMALL_SHARD)
    address = client.scheduler.address
    done = run_cli(
        "convert",
        SPEC,
        source,
        tmp_path / "two",
        "--shard-size",
        str(SMALL_SHARD),
        "--cluster",
        address,
        "--part-size",
        str(PART),
        "--budget",
        "1MiB",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert tree_bytes(tmp_path / "two") == expected
    assert "parts" in done.stdout and done.stdout.count("budget 1.0 GiB") == 2
    assert "parts 8/8" in done.stderr or "parts" in done.stderr  # the one bar


def test_local_n_runs_on_its_own_worker_processes(source: Path, tmp_path: Path) -> None:
    expected = _one_machine(source, tmp_path / "one", shard_size=SMALL_SHARD)
    report = convert(
        SPEC,
        source,
        tmp_path / "two",
        shard_size=SMALL_SHARD,
        cluster="local:2",
        budget="1MiB",
        progress=False,
    )
    assert tree_bytes(tmp_path / "two") == expected
    assert {w.budget for w in report.workers} == {1 << 20}
    assert all(w.peak_rss_bytes is None or w.parts > 0 for w in report.workers)


@pytest.mark.parametrize(
    ("spec", "options"), [("gguf:f16", {}), ("gguf:q8_0", {"shard_size": 64 << 10})]
)
def test_the_gguf_recipe_on_the_cluster_equals_one_machine(
    client: distributed.Client, tmp_path: Path, spec: str, options: dict[str, int]
) -> None:
    pytest.importorskip("sentencepiece")
    from tests.targets.llamacpp.hf_fixtures import write_model
    from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer

    vocab = write_sentencepiece_tokenizer(tmp_path / "tok", 400)
    model = write_model(tmp_path / "tiny-llama", "llama", vocab=vocab, hidden=256, intermediate=512)
    for file in (tmp_path / "tok").iterdir():
        (model / file.name).write_bytes(file.read_bytes())
    convert(spec, model, tmp_path / "one" / "m.gguf", progress=False, **options)  # type: ignore[arg-type]
    dst = tmp_path / "two" / "m.gguf"
    convert_on_cluster(spec, model, dst, cluster=client, part_size=PART, progress=False, **options)
    assert tree_bytes(dst.parent) == tree_bytes(tmp_path / "one")
    parts = len(tree_bytes(dst.parent))
    assert parts > 1 if options else parts == 1  # split parts with a shard size


def test_a_merge_on_the_cluster_equals_one_machine(
    client: distributed.Client, tmp_path: Path
) -> None:
    """A merge configuration is SRC like any checkpoint: its models are read by the workers
    by path, and the merged folder (config.json and tokenizer included) is one machine's."""
    from tests.targets.merge.conftest import model_tensors, write_model

    for seed, name in enumerate(("a", "b"), start=1):
        write_model(tmp_path / name, model_tensors(seed))
    config = tmp_path / "merge.yml"
    config.write_text(
        "merge_method: linear\nmodels:\n  - model: a\n    parameters: {weight: 0.3}\n"
        "  - model: b\n    parameters: {weight: 0.7}\nout_dtype: bfloat16\n"
    )
    convert("merged", config, tmp_path / "one" / "m", progress=False)
    dst = tmp_path / "two" / "m"
    convert_on_cluster("merged", config, dst, cluster=client, part_size=2048, progress=False)
    assert tree_bytes(dst.parent) == tree_bytes(tmp_path / "one")
    assert sorted(p.name for p in dst.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]


def test_stacked_experts_stream_on_the_cluster_with_a_named_pre_tokenizer(
    client: distributed.Client, tmp_path: Path
) -> None:
    """A `gguf` target with options reaches the workers as it is (not as its text), and a
    mixture of experts converts there expert by expert within a budget below one stack."""
    from lazyparams.engine.demo_model import DEMO_PRE, write_byte_tokenizer
    from lazyparams.targets.llamacpp.target import GGUFTarget
    from tests.targets.llamacpp.hf_fixtures import write_model

    model = write_model(tmp_path / "moe", "mixtral", hidden=128, intermediate=256, experts=8)
    write_byte_tokenizer(model)
    target, budget = GGUFTarget("q8_0", pre=DEMO_PRE), 256 << 10  # a stack is 512 KiB
    convert(target, model, tmp_path / "one" / "m.gguf", progress=False)
    dst = tmp_path / "two" / "m.gguf"
    convert_on_cluster(target, model, dst, cluster=client, budget=budget, progress=False)
    assert tree_bytes(dst.parent) == tree_bytes(tmp_path / "one")
