"""The `lazyparams` command: `plan`, `convert`, `show` and `demo`, a thin layer over the engine.

Exit codes: 0 success, 1 an error (one line naming the culprit, no traceback), 2 a usage
error, 130 interrupted (Ctrl-C or SIGTERM). Imports the engine (and, for `show`, the script
printer), each part only when a command needs it, so that `--help` and `--version` answer at
once.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.errors import ConvertError, LazyParamsError

if TYPE_CHECKING:
    from rich.console import Console


def _spec_help() -> str:
    from lazyparams.engine.recipes import RECIPE_NAMES

    return (
        "a Python file defining transform(params), or built-in recipes joined with '+': "
        f"{', '.join(RECIPE_NAMES)} (e.g. fuse-qkv+cast:float16, quantize-int4:64); or, alone, "
        "gguf[:TYPE]: a Hugging Face model folder to the GGUF file llama.cpp loads (TYPE: f32, "
        "f16, bf16, q8_0, auto (the default: bf16 or f16 as the checkpoint), or a "
        "llama-quantize type such as Q4_K_M)"
    )


# Arguments -----------------------------------------------------------------------------------


def _size(text: str) -> int:
    from lazyparams.engine.sizes import parse_size

    try:
        return parse_size(text)
    except LazyParamsError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("size: ")) from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _metadata_item(text: str) -> tuple[str, Any]:
    from lazyparams.io.gguf_metadata_text import parse_metadata_item

    try:
        return parse_metadata_item(text)
    except LazyParamsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


class _VersionAction(argparse.Action):
    """`--version`: print the package's version (its own `__version__`, which the project's
    metadata declares too; reading installed metadata would cost more than the parser)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from lazyparams import __version__

        sys.stdout.write(f"lazyparams {__version__}\n")
        parser.exit()


def _command_named(argv: Sequence[str]) -> str | None:
    """The command `argv` runs: its first word that is not an option (none takes a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of `argv`: every command, but only the one it runs with its options (their
    help texts import the engine, which `--help` and `--version` do not need)."""
    parser = argparse.ArgumentParser(
        prog="lazyparams",
        description="Transform model weights in bounded memory.",
        epilog="Sizes are written like 512MiB, 4GiB or 5GB. Start with: lazyparams demo",
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = _command_named(argv)
    _plan_parser(commands, wanted == "plan")
    _convert_parser(commands, wanted == "convert")
    _show_parser(commands, wanted == "show")
    _demo_parser(commands, wanted == "demo")
    return parser


def _spec_and_source(command: argparse.ArgumentParser) -> None:
    command.add_argument("spec", metavar="SPEC", help=_spec_help())
    command.add_argument("src", metavar="SRC", help="the checkpoint to read (file or folder)")
    command.add_argument(
        "--gguf-pre",
        metavar="NAME",
        help="gguf: the BPE pre-tokenizer's name, where the model folder's is not a known one",
    )
    command.add_argument(
        "--allow-outside-links",
        action="store_true",
        help="let SRC's shards and files resolve (symlinks, ..) outside its folder",
    )


def _memory_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--budget", type=_size, help="refuse plans whose peak exceeds this")
    command.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="run up to N independent steps at once, within the memory budget",
    )
    command.add_argument("--json", action="store_true", help="print the result as JSON")


def _plan_parser(commands: Any, full: bool) -> None:
    command = commands.add_parser(
        "plan",
        help="predict a conversion's memory",
        description="Show what a conversion "
        "reads, writes and holds at its peak, before reading any data; exit 1 if the budget "
        "cannot hold.",
    )
    if not full:
        return
    _spec_and_source(command)
    _memory_options(command)
    command.add_argument(
        "--workers-on-cluster",
        type=_positive,
        metavar="N",
        help="show the partition into parts for N cluster workers (budget per worker)",
    )
    command.add_argument("--shard-size", type=_size, help="the output's shard size")
    _part_size_option(command)


def _part_size_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--part-size", type=_size, help="bytes each cluster part writes (default: a shard)"
    )


def _convert_parser(commands: Any, full: bool) -> None:

    command = commands.add_parser(
        "convert",
        help="convert a checkpoint",
        description="Convert SRC with SPEC into DST in "
        "bounded memory. DST appears only when complete.",
    )
    if not full:
        return
    from lazyparams.engine.fingerprint import VERIFY_MODES
    from lazyparams.io.detect import SINK_FORMATS

    _spec_and_source(command)
    command.add_argument("dst", metavar="DST", help="where to write (must not exist)")
    _memory_options(command)
    command.add_argument(
        "--format",
        choices=SINK_FORMATS,
        help="output format (default: from DST's extension, else safetensors)",
    )
    command.add_argument(
        "--shard-size",
        type=_size,
        help="split safetensors into shards, or GGUF into llama.cpp's NAME-0000K-of-0000N.gguf",
    )
    command.add_argument("--resume", action="store_true", help="continue an interrupted run")
    command.add_argument(
        "--verify-resume",
        choices=VERIFY_MODES,
        default="sampled",
        help="how the source is checked to be the interrupted run's: sampled (default: a hash "
        "of each file's header and spread blocks) or full (every byte, at the start of both runs)",
    )
    command.add_argument("--no-progress", action="store_true", help="draw no progress bars")
    command.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run the parts on Dask: a scheduler (tcp://host:8786) or local:N worker processes",
    )
    _part_size_option(command)
    _metadata_options(command)


def _metadata_options(command: argparse.ArgumentParser) -> None:
    from lazyparams.io.gguf_metadata_text import METADATA_SPELLING

    command.add_argument(
        "--metadata",
        action="append",
        type=_metadata_item,
        metavar="KEY[:TYPE]=VALUE",
        help=f"a GGUF metadata pair (repeatable): {METADATA_SPELLING}; untyped values are "
        "true/false (bool), integers (u32, else i64), decimals (f32), JSON lists or strings; "
        "e.g. llama.context_length:u32=4096 general.name=Mine 'general.tags:str[]=[\"a\"]'",
    )
    command.add_argument(
        "--metadata-from",
        metavar="FILE.gguf",
        help="copy every metadata pair of this GGUF, types kept (not its split.* keys); "
        "--metadata overrides it",
    )


def _show_parser(commands: Any, full: bool) -> None:
    command = commands.add_parser(
        "show",
        help="print the compiled IR",
        description="Print the transform's IR in script syntax at one stage of compilation.",
    )
    if not full:
        return
    from lazyparams.engine.compile import STAGES

    _spec_and_source(command)
    command.add_argument("--stage", choices=STAGES, default="lazy", help="default: lazy")


def _demo_parser(commands: Any, full: bool) -> None:
    command = commands.add_parser(
        "demo",
        help="convert a generated llama-like checkpoint",
        description="Make a small "
        "llama-like checkpoint in a temporary folder, plan and convert it with a built-in "
        "recipe, and compare predicted, measured and eager memory.",
    )
    if not full:
        return
    from lazyparams.engine.demo import DEMO_RECIPE, LlamaShape

    defaults = LlamaShape()
    command.add_argument("--layers", type=_positive, default=defaults.layers)
    command.add_argument("--hidden", type=_positive, default=defaults.hidden)
    command.add_argument("--intermediate", type=_positive, default=defaults.intermediate)
    command.add_argument("--recipe", default=DEMO_RECIPE, help=f"default: {DEMO_RECIPE}")
    command.add_argument("--no-progress", action="store_true", help="draw no progress bars")


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
    if args.json:
        _print_json(the_plan.summary())
    else:
        out.print(plan_table(the_plan))
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
    if args.json:
        _print_json(parts.summary())
    else:
        out.print(partition_table(parts))
        out.print(parts_table(parts))
    parts.check_budget()
    return 0


def _run_convert(args: argparse.Namespace, out: Console) -> int:
    from lazyparams.engine.convert import convert
    from lazyparams.engine.partition_report import partition_table
    from lazyparams.engine.report_tables import report_table
    from lazyparams.engine.specs import spec_with_options

    report = convert(
        spec_with_options(args.spec, gguf_pre=args.gguf_pre),
        args.src,
        args.dst,
        budget=args.budget,
        format=args.format,
        shard_size=args.shard_size,
        resume=args.resume,
        verify_resume=args.verify_resume,
        progress=not args.no_progress,
        workers=args.workers,
        metadata=_metadata(args),
        cluster=args.cluster,
        part_size=args.part_size,
        allow_outside_links=args.allow_outside_links,
    )
    if args.json:
        _print_json(report.summary())
    elif args.cluster is not None:
        out.print(partition_table(report.partition))
        for worker in report.workers:
            out.print(worker.line(), markup=False)
    else:
        out.print(report_table(report))
    return 0


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
        run = run_demo(folder, shape, spec=args.recipe, progress=not args.no_progress)
    out.print(plan_table(run.report.plan))
    out.print(memory_table(run.report, run.source_bytes))
    return 0


_COMMANDS = {"plan": _run_plan, "convert": _run_convert, "show": _run_show, "demo": _run_demo}


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


def _partial_hint(args: argparse.Namespace) -> None:
    from lazyparams.engine.dst_lock import is_locked
    from lazyparams.engine.journal import work_dir

    dst = getattr(args, "dst", None)
    if dst is not None and work_dir(Path(dst)).exists() and not is_locked(Path(dst)):
        _error(
            f"the partial output is kept in {work_dir(Path(dst))}; rerun with --resume to "
            "continue, or without it to start over"
        )


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a command as Ctrl-C does (KeyboardInterrupt: the output keeps what a
    resume needs, exit code 130); the previous handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]) and return the exit code."""
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        args = _parser(words).parse_args(words)
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    from rich.console import Console

    try:
        with _terminate_as_interrupt():
            return _COMMANDS[args.command](args, Console(highlight=False))
    except LazyParamsError as err:
        _error(str(err))
        _partial_hint(args)
        return 1
    except OSError as err:
        _error(str(err))
        _partial_hint(args)
        return 1
    except KeyboardInterrupt:
        _error("interrupted")
        _partial_hint(args)
        return 130
