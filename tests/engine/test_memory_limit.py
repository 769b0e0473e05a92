"""The memory a process can use, read from fake cgroup (v1, v2) and /proc folders, and the
default budget taken from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyparams.engine import memory_limit
from lazyparams.engine.memory_limit import (
    FLOOR,
    HEADROOM,
    choose_budget,
    default_budget,
    usable_memory,
    usable_memory_bytes,
)
from lazyparams.errors import ConvertError

GiB = 1 << 30
MiB = 1 << 20
V1_UNLIMITED = "9223372036854771712"


def fake_proc(
    root: Path, *, cgroup: str = "0::/\n", available: int | None = None, rss: int = 0
) -> Path:
    """A /proc with self/cgroup, self/status (VmRSS) and, if given, meminfo's MemAvailable."""
    (root / "self").mkdir(parents=True)
    (root / "self" / "cgroup").write_text(cgroup)
    (root / "self" / "status").write_text(f"Name:\tpython\nVmRSS:\t{rss // 1024} kB\n")
    if available is not None:
        meminfo = f"MemTotal:       {4 * available // 1024} kB\n"
        (root / "meminfo").write_text(meminfo + f"MemAvailable:   {available // 1024} kB\n")
    return root


def write_group(folder: Path, **files: str) -> None:
    """A cgroup folder holding `files` (dots in names spelled as underscores)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


def test_a_cgroup_v2_limit_less_what_the_rest_of_the_group_holds(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", cgroup="0::/jobs/one\n", available=64 * GiB, rss=GiB)
    group = tmp_path / "cg" / "jobs" / "one"
    # 3 GiB used, 1 GiB of it page cache, 1 GiB this process: 1 GiB held by others
    write_group(group, memory_max=str(12 * GiB), memory_current=str(3 * GiB))
    (group / "memory.stat").write_text(f"anon {2 * GiB}\nfile {GiB}\n")
    write_group(tmp_path / "cg" / "jobs", memory_max="max")
    usable = usable_memory(tmp_path / "cg", proc)
    assert usable is not None and usable.nbytes == 11 * GiB
    assert usable.what == "the cgroup v2 limit 12.0 GiB, 1.0 GiB of it held by other processes"


def test_a_parent_groups_tighter_limit_binds(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", cgroup="0::/jobs/one\n", available=64 * GiB)
    write_group(tmp_path / "cg" / "jobs" / "one", memory_max=str(12 * GiB))
    write_group(tmp_path / "cg" / "jobs", memory_max=str(8 * GiB))
    assert usable_memory_bytes(tmp_path / "cg", proc) == 8 * GiB


def test_a_cgroup_v1_limit_and_an_unlimited_parent(tmp_path: Path) -> None:
    cgroup = "4:memory:/box\n1:cpu:/\n0::/\n"
    proc = fake_proc(tmp_path / "proc", cgroup=cgroup, available=64 * GiB)
    box = tmp_path / "cg" / "memory" / "box"
    write_group(box, memory_limit_in_bytes=str(6 * GiB), memory_usage_in_bytes=str(2 * GiB))
    (box / "memory.stat").write_text(f"cache 1\ntotal_cache {2 * GiB}\n")
    write_group(tmp_path / "cg" / "memory", memory_limit_in_bytes=V1_UNLIMITED)
    usable = usable_memory(tmp_path / "cg", proc)
    assert usable is not None and usable.nbytes == 6 * GiB
    assert usable.what == "the cgroup v1 limit 6.0 GiB"
    budget = default_budget(tmp_path / "cg", proc)
    assert budget.nbytes == 6 * GiB - HEADROOM and budget.origin == "default"
    assert budget.note == "the cgroup v1 limit 6.0 GiB less 256.0 MiB headroom"


def test_inside_a_container_the_mounts_root_is_the_group(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", cgroup="0::/host/path/not/mounted\n", available=64 * GiB)
    write_group(tmp_path / "cg", memory_max=str(3 * GiB))
    assert usable_memory_bytes(tmp_path / "cg", proc) == 3 * GiB


def test_the_available_memory_counts_what_the_process_holds(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", available=4 * GiB, rss=512 * MiB)
    write_group(tmp_path / "cg", memory_max="max")
    usable = usable_memory(tmp_path / "cg", proc)
    assert usable is not None and usable.nbytes == 4 * GiB + 512 * MiB
    assert usable.what == "the available memory 4.5 GiB"


def test_the_smallest_applies(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", cgroup="0::/\n", available=2 * GiB)
    write_group(tmp_path / "cg", memory_max=str(12 * GiB))
    assert usable_memory_bytes(tmp_path / "cg", proc) == 2 * GiB


def test_the_default_never_drops_below_the_floor(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", available=100 * MiB)
    budget = default_budget(tmp_path / "cg", proc)
    assert budget.nbytes == FLOOR
    assert budget.note.endswith(f"headroom, at least {FLOOR // MiB}.0 MiB")


def test_without_proc_there_is_no_default(tmp_path: Path) -> None:
    budget = default_budget(tmp_path / "no-cgroup", tmp_path / "no-proc")
    assert budget.nbytes is None and budget.origin == "unknown"
    assert "unknown" in budget.note


def test_choose_budget_given_default_and_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_limit, "PROC", fake_proc(tmp_path / "proc", available=8 * GiB))
    monkeypatch.setattr(memory_limit, "CGROUP", tmp_path / "cg")
    assert choose_budget(None).nbytes == 8 * GiB - HEADROOM
    assert choose_budget("2GiB").nbytes == 2 * GiB and choose_budget(5).origin == "given"
    off = choose_budget("None")
    assert off.nbytes is None and off.origin == "off"
    with pytest.raises(ConvertError, match="budget: expected a size like 512MiB"):
        choose_budget("nothing")
