"""The memory this process can use, and the budget a plan takes when it is given none.

On Linux the usable memory is the smallest of the cgroup limits over the process (v2 and v1,
each less what the rest of its group holds) and the available memory (`MemAvailable` plus
what the process already holds). The default budget is that less `HEADROOM`, never below
`FLOOR`. Elsewhere there is no default. Imports the standard library and the engine's `sizes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lazyparams.engine.sizes import format_bytes, parse_size

PROC = Path("/proc")
CGROUP = Path("/sys/fs/cgroup")
HEADROOM = 256 << 20
"""What a conversion's process holds besides the VM's meter: the interpreter, numpy and the
engine's libraries, about 55-60 MiB resident at the start of a `convert` of a small model
(with the `gguf` recipe's libraries), plus room for thread stacks, allocator slack and the
kernel memory a cgroup also charges."""
FLOOR = 256 << 20
"""The smallest default budget: a busy machine's momentary `MemAvailable` must not refuse a
small model."""
UNLIMITED = 1 << 60
"""cgroup v1 writes "no limit" as a number near 2**63; any limit this large is none."""
OFF = "none"
"""The budget that turns the default off: `budget="none"`, `--budget none`."""


@dataclass(frozen=True, slots=True)
class BudgetChoice:
    """The budget a run uses and why: `origin` is `given`, `default`, `off` (the caller
    turned it off) or `unknown` (no default: the usable memory cannot be read)."""

    nbytes: int | None
    origin: str
    note: str = ""

    def summary(self) -> dict[str, object]:
        """The choice as plain data (for JSON reports)."""
        return {"origin": self.origin, "note": self.note or None}


@dataclass(frozen=True, slots=True)
class Usable:
    """Bytes this process can hold in all, and where the figure comes from (`what`)."""

    nbytes: int
    what: str


def _read(path: Path) -> str | None:
    """The text of `path`, or None where it cannot be read."""
    try:
        return path.read_text()
    except OSError:
        return None


def _number(path: Path) -> int | None:
    """The integer `path` holds; None for `max`, a missing file or a limit of `UNLIMITED`."""
    text = _read(path)
    if text is None or not text.strip().isdigit():
        return None
    value = int(text)
    return None if value >= UNLIMITED else value


def _fields(text: str | None, unit: int = 1) -> dict[str, int]:
    """`name value` lines (memory.stat, /proc/meminfo with `unit` 1024 for kB) as a dict."""
    fields: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            fields[parts[0]] = int(parts[1]) * unit
    return fields


def own_resident_bytes(proc: Path = PROC) -> int:
    """This process's resident memory (0 where it cannot be read)."""
    return _fields(_read(proc / "self" / "status"), 1024).get("VmRSS", 0)


def cgroup_paths(proc: Path = PROC) -> dict[str, str]:
    """The process's cgroup per hierarchy: `v2` for the unified one, `v1` for v1's memory
    controller, as /proc/self/cgroup lists them."""
    paths: dict[str, str] = {}
    for line in (_read(proc / "self" / "cgroup") or "").splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controllers == "":
            paths["v2"] = path
        elif "memory" in controllers.split(","):
            paths["v1"] = path
    return paths


def _groups(mount: Path, path: str) -> list[Path]:
    """The group folders from the process's own up to the mount's root (each limit binds).
    Inside a container the path may name a group the mount does not show: then its root."""
    folder = mount / path.strip("/")
    if not folder.is_dir():
        return [mount]
    return [folder, *[p for p in folder.parents if p.is_relative_to(mount)]]


def _group_room(limit: int, usage: int | None, cache: int, own: int) -> tuple[int, int]:
    """A group's room for this process: its limit less what the rest of the group holds (its
    usage without reclaimable page cache, less this process's own); returns (room, others)."""
    others = 0 if usage is None else max(usage - cache - own, 0)
    return max(limit - others, 0), others


def cgroup_limit(version: str, cgroup: Path = CGROUP, proc: Path = PROC) -> Usable | None:
    """The tightest memory limit of cgroup `version` (`v1` or `v2`) over this process, less
    what the rest of each group holds; None where the process has no such limit."""
    path = cgroup_paths(proc).get(version)
    if path is None:
        return None
    mount = cgroup if version == "v2" else cgroup / "memory"
    files = (
        ("memory.max", "memory.current", "file")
        if version == "v2"
        else ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_cache")
    )
    own, best = own_resident_bytes(proc), None
    for group in _groups(mount, path):
        limit = _number(group / files[0])
        if limit is None:
            continue
        cache = _fields(_read(group / "memory.stat")).get(files[2], 0)
        room, others = _group_room(limit, _number(group / files[1]), cache, own)
        if best is None or room < best.nbytes:
            held = f", {format_bytes(others)} of it held by other processes" if others else ""
            best = Usable(room, f"the cgroup {version} limit {format_bytes(limit)}{held}")
    return best


def available_memory(proc: Path = PROC) -> Usable | None:
    """`MemAvailable` of /proc/meminfo plus this process's resident memory (what it could hold
    in all); None where /proc/meminfo has no such line."""
    available = _fields(_read(proc / "meminfo"), 1024).get("MemAvailable")
    if available is None:
        return None
    total = available + own_resident_bytes(proc)
    return Usable(total, f"the available memory {format_bytes(total)}")


def usable_memory(cgroup: Path | None = None, proc: Path | None = None) -> Usable | None:
    """The memory this process can use: the smallest of the cgroup v2 and v1 limits and the
    available memory; None where none can be read (no /proc: not Linux). `cgroup` and `proc`
    default to `CGROUP` and `PROC`."""
    cgroup, proc = cgroup or CGROUP, proc or PROC
    found = [
        cgroup_limit("v2", cgroup, proc),
        cgroup_limit("v1", cgroup, proc),
        available_memory(proc),
    ]
    known = [usable for usable in found if usable is not None]
    return min(known, key=lambda usable: usable.nbytes) if known else None


def usable_memory_bytes(cgroup: Path | None = None, proc: Path | None = None) -> int | None:
    """`usable_memory`'s bytes (None where unknown)."""
    usable = usable_memory(cgroup, proc)
    return None if usable is None else usable.nbytes


def default_budget(cgroup: Path | None = None, proc: Path | None = None) -> BudgetChoice:
    """The budget of a run given none: the usable memory less `HEADROOM`, at least `FLOOR`;
    no budget (origin `unknown`) where the usable memory cannot be read."""
    usable = usable_memory(cgroup, proc)
    if usable is None:
        return BudgetChoice(None, "unknown", "no default: the usable memory is unknown here")
    nbytes = max(usable.nbytes - HEADROOM, FLOOR)
    note = f"{usable.what} less {format_bytes(HEADROOM)} headroom"
    if nbytes == FLOOR:
        note += f", at least {format_bytes(FLOOR)}"
    return BudgetChoice(nbytes, "default", note)


def is_off(budget: object) -> bool:
    """Whether `budget` turns the budget off (`"none"`, any case)."""
    return isinstance(budget, str) and budget.strip().lower() == OFF


def choose_budget(budget: int | str | None) -> BudgetChoice:
    """The budget of a run: `budget` as given (bytes or a size), none for `"none"`, and the
    default (`default_budget`) for None."""
    if budget is None:
        return default_budget()
    if is_off(budget):
        return BudgetChoice(None, "off", "turned off")
    return BudgetChoice(parse_size(budget, "budget"), "given")


def given_budget(budget: int | str | None) -> int | str | None:
    """`budget` with `"none"` as None: where no default applies (the cluster's parts)."""
    return None if is_off(budget) else budget


__all__ = [
    "BudgetChoice",
    "Usable",
    "available_memory",
    "cgroup_limit",
    "choose_budget",
    "default_budget",
    "usable_memory",
    "usable_memory_bytes",
]
