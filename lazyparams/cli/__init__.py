"""The `lazyparams` command (plan, convert, merge, merge-lora, extract-lora, show, demo): a thin
layer over the engine.

Exit codes: 0 success, 1 an error (one line naming the culprit, no traceback), 2 a usage
error, 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (128 + the signal, as shells report).
The arguments are `cli.options`'; this module runs the commands, importing the engine (and, for
`show`, the script printer) part by part, only when a command needs it, so that `--help` and
`--version` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.cli.options import build_parser
from lazyparams.errors import ConvertError, LazyParamsError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from lazyparams.engine.convert import ConvertOptions
    from lazyparams.engine.executor import ExecutorReport


# Commands ------------------------------------------------------------------------------------


def _run_plan(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.engine.plan import plan
    from lazyparams.engine.report_tables import plan_table
    from lazyparams.engine.specs import spec_with_options

    if args.workers_on_cluster is not None:
        return _run_partition(args, out)
    spec = spec_with_options(args.spec, gguf_pre=args.gguf_pre)
    the_plan = plan(
        spec,
        args.src,
        budget=args.budget,
        workers=args.workers,
        allow_outside_links=args.allow_outside_links,
    )
    _print_result(args, out, the_plan, plan_table)
    reason = the_plan.budget_message
    if reason is not None:
        _error(reason)
        return 1
    return 0


def _run_partition(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.engine.partition import partition
    from lazyparams.engine.partition_report import partition_table, parts_table

    if args.allow_outside_links:
        raise ConvertError("--allow-outside-links: applies to one machine, not to cluster parts")
    parts = partition(
        args.spec,
        args.src,
        workers=args.workers_on_cluster,
        part_size=args.part_size,
        shard_size=args.shard_size,
        budget=args.budget,
    )
    _print_result(args, out, parts, partition_table, parts_table)
    parts.check_budget()
    return 0


def _run_convert(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.engine.convert import Report, convert
    from lazyparams.engine.report_tables import report_table
    from lazyparams.engine.specs import spec_with_options

    spec = _seeded(spec_with_options(args.spec, gguf_pre=args.gguf_pre), args)
    options = _convert_options(args)
    report = convert(
        spec, args.src, args.dst, cluster=args.cluster, part_size=args.part_size, **options
    )
    if args.json:
        _print_json(report.summary())
    elif isinstance(report, Report):
        out.print(report_table(report))
    else:
        _print_cluster_report(report, out)
    return 0


def _convert_options(args: argparse.Namespace) -> ConvertOptions:
    """`convert`'s keyword arguments as the options give them, all but `cluster` and
    `part_size` (which choose the kind of report it returns)."""
    return {
        "budget": args.budget,
        "format": args.format,
        "shard_size": args.shard_size,
        "resume": args.resume,
        "verify_resume": args.verify_resume,
        "progress": not args.no_progress,
        "workers": args.workers,
        "metadata": _metadata(args),
        "allow_outside_links": args.allow_outside_links,
        "notice": _warning,
    }


def _seeded(spec: Any, args: argparse.Namespace) -> Any:
    """`merged:SEED+SPEC` for `merge --random-seed SEED` (the seed travels with the SPEC)."""
    seed = getattr(args, "random_seed", None)
    if seed is None:
        return spec
    if seed < 0:
        raise ConvertError(f"--random-seed: expected a non-negative integer, got {seed}")
    return f"merged:{seed}" if spec == "merged" else f"merged:{seed}+{spec}"


def _print_cluster_report(report: ExecutorReport, out: Console) -> None:
    """The Dask executor's report: the partition, then a line per worker."""
    from lazyparams.cluster import ClusterReport
    from lazyparams.engine.partition_report import partition_table

    assert isinstance(report, ClusterReport), type(report)
    out.print(partition_table(report.partition))
    for worker in report.workers:
        out.print(worker.line(), markup=False)


def _metadata(args: argparse.Namespace) -> dict[str, Any] | None:
    """The GGUF metadata the options ask for: --metadata-from's pairs, then --metadata's."""
    if args.metadata_from is None and not args.metadata:
        return None
    from lazyparams.io.gguf_metadata import read_gguf_metadata

    pairs: dict[str, Any] = {}
    if args.metadata_from is not None:
        pairs.update(read_gguf_metadata(args.metadata_from))
    pairs.update(args.metadata or [])
    return pairs


def _run_inspect(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.engine.inspection import describe_lines, inspect_checkpoint

    found = inspect_checkpoint(args.file, allow_outside_links=args.allow_outside_links)
    if args.json:
        sys.stdout.write(json.dumps(found.as_json(), indent=2, default=str) + "\n")
    else:
        sys.stdout.write("\n".join(describe_lines(found)) + "\n")
    return 0


def _run_show(args: argparse.Namespace, out: Console) -> int:
    import lazyparams.script  # noqa: F401 - the printer behind `show`
    from lazyparams.engine.compile import stage, trace_transform
    from lazyparams.engine.plan import opened
    from lazyparams.engine.specs import resolve_spec, spec_with_options

    spec = spec_with_options(args.spec, gguf_pre=args.gguf_pre)
    with opened(args.src, args.allow_outside_links) as source:
        fn = resolve_spec(spec, source, args.src).fn
        text = stage(trace_transform(fn, source), args.stage).script()
    sys.stdout.write(text)
    return 0


def _run_merge_lora(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.cli.lora import merge_lora
    from lazyparams.engine.report_tables import report_table
    from lazyparams.engine.specs import spec_with_options

    spec = spec_with_options(args.spec, gguf_pre=args.gguf_pre)
    options = _convert_options(args)
    report = merge_lora(
        args.base,
        args.adapters,
        args.dst,
        args.weights,
        spec,
        cluster=args.cluster,
        part_size=args.part_size,
        **options,
    )
    _print_result(args, out, report, report_table)
    return 0


def _run_extract_lora(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.cli.lora import ADAPTER_WEIGHTS, extract_lora
    from lazyparams.engine.report_tables import report_table

    args.dst = str(Path(args.folder) / ADAPTER_WEIGHTS)  # where a partial output is kept
    settings = {"embed_lora": args.embed_lora, "save_modules": args.save_module}
    settings |= _run_settings(args)
    report = extract_lora(args.base, args.finetuned, args.folder, args.rank, **settings)
    _print_result(args, out, report, report_table)
    return 0


def _run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """How a run that writes is held and resumed, as the options say (`--budget`, `--workers`,
    `--resume`, `--verify-resume`, `--no-progress`)."""
    return {
        "budget": args.budget,
        "workers": args.workers,
        "resume": args.resume,
        "verify_resume": args.verify_resume,
        "progress": not args.no_progress,
        "notice": _warning,
    }


def _run_demo(args: argparse.Namespace, out: Console) -> int:
    import tempfile

    from lazyparams.engine.demo import LlamaShape, run_demo
    from lazyparams.engine.report_tables import memory_table, plan_table

    shape = LlamaShape(args.layers, args.hidden, args.intermediate)
    out.print(
        f"Making a llama-like checkpoint ({shape.layers} layers, d={shape.hidden}, "
        f"f={shape.intermediate}) and converting it with {args.recipe!r}.",
        markup=False,
    )
    with tempfile.TemporaryDirectory(prefix="lazyparams-demo-") as folder:
        run = run_demo(
            folder, shape, spec=args.recipe, progress=not args.no_progress, notice=_warning
        )
    out.print(plan_table(run.report.plan))
    out.print(memory_table(run.report, run.source_bytes))
    return 0


_COMMANDS = {
    "plan": _run_plan,
    "convert": _run_convert,
    "merge": _run_convert,  # a merge is a conversion whose SRC is the configuration
    "merge-lora": _run_merge_lora,
    "extract-lora": _run_extract_lora,
    "inspect": _run_inspect,
    "show": _run_show,
    "demo": _run_demo,
}


def _check_argument_order(args: argparse.Namespace) -> None:
    """Refuse SPEC and SRC given the wrong way round (`plan MODEL cast:float16`), which would
    otherwise say only that a file named after the recipe does not exist."""
    spec, src = getattr(args, "spec", None), getattr(args, "src", None)
    if not isinstance(spec, str) or src is None or Path(src).exists():
        return
    if Path(spec).exists() and not spec.endswith(".py"):
        raise ConvertError(
            f"{src}: no such file or folder, and SPEC {spec!r} is one: SPEC comes first, then "
            f"SRC; expected `lazyparams {args.command} {src} {spec} ...`"
        )


def _print_result(
    args: argparse.Namespace, out: Console, result: Any, *tables: Callable[[Any], Table]
) -> None:
    """`result` as JSON with --json, else as each of `tables` made of it."""
    if args.json:
        _print_json(result.summary())
        return
    for table in tables:
        out.print(table(result))


def _print_json(summary: Any) -> None:
    import json

    print(json.dumps(summary, indent=2))


# Entry point ---------------------------------------------------------------------------------


def _error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    # soft wrap: an error stays one line, however narrow the terminal
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text.assemble(("error: ", "bold red"), message))


def _warning(message: str) -> None:
    """A one-line warning on stderr: the command goes on."""
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text.assemble(("warning: ", "bold yellow"), message))


def _partial_hint(args: argparse.Namespace) -> None:
    from lazyparams.engine.dst_lock import is_locked
    from lazyparams.engine.part_files import partial_work

    dst = getattr(args, "dst", None)
    if dst is None:
        return
    work = partial_work(Path(dst))
    if work is not None and not is_locked(Path(dst)):
        _error(
            f"the partial output is kept in {work}; rerun with --resume to continue, or "
            "without it to start over"
        )


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so it stops a run the same
    way; the exit code tells the two apart."""

    exit_code = 128 + signal.SIGTERM


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a command as Ctrl-C does (the output keeps what a resume needs), exiting
    with 143; the previous handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _process_tuned(command: str) -> Iterator[None]:
    """The commands that trace and convert opt this process, which is theirs, in to the
    engine's process-wide settings (`engine.process`); a library call does not."""
    if command == "show":
        yield
        return
    from lazyparams.engine.process import tune_process_for_conversion

    with tune_process_for_conversion():
        yield


def _raise_interrupt(signum: int, frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]) and return the exit code."""
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(words).parse_args(words)
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    from rich.console import Console

    try:
        with _terminate_as_interrupt(), _process_tuned(args.command):
            _check_argument_order(args)
            return _COMMANDS[args.command](args, Console(highlight=False))
    except LazyParamsError as err:
        _error(str(err))
        _partial_hint(args)
        return 1
    except OSError as err:
        _error(str(err))
        _partial_hint(args)
        return 1
    except KeyboardInterrupt as stop:
        _error("terminated" if isinstance(stop, Terminated) else "interrupted")
        _partial_hint(args)
        return int(getattr(stop, "exit_code", 130))
