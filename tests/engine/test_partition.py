"""Partitioned plans without a cluster: units, parts, duplicated reads, budgets, and parts run
one after another in this process giving the one-machine output, byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert
from lazyparams.engine.compile import output_infos
from lazyparams.engine.output import StagedSafetensors
from lazyparams.engine.part_run import run_part
from lazyparams.engine.partition import output_order, partition
from lazyparams.errors import BudgetError, ConvertError
from lazyparams.frontend import ops
from lazyparams.io import DictSource, open_source
from tests.engine.helpers import SMALL_SHARD, cli_env, run_cli, small_llama, tree_bytes

SPEC = "fuse-qkv+cast:float16"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("src") / "llama")


def test_parts_run_in_turn_give_the_one_machine_output(source: Path, tmp_path: Path) -> None:
    convert(SPEC, source, tmp_path / "one", shard_size=SMALL_SHARD, progress=False)
    parts = partition(SPEC, source, workers=2, shard_size=SMALL_SHARD)
    staged = StagedSafetensors(
        tmp_path / "two", output_infos(parts.traced), SMALL_SHARD, {"job": 1}, False
    )
    with open_source(source) as opened:
        for part in parts.parts:
            stats = run_part(parts, part, opened, staged)
            assert stats.measured_peak_bytes == part.predicted_peak_bytes
            assert stats.bytes_read == part.bytes_in and stats.bytes_written == part.bytes_out
    staged.finalize()
    assert tree_bytes(tmp_path / "two") == tree_bytes(tmp_path / "one")


def test_every_output_is_in_exactly_one_part_and_fused_groups_stay_together(
    source: Path,
) -> None:
    parts = partition(SPEC, source, workers=4, part_size=16 * 1024)
    names = [info.name for part in parts.parts for info in part.outputs]
    assert sorted(names) == sorted(info.name for info in parts.output_infos)
    assert len(parts.parts) > 4 and parts.duplicated_bytes == 0
    assert parts.bytes_in == sum(info.nbytes for info in parts.input_infos)
    qkv = [
        p
        for p in parts.parts
        for i in p.inputs
        if i.name.endswith("layers.0.self_attn.q_proj.weight")
    ]
    assert {i.name.rsplit(".", 2)[-2] for i in qkv[0].inputs} >= {"q_proj", "k_proj", "v_proj"}
    assert parts.balance >= 1.0
    assert parts.longest_part is not None


def _tied(params: dict[str, object]) -> dict[str, object]:
    embed = params["embed"]
    return {"embed": ops.cast(embed, "float16"), "lm_head": ops.transpose(embed)}


def test_a_shared_input_joins_its_outputs_unless_the_part_cannot_hold_them() -> None:
    tensors = {"embed": np.ones((64, 32), np.float32)}
    together = partition(_tied, DictSource(tensors), workers=2, part_size=1 << 20)
    assert len(together.parts) == 1 and together.duplicated_bytes == 0
    apart = partition(_tied, DictSource(tensors), workers=2, part_size=4096)
    assert len(apart.parts) == 2
    assert apart.duplicated_bytes == tensors["embed"].nbytes  # read by both parts, reported


def test_a_budget_too_small_for_a_part_names_the_part_and_its_peak(source: Path) -> None:
    parts = partition(SPEC, source, workers=2, budget="1KiB")
    with pytest.raises(BudgetError, match=r"part 0 \(\d+ outputs from '.*'\) needs .* at its peak"):
        parts.check_budget()


def test_parts_are_chunked_to_the_budget_as_on_one_machine(source: Path) -> None:
    parts = partition("cast:float16", source, workers=2, budget="40KiB")
    parts.check_budget()
    assert 0 < parts.predicted_peak_bytes <= 40 * 1024
    one_machine = partition("cast:float16", source, workers=2)
    assert one_machine.predicted_peak_bytes > parts.predicted_peak_bytes


def test_output_order_is_the_order_set_item_runs(source: Path) -> None:
    parts = partition(SPEC, source, workers=1)
    template = next(iter(parts.templates.values())).plan
    assert output_order(template.module) == tuple(info.name for info in template.outputs)


def test_bad_part_sizes_are_refused(source: Path) -> None:
    with pytest.raises(ConvertError, match="part_size: expected a positive size, got 0"):
        partition(SPEC, source, workers=2, part_size=0)
    with pytest.raises(ConvertError, match="workers: expected a positive int"):
        partition(SPEC, source, workers=0)


def test_plan_prints_the_partition_for_cluster_workers(source: Path, tmp_path: Path) -> None:
    done = run_cli("plan", SPEC, source, "--workers-on-cluster", "3", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["workers"] == 3 and summary["parts"] == len(summary["part_table"])
    assert summary["duplicated_bytes"] == 0 and summary["balance"] >= 1.0
    refused = run_cli(
        "plan", SPEC, source, "--workers-on-cluster", "3", "--budget", "1KiB", cwd=tmp_path
    )
    assert refused.returncode == 1 and "per-worker budget of 1.0 KiB" in refused.stderr


NO_DASK = """
import sys
import lazyparams
import lazyparams.engine.partition
lazyparams.convert("cast:float16", sys.argv[1], sys.argv[2], progress=False)
lazyparams.engine.partition.partition("cast:float16", sys.argv[1], workers=4)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")))
"""


def test_a_plain_convert_and_a_partition_import_no_dask(source: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_DASK, str(source), str(tmp_path / "out")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


WITHOUT_DASK = """
import sys
sys.modules["distributed"] = None  # as if the dask extra were not installed
from lazyparams.cli import main
sys.exit(main(["convert", "cast:float16", sys.argv[1], sys.argv[2], "--cluster", "local:2"]))
"""


def test_cluster_without_dask_says_how_to_install_it(source: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_DASK, str(source), str(tmp_path / "out")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "pip install 'lazyparams[dask]'" in done.stderr
    assert not (tmp_path / "out").exists()
