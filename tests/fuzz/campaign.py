"""A fuzz campaign: cases of every format through a worker pool, findings grouped and kept.

`run_campaign(per_format, seed=...)` makes `per_format` cases of each format, runs them, and
groups every case that did not end in success or a LazyParamsError by (format, outcome,
exception type, innermost lazyparams frame). The first case of each group is rerun on a fresh
worker to confirm it and its files are written to `findings_dir` as the reproducer.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.cases import Case, make_case
from tests.fuzz.pool import Pool, run_fresh
from tests.fuzz.seeds import FORMATS, build_seeds

GOOD = ("ok", "refused")
_FAULT_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


@dataclass
class Finding:
    """One distinct class of bad outcome, with its first case and how often it was seen."""

    format: str
    outcome: str
    type: str
    last_line: str
    frame: str
    case: Case
    traceback: str
    count: int = 1
    confirmed: str = "not rerun"
    reproducer: Path | None = None

    def line(self) -> str:
        where = f" -> {self.reproducer}" if self.reproducer else ""
        return (
            f"[{self.format}] {self.outcome} {self.type} at {self.frame} ({self.count} cases, "
            f"{self.confirmed}): {self.last_line[:200]} | case {self.case.label}: "
            f"{'; '.join(self.case.mutations)[:300]}{where}"
        )


@dataclass
class Report:
    """What a campaign saw: outcomes per format, the findings, the time it took."""

    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    findings: dict[tuple[str, ...], Finding] = field(default_factory=dict)
    slow: list[str] = field(default_factory=list)
    slowest: dict[str, tuple[float, str]] = field(default_factory=dict)
    seconds: float = 0.0
    worker_seconds: float = 0.0
    cases: int = 0

    def text(self) -> str:
        """A table of counts per format, then one line per finding."""
        lines = [f"{self.cases} cases in {self.seconds:.1f} s ({self.per_case_ms():.1f} ms/case"]
        lines[0] += f", {self.worker_ms():.1f} ms/case in a worker)"
        for format, counts in self.outcomes.items():
            shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            took, label = self.slowest.get(format, (0.0, "-"))
            lines.append(f"  {format:12} {sum(counts.values()):7} cases: {shown}")
            lines[-1] += f"; slowest {took:.2f} s ({label})"
        lines.append(f"{len(self.findings)} distinct findings")
        lines += [f"  {finding.line()}" for finding in self.findings.values()]
        lines += [f"  slow but finished on a rerun: {label}" for label in self.slow[:20]]
        return "\n".join(lines)

    def markdown(self) -> str:
        """Counts per format and one table row per finding, for a findings file."""
        rows = [f"{self.cases} cases, {self.per_case_ms():.1f} ms per case (wall, all workers)"]
        rows += [f"{self.worker_ms():.1f} ms per case in one worker", ""]
        rows += ["| format | cases | outcomes | slowest case |", "|---|---|---|---|"]
        for format, counts in self.outcomes.items():
            shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            took, label = self.slowest.get(format, (0.0, "-"))
            rows.append(f"| {format} | {sum(counts.values())} | {shown} | {took:.2f} s {label} |")
        rows += ["", "| # | format | class | where | cases | rerun | last line | reproducer |"]
        rows.append("|---|---|---|---|---|---|---|---|")
        for number, f in enumerate(self.findings.values()):
            last = f.last_line[:160].replace("|", "\\|")
            rows.append(
                f"| {number} | {f.format} | {f.outcome} {f.type} | {f.frame} | {f.count} "
                f"| {f.confirmed} | {last} | {f.reproducer.name if f.reproducer else ''} |"
            )
        return "\n".join(rows)

    def per_case_ms(self) -> float:
        return 1000 * self.seconds / max(self.cases, 1)

    def worker_ms(self) -> float:
        return 1000 * self.worker_seconds / max(self.cases, 1)

    def merge(self, other: Report) -> None:
        """Add `other`'s counts and findings (a later round of the same campaign) to this one."""
        for format, counts in other.outcomes.items():
            self.outcomes.setdefault(format, Counter()).update(counts)
        for key, finding in other.findings.items():
            if key in self.findings:
                self.findings[key].count += finding.count
            else:
                self.findings[key] = finding
        self.slow += other.slow
        for format, (took, label) in other.slowest.items():
            if took > self.slowest.get(format, (0.0, ""))[0]:
                self.slowest[format] = (took, label)
        self.seconds += other.seconds
        self.worker_seconds += other.worker_seconds
        self.cases += other.cases


def _frames_of_dump(text: str) -> tuple[str, str]:
    """(innermost frame, innermost lazyparams frame) of a faulthandler dump."""
    frames = [(Path(path).name, name, path) for path, _, name in _FAULT_FRAME.findall(text)]
    ours = [f"{f}:{n}" for f, n, p in frames if "/lazyparams/" in p]
    return (f"{frames[0][0]}:{frames[0][1]}" if frames else "?"), (ours[0] if ours else "?")


def finding_key(case: Case, reply: dict[str, Any]) -> tuple[str, ...]:
    """What tells one class of finding from another."""
    if reply["outcome"] == "hang" and "our_frame" not in reply:
        reply["frame"], reply["our_frame"] = _frames_of_dump(reply.get("traceback", ""))
        reply["last_line"] = f"no answer within the timeout (in {reply['frame']})"
    if reply["outcome"] in ("laxer", "differs"):  # told apart by what the reference said
        said = reply.get("last_line", "").rpartition("accepted: ")[2].rpartition("Disagrees: ")[2]
        reply["our_frame"] = re.sub(r"[0-9]+|'[^']*'", "N", said)[:90]
    frame = reply.get("our_frame") or "?"
    return (case.format, reply["outcome"], reply.get("type", "?"), frame)


def request_of(case: Case, reference: bool = False) -> dict[str, Any]:
    """What a worker needs to run `case` (and compare it with the reference readers)."""
    run = {"files": case.files, "entry": case.entry, "convert_to": case.convert_to}
    return {"case": run | {"format": case.format, "reference": reference}}


def _jobs(cases: Sequence[Case], reference: bool) -> Iterator[tuple[Case, dict[str, Any]]]:
    for case in cases:
        yield case, request_of(case, reference)


def write_reproducer(folder: Path, finding: Finding, number: int) -> Path:
    """The finding's case files and a case.json describing it, under `folder`."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{finding.outcome}-{finding.type}-{finding.frame}")
    target = folder / f"{number:03d}-{finding.format}-{slug}"[:120]
    for name, data in finding.case.files.items():
        path = target / "files" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    case = finding.case
    meta = {"format": case.format, "seed": case.campaign_seed, "index": case.index}
    meta |= {"seed_file": case.seed_name, "mutations": list(case.mutations), "entry": case.entry}
    meta |= {"convert_to": case.convert_to, "outcome": finding.outcome, "type": finding.type}
    meta |= {"last_line": finding.last_line, "frame": finding.frame, "count": finding.count}
    meta |= {"confirmed": finding.confirmed, "traceback": finding.traceback}
    (target / "case.json").write_text(json.dumps(meta, indent=1))
    return target


def write_reproducers(report: Report, folder: Path) -> None:
    """One reproducer folder per finding of `report`, numbered in the order they were found."""
    for number, finding in enumerate(report.findings.values()):
        finding.reproducer = write_reproducer(folder, finding, number)


def _record(report: Report, case: Case, reply: dict[str, Any]) -> Finding | None:
    """Count the reply; a new Finding when it is the first of its class."""
    report.outcomes.setdefault(case.format, Counter())[reply["outcome"]] += 1
    took = float(reply.get("seconds", 0.0))
    report.worker_seconds += took
    if reply["outcome"] != "hang" and took > report.slowest.get(case.format, (0.0, ""))[0]:
        report.slowest[case.format] = (took, case.label)
    if reply["outcome"] in GOOD:
        return None
    key = finding_key(case, reply)
    if key in report.findings:
        report.findings[key].count += 1
        return None
    finding = Finding(
        case.format,
        reply["outcome"],
        reply.get("type", "?"),
        reply.get("last_line", ""),
        reply.get("our_frame") or reply.get("frame", "?"),
        case,
        reply.get("traceback", ""),
    )
    report.findings[key] = finding
    return finding


def _confirm(
    report: Report, new: list[Finding], workers: int, timeout: float, memory: int, reference: bool
) -> None:
    """Rerun each new finding's case apart from the cases that came before it.

    All reruns share one new pool first; a finding that does not come back there is rerun on
    a worker of its own. A hang that then finishes (with 3x the time) is only slow.
    """
    requests = [(finding, request_of(finding.case, reference)) for finding in new]
    with Pool(min(workers, len(new)), 3 * timeout, memory) as pool:
        for (finding, request), again in pool.run(requests):
            if again["outcome"] != finding.outcome and finding.outcome != "hang":
                again = run_fresh(request, 3 * timeout, memory)
            _settle(report, finding, again)


def _settle(report: Report, finding: Finding, again: dict[str, Any]) -> None:
    if again["outcome"] == finding.outcome:
        finding.confirmed = "reproduced on a rerun"
    elif finding.outcome == "hang" and again["outcome"] in GOOD:
        report.slow.append(f"{finding.case.label} ({again.get('seconds', 0.0):.1f} s)")
        del report.findings[next(k for k, v in report.findings.items() if v is finding)]
    elif finding.outcome == "hang":  # given the time, it ends in what it really is
        finding.frame = finding_key(finding.case, again)[3]
        finding.outcome, finding.type = again["outcome"], again.get("type", "?")
        finding.last_line, finding.traceback = again.get("last_line", ""), again["traceback"]
        finding.confirmed = f"timed out first, then took {again.get('seconds', 0.0):.1f} s"
    else:
        finding.confirmed = f"rerun alone: {again['outcome']} {again.get('type', '')}".strip()


def _rerun_timed_out(
    report: Report, cases: list[Case], workers: int, timeout: float, memory: int, reference: bool
) -> list[Finding]:
    """Give every case that timed out 3x the time on fresh workers (a loaded machine makes
    slow cases); what it then ends in is recorded, and only one that still hangs is a hang."""
    found: list[Finding] = []
    if not cases:
        return found
    with Pool(min(workers, len(cases)), 3 * timeout, memory) as pool:
        for (case, _), reply in pool.run(_jobs(cases, reference)):
            if reply["outcome"] != "hang":
                report.slow.append(f"{case.label} ({reply.get('seconds', 0.0):.1f} s on a rerun)")
            if (finding := _record(report, case, reply)) is not None:
                found.append(finding)
    return found


def _regroup(report: Report) -> None:
    """Merge the findings that a rerun showed to be one class."""
    grouped: dict[tuple[str, ...], Finding] = {}
    for finding in report.findings.values():
        key = (finding.format, finding.outcome, finding.type, finding.frame)
        if key in grouped:
            grouped[key].count += finding.count
        else:
            grouped[key] = finding
    report.findings = grouped


def run_campaign(
    per_format: int,
    *,
    seed: int = 0,
    formats: Sequence[str] = FORMATS,
    workers: int = 2,
    timeout: float = 2.0,
    memory: int = 1 << 30,
    findings_dir: Path | None = None,
    first: int = 0,
    reference: bool = False,
) -> Report:
    """Run cases `first` to `first + per_format` of every format in `formats`; the report.

    `timeout` is per case (seconds), `memory` the address space of each worker (bytes);
    `reference` also compares what was accepted with the format's own library.
    """
    started = time.perf_counter()
    seeds = build_seeds()
    numbers = range(first, first + per_format)
    cases = [make_case(seeds, seed, i, f) for i in numbers for f in formats]
    report, new, timed_out = Report(), [], []
    with Pool(workers, timeout, memory) as pool:
        for (case, _), reply in pool.run(_jobs(cases, reference)):
            report.cases += 1
            if reply["outcome"] == "hang":
                timed_out.append(case)
            elif (finding := _record(report, case, reply)) is not None:
                new.append(finding)
    new += _rerun_timed_out(report, timed_out, workers, timeout, memory, reference)
    if new:
        _confirm(report, new, workers, timeout, memory, reference)
        _regroup(report)
    if findings_dir is not None:
        write_reproducers(report, findings_dir)
    report.seconds = time.perf_counter() - started
    return report


def read_reproducer(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(case.json, request) of a reproducer folder written by `write_reproducer`."""
    meta = json.loads((folder / "case.json").read_text())
    root = folder / "files"
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))}
    run = {"files": {k: v for k, v in files.items() if (root / k).is_file()}}
    run |= {"entry": meta["entry"], "convert_to": meta["convert_to"], "format": meta["format"]}
    run["reference"] = meta["outcome"] in ("laxer", "differs")
    return meta, {"case": run}


def recheck(
    folders: Sequence[Path], workers: int = 2, timeout: float = 2.0, memory: int = 1 << 30
) -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """Rerun reproducers (on the code as it is now): (folder, case.json, new reply) each."""
    read = {folder: read_reproducer(folder) for folder in folders}
    jobs = [(folder, request) for folder, (_, request) in read.items()]
    with Pool(workers, 3 * timeout, memory) as pool:
        done = [(job[0], read[job[0]][0], reply) for job, reply in pool.run(jobs)]
    return sorted(done, key=lambda item: item[0].name)
