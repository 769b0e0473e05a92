"""Benchmark: one conversion on 1 and on 2 Dask worker processes of this machine, side by side.

The llama-like checkpoint of DESIGN.md (L layers, d=512, f=1376, float32, sharded) is converted
with `fuse-qkv+cast:float16` once on one machine (the reference output) and then on a
LocalCluster of 1 and of 2 single-threaded worker processes, each within BUDGET. Cluster start-up
is outside the timed call. Prints a markdown table (wall time, its ratio to one worker, parts,
each worker's peak RSS against its budget, and whether the output is byte-identical to the
reference) and writes it to `benchmarks/results/cluster.md`.

    python -m benchmarks.bench_cluster --layers 32 --budget 256MiB
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from distributed import Client, LocalCluster

from lazyparams.cluster import MEMORY_RESOURCE, ClusterReport, convert_on_cluster
from lazyparams.engine import convert, format_bytes, parse_size
from lazyparams.engine.demo import LlamaShape, make_llama_checkpoint

SPEC = "fuse-qkv+cast:float16"
SHARD = 32 << 20
RESULTS = Path(__file__).with_name("results") / "cluster.md"


def tree(path: Path) -> dict[str, bytes]:
    """Every file under `path`, by relative name."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def on_cluster(workers: int, src: Path, dst: Path, budget: int) -> tuple[float, ClusterReport]:
    """Convert on a fresh LocalCluster of `workers` processes; the call's wall time and report."""
    resources = {MEMORY_RESOURCE: float(budget)}
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            resources=resources,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        started = time.perf_counter()
        report = convert_on_cluster(
            SPEC, src, dst, cluster=client, budget=budget, shard_size=SHARD, progress=False
        )
        return time.perf_counter() - started, report


def table(
    layers: int, budget: int, one: float, runs: Sequence[tuple[int, float, ClusterReport, bool]]
) -> str:
    """The markdown table of the runs."""
    base = runs[0][1]
    lines = [
        f"llama-like L={layers} (d=512, f=1376, float32), `{SPEC}`, budget {format_bytes(budget)} "
        f"per worker; one machine, no cluster: {one:.1f} s.",
        "",
        "| worker processes | wall s | ratio to 1 worker | parts | peak RSS / budget per worker "
        "| VM peak | identical |",
        "|---|---|---|---|---|---|---|",
    ]
    for workers, seconds, report, same in runs:
        peaks = ", ".join(
            f"{format_bytes(w.peak_rss_bytes or 0)} / {format_bytes(budget)}"
            for w in report.workers
        )
        lines.append(
            f"| {workers} | {seconds:.1f} | {seconds / base:.2f} | {report.parts_run} | {peaks} "
            f"| {format_bytes(report.measured_peak_bytes)} | {'yes' if same else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Make the checkpoint, convert it three ways, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--budget", type=parse_size, default=parse_size("256MiB"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        src = make_llama_checkpoint(
            root / "llama", LlamaShape(layers=args.layers), shard_size=SHARD
        )
        started = time.perf_counter()
        convert(SPEC, src, root / "one", budget=args.budget, shard_size=SHARD, progress=False)
        one = time.perf_counter() - started
        expected = tree(root / "one")
        runs = []
        for workers in (1, 2):
            dst = root / f"on-{workers}"
            seconds, report = on_cluster(workers, src, dst, args.budget)
            runs.append((workers, seconds, report, tree(dst) == expected))
    text = table(args.layers, args.budget, one, runs)
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
