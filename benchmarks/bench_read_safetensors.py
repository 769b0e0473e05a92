"""Benchmark: reading a safetensors file tensor by tensor, lazyparams' source vs the library.

Writes a file (2 GiB by default, `--size 512MiB` for less), then reads it in a fresh subprocess per
reader and run, so peak RSS over the child's baseline is measurable; every page of every array is
touched once. "lazyparams+copy" also copies each view. Prints a markdown table of ratios against
`safetensors.safe_open(framework="numpy")`.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

PAGE = 4096
READERS = ("safetensors", "lazyparams", "lazyparams+copy")
_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "KB": 10**3, "MB": 10**6}
_UNITS["GB"] = 10**9


def parse_size(text: str) -> int:
    """Bytes from '2GiB', '512MiB', '1e9' or a plain integer."""
    match = re.fullmatch(r"([\d.e+]+)\s*([a-zA-Z]*)", text.strip())
    if match is None or match.group(2).upper() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


# -- child: one reader, one pass ----------------------------------------------------------------


def touch(array: Any) -> int:
    """Fault in every page of `array` (one byte per page) and return a small checksum."""
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return int(flat[::PAGE].sum(dtype=np.uint64))


def read_with_library(path: str) -> Iterator[Any]:
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        for name in f.keys():  # noqa: SIM118 - safe_open is not iterable
            yield f.get_tensor(name)


def read_with_lazyparams(path: str, copy: bool) -> Iterator[Any]:
    from lazyparams.io import SafetensorsSource

    with SafetensorsSource(path) as source:
        for name in source.names():
            array = source.load(name)
            yield np.array(array) if copy else array


def reset_peak_rss() -> int:
    """Make the peak RSS equal to the current RSS where the OS allows it; returns the baseline.

    The imports' own transient peak would otherwise hide anything smaller than it.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return peak_rss()  # no reset: measure over the peak so far
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    """The process's peak resident set size in bytes."""
    if Path("/proc/self/status").exists():
        return _status_kib("VmHWM") * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def run_child(reader: str, path: str) -> None:
    """Read every tensor once and print seconds, peak RSS over baseline and a checksum."""
    arrays: Callable[[], Iterator[Any]] = {
        "safetensors": lambda: read_with_library(path),
        "lazyparams": lambda: read_with_lazyparams(path, copy=False),
        "lazyparams+copy": lambda: read_with_lazyparams(path, copy=True),
    }[reader]
    import safetensors  # noqa: F401 - same imports in every child, so baselines compare

    import lazyparams.io  # noqa: F401

    baseline = reset_peak_rss()
    start = time.perf_counter()
    checksum = sum(touch(array) for array in arrays())
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss": peak_rss() - baseline, "sum": checksum}))


# -- parent: write, run children, report --------------------------------------------------------


def write_checkpoint(path: Path, size: int, tensor_size: int) -> int:
    """Write `size` bytes of float32 tensors of `tensor_size` bytes each; returns the count."""
    from lazyparams.io import SafetensorsSink, TensorInfo

    count = max(1, size // tensor_size)
    rows = max(1, tensor_size // (4 * 1024))
    infos = [TensorInfo.of(f"layers.{i}.weight", (rows, 1024), "float32") for i in range(count)]
    with SafetensorsSink(path, infos) as sink:
        for i, info in enumerate(infos):
            sink.write(info.name, np.full(info.shape, i, np.float32))
    return count


def warm_cache(path: Path) -> None:
    with open(path, "rb") as fp:
        while fp.read(1 << 24):
            pass


def measure(reader: str, path: Path) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", reader, str(path)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def report(results: dict[str, list[dict[str, float]]], size: int, count: int) -> str:
    """The markdown table: medians per reader, and ratios to the library's medians."""
    medians = {
        reader: {key: statistics.median(run[key] for run in runs) for key in ("seconds", "rss")}
        for reader, runs in results.items()
    }
    base = medians["safetensors"]
    lines = [
        f"{size / (1 << 20):.0f} MiB file, {count} float32 tensors, "
        f"{len(results['safetensors'])} run(s) per reader, warm page cache",
        "",
        "| reader | time (s) | time / safetensors | peak RSS over baseline (MiB) "
        "| RSS / safetensors |",
        "|---|---:|---:|---:|---:|",
    ]
    for reader, value in medians.items():
        rss_ratio = value["rss"] / base["rss"] if base["rss"] else float("nan")
        lines.append(
            f"| {reader} | {value['seconds']:.3f} | {value['seconds'] / base['seconds']:.2f} "
            f"| {value['rss'] / (1 << 20):.1f} | {rss_ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("2GiB"))
    parser.add_argument("--tensor-size", type=parse_size, default=parse_size("64MiB"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the file")
    parser.add_argument("--child", nargs=2, metavar=("READER", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(*args.child)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = Path(folder) / "bench.safetensors"
        count = write_checkpoint(path, args.size, args.tensor_size)
        file_size = path.stat().st_size
        warm_cache(path)
        results: dict[str, list[dict[str, float]]] = {reader: [] for reader in READERS}
        for _ in range(args.repeat):
            for reader in READERS:
                results[reader].append(measure(reader, path))
        sums = {run["sum"] for runs in results.values() for run in runs}
        if len(sums) != 1:
            raise SystemExit(f"readers disagree on the data: checksums {sums}")
    print(report(results, file_size, count))


if __name__ == "__main__":
    main()
