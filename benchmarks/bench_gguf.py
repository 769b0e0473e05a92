"""Hugging Face folder -> GGUF: `lazyparams convert gguf:TYPE` against llama.cpp's converter.

Both run as the commands a user types, side by side in one run, each in a fresh process: wall
time of the whole command and the process's peak resident memory (ru_maxrss from wait4). The
converter (`convert_hf_to_gguf.py`, which needs torch and transformers) is an optional
baseline: without `--converter` or where it cannot start, its rows are skipped with a message.
`--quantize` adds `llama-quantize` from the converter's bf16 file, against lazyparams' one step.

    python benchmarks/bench_gguf.py --model DIR [DIR...] --types f16,q8_0 \\
        --converter LLAMA_CPP/convert_hf_to_gguf.py --converter-python PY \\
        --quantize LLAMA_CPP_BUILD/bin/llama-quantize --quant-types Q4_K_M
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20


@dataclass(frozen=True)
class Run:
    """One command: wall seconds and peak RSS in bytes (None when it failed or was skipped)."""

    tool: str
    wall_s: float | None
    peak_rss: int | None
    note: str = ""


def timed(command: list[str], cwd: Path | None = None) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit code) of `command` in a fresh process; a failing
    command's last lines of stderr are shown."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errors.seek(0)
            tail = errors.read().decode(errors="replace").splitlines()[-20:]
            sys.stderr.write(f"{' '.join(command)}: exit {code}\n" + "\n".join(tail) + "\n")
    return wall, usage.ru_maxrss * 1024, code


def lazyparams_run(
    model: Path, out: Path, type_name: str, workers: int, budget: str | None = None
) -> Run:
    """`lazyparams convert gguf:TYPE` with `workers` (and `--budget` when given)."""
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "lazyparams", "convert", f"gguf:{type_name}"]
    command += [str(model), str(out), "--no-progress", "--workers", str(workers)]
    command += ["--budget", budget] if budget else []
    wall, rss, code = timed(command)
    tool = f"lazyparams, {workers} worker{'s' if workers > 1 else ''}"
    tool += f", --budget {budget}" if budget else ""
    return Run(tool, wall, rss) if code == 0 else Run(tool, None, None, f"exit {code}")


def converter_run(args: argparse.Namespace, model: Path, out: Path, type_name: str) -> Run:
    tool = "convert_hf_to_gguf.py"
    if args.converter is None:
        return Run(tool, None, None, "skipped: no --converter given")
    script = Path(args.converter)
    if not script.is_file():
        return Run(tool, None, None, f"skipped: {script} not found")
    command = [
        args.converter_python,
        str(script),
        str(model),
        "--outfile",
        str(out),
        "--outtype",
        type_name,
    ]
    wall, rss, code = timed(command, cwd=script.parent)
    return Run(tool, wall, rss) if code == 0 else Run(tool, None, None, f"skipped: exit {code}")


def quantize_run(args: argparse.Namespace, bf16: Path, out: Path, type_name: str) -> Run:
    tool = "llama-quantize (from the converter's bf16)"
    if args.quantize is None or not bf16.is_file():
        return Run(tool, None, None, "skipped: no --quantize or no bf16 file")
    out.unlink(missing_ok=True)
    command = [args.quantize, str(bf16), str(out), type_name, str(args.threads)]
    wall, rss, code = timed(command)
    return Run(tool, wall, rss) if code == 0 else Run(tool, None, None, f"skipped: exit {code}")


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table_rows(model: Path, type_name: str, runs: list[Run]) -> list[str]:
    """Markdown rows with ratios to lazyparams' first run."""
    base = runs[0]
    rows = []
    for run in runs:
        wall_ratio = run.wall_s / base.wall_s if run.wall_s and base.wall_s else None
        rss_ratio = run.peak_rss / base.peak_rss if run.peak_rss and base.peak_rss else None
        rss = None if run.peak_rss is None else run.peak_rss / MIB
        rows.append(
            f"| {model.name} | {type_name} | {run.tool} | {_cell(run.wall_s, '.2f')} | "
            f"{_cell(wall_ratio, '.2f')} | {_cell(rss, '.0f')} | {_cell(rss_ratio, '.2f')} | "
            f"{run.note} |"
        )
    return rows


def bench_model(args: argparse.Namespace, model: Path, scratch: Path) -> list[str]:
    rows = []
    bf16 = scratch / f"{model.name}-converter-bf16.gguf"
    for type_name in args.types:
        runs = [lazyparams_run(model, scratch / "lp.gguf", type_name, w) for w in (1, 2)]
        if args.budget:
            runs.append(lazyparams_run(model, scratch / "lp.gguf", type_name, 2, args.budget))
        runs.append(converter_run(args, model, scratch / "ref.gguf", type_name))
        rows += table_rows(model, type_name, runs)
        for file in ("lp.gguf", "ref.gguf"):
            (scratch / file).unlink(missing_ok=True)
    if args.quant_types:
        converter_run(args, model, bf16, "bf16")
    for type_name in args.quant_types:
        runs = [lazyparams_run(model, scratch / "lp.gguf", type_name, w) for w in (1, 2)]
        runs.append(quantize_run(args, bf16, scratch / "ref.gguf", type_name))
        rows += table_rows(model, type_name, runs)
        for file in ("lp.gguf", "ref.gguf"):
            (scratch / file).unlink(missing_ok=True)
    bf16.unlink(missing_ok=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", required=True, type=Path)
    parser.add_argument("--types", default="f16,q8_0", type=lambda t: t.split(","))
    parser.add_argument("--quant-types", default="", type=lambda t: [x for x in t.split(",") if x])
    parser.add_argument("--converter", help="path of llama.cpp's convert_hf_to_gguf.py")
    parser.add_argument("--converter-python", default=sys.executable)
    parser.add_argument("--quantize", help="path of llama.cpp's llama-quantize")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--budget", help="also run lazyparams with 2 workers within this budget")
    parser.add_argument("--scratch", type=Path, help="where outputs go (default: a temp folder)")
    args = parser.parse_args(argv)
    print(
        "| model | type | tool | wall s | wall ÷ lazyparams | peak RSS MiB "
        "| peak ÷ lazyparams | note |"
    )
    print("|---|---|---|---|---|---|---|---|")
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="bench-gguf-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for model in args.model:
            for row in bench_model(args, model, scratch):
                print(row, flush=True)
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
