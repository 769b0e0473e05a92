"""The `lazyparams` command line's arguments: one parser per command, options and their checks.

Only the command being run gets its options (their help texts import the engine's recipe and
format tables), so that `--help` and `--version` import nothing but this module. Imports the
engine and io lazily, for help texts and value checks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from lazyparams.errors import LazyParamsError


def _spec_help() -> str:
    return (
        "a Python file defining transform(params), or built-in recipes joined with '+' "
        "(listed below), e.g. fuse-qkv+cast:float16 or quantize-int4:64; a target recipe "
        "such as gguf[:TYPE] stands alone"
    )


def _recipes_epilog() -> str:
    from lazyparams.engine.recipe_registry import recipe_help

    return f"recipes:\n{recipe_help()}"


def _format_names() -> tuple[str, ...]:
    from lazyparams.io.output_formats import format_names

    return format_names()


def _format_help() -> str:
    from lazyparams.io.output_formats import DEFAULT, output_formats

    each = "; ".join(
        f"{f.name}: {f.writes}{' (' + ', '.join(f.suffixes) + ')' if f.suffixes else ''}"
        for f in output_formats()
    )
    return f"output format (default: the one DST's suffix names, else {DEFAULT}). {each}"


# Arguments -----------------------------------------------------------------------------------


def _size(text: str) -> int:
    from lazyparams.engine.sizes import parse_size

    try:
        return parse_size(text)
    except LazyParamsError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("size: ")) from None


def _budget(text: str) -> int | str:
    """A size, or `none` (no budget, not even the default)."""
    return "none" if text.strip().lower() == "none" else _size(text)


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
    metadata declares too; reading installed metadata would cost more than the parser) and
    the loops the kernels run (`cli.kernels`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from lazyparams import __version__
        from lazyparams.cli.kernels import kernels_line

        sys.stdout.write(f"lazyparams {__version__}\n{kernels_line()}\n")
        parser.exit()


def _command_named(argv: Sequence[str]) -> str | None:
    """The command `argv` runs: its first word that is not an option (none takes a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


_COMMANDS = {
    "plan": (
        "predict a conversion's memory",
        "Show what a conversion reads, writes and holds at its peak, before reading any data; "
        "exit 1 if the budget cannot hold.",
    ),
    "convert": (
        "convert a checkpoint",
        "Convert SRC with SPEC into DST in bounded memory. DST appears only when complete.",
    ),
    "inspect": (
        "list a checkpoint's metadata and tensors",
        "List what the checkpoint FILE holds without reading its tensors: metadata (a GGUF "
        "file's key/value pairs and their types), every tensor's shape, type and size, and "
        "the totals per type.",
    ),
    "show": (
        "print the compiled IR",
        "Print the transform's IR in script syntax at one stage of compilation.",
    ),
    "merge": (
        "merge several models into one",
        "Merge the models a configuration names (mergekit's YAML) into DST in bounded memory, "
        "optionally through a recipe (--recipe gguf:Q4_K_M). Also: convert SPEC CONFIG DST.",
    ),
    "merge-lora": (
        "merge LoRA adapters into their base model",
        "Merge PEFT LoRA adapters (folders of adapter_config.json and adapter_model.safetensors) "
        "into BASE, in order, and write DST (a folder gets a Hugging Face model: config.json and "
        "tokenizer from BASE), optionally through a recipe (--recipe gguf:Q8_0).",
    ),
    "extract-lora": (
        "extract a LoRA adapter from a fine-tuned model",
        "Write into the folder DST the PEFT LoRA adapter of rank R that leads from BASE to "
        "FINETUNED (the truncated SVD of each linear weight's difference, as "
        "mergekit-extract-lora makes it).",
    ),
    "demo": (
        "convert a generated llama-like checkpoint",
        "Make a small llama-like checkpoint in a temporary folder, plan and convert it with a "
        "built-in recipe, and compare predicted, measured and eager memory.",
    ),
}
"""Each command's one-line help and description."""


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
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
    for name, (summary, description) in _COMMANDS.items():
        command = commands.add_parser(name, help=summary, description=description)
        if name == wanted:
            _OPTIONS[name](command)
    return parser


def _spec_and_source(command: argparse.ArgumentParser) -> None:
    command.epilog = _recipes_epilog()
    command.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps a line per recipe
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
    command.add_argument(
        "--budget",
        type=_budget,
        help="the memory the run may hold: steps run in blocks of rows to fit it, or the plan "
        "is refused (default: the memory this process can use, less headroom; 'none': no budget)",
    )
    command.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="run up to N independent steps at once, within the memory budget",
    )
    command.add_argument("--json", action="store_true", help="print the result as JSON")


def _plan_options(command: argparse.ArgumentParser) -> None:
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


def _convert_options(command: argparse.ArgumentParser) -> None:
    _spec_and_source(command)
    command.add_argument("dst", metavar="DST", help="where to write (must not exist)")
    _output_options(command)


def _merge_options(command: argparse.ArgumentParser) -> None:
    command.epilog = _recipes_epilog()
    command.formatter_class = argparse.RawDescriptionHelpFormatter
    command.add_argument(
        "src", metavar="CONFIG", help="a merge configuration (mergekit's YAML: models, method)"
    )
    command.add_argument(
        "dst",
        metavar="DST",
        help="where to write (must not exist): a folder gets the merged model as a Hugging "
        "Face folder (config.json and tokenizer from the base)",
    )
    _recipe_options(command, "gguf:Q4_K_M or cast:bfloat16")
    command.add_argument(
        "--random-seed",
        type=int,
        metavar="N",
        help="seed of the random masks of dare_* and della* (default 0: the same masks each run)",
    )
    command.set_defaults(allow_outside_links=False)
    _output_options(command)


def _merge_lora_options(command: argparse.ArgumentParser) -> None:
    command.epilog = _recipes_epilog()
    command.formatter_class = argparse.RawDescriptionHelpFormatter
    command.add_argument("base", metavar="BASE", help="the base model (folder or file)")
    command.add_argument(
        "adapters", metavar="ADAPTER", nargs="+", help="PEFT adapter folders, merged in order"
    )
    command.add_argument("dst", metavar="DST", help="where to write (must not exist)")
    weights_help = "one weight per adapter, scaling its update (default 1 each); --weights=-0.5,1"
    command.add_argument("--weights", type=_weights, metavar="W1,W2,...", help=weights_help)
    _recipe_options(command, "gguf:Q8_0")
    command.set_defaults(allow_outside_links=False)
    _output_options(command)


def _recipe_options(command: argparse.ArgumentParser, example: str) -> None:
    """--recipe (the SPEC that follows a merge in the same run) and --gguf-pre."""
    command.add_argument(
        "--recipe",
        dest="spec",
        default="merged",
        metavar="SPEC",
        help=f"what to make of the merged model in the same run, e.g. {example} (default: the "
        "merged tensors as they are)",
    )
    command.add_argument("--gguf-pre", metavar="NAME", help="gguf: the BPE pre-tokenizer's name")


def _weights(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, got {text!r}"
        ) from None


def _extract_lora_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("base", metavar="BASE", help="the base model (folder or file)")
    command.add_argument("finetuned", metavar="FINETUNED", help="the fine-tuned model")
    command.add_argument(
        "folder", metavar="DST", help="the adapter folder to write (must not exist)"
    )
    command.add_argument(
        "--rank", type=_positive, required=True, metavar="R", help="the adapter's rank"
    )
    command.add_argument(
        "--embed-lora",
        action="store_true",
        help="decompose the embeddings and the output head too (default: left out)",
    )
    command.add_argument(
        "--save-module",
        action="append",
        default=[],
        metavar="NAME",
        help="store this module whole in the adapter (modules_to_save; repeatable), e.g. "
        "lm_head or norm",
    )
    _memory_options(command)
    _run_options(command)


def _output_options(command: argparse.ArgumentParser) -> None:
    """The options of a run that writes DST."""
    _memory_options(command)
    command.add_argument("--format", choices=_format_names(), help=_format_help())
    command.add_argument(
        "--shard-size",
        type=_size,
        help="split safetensors into shards, or GGUF into llama.cpp's NAME-0000K-of-0000N.gguf",
    )
    _run_options(command)
    command.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run the parts on Dask: a scheduler (tcp://host:8786) or local:N worker processes",
    )
    _part_size_option(command)
    _metadata_options(command)


def _run_options(command: argparse.ArgumentParser) -> None:
    """How a run that writes resumes and reports."""
    from lazyparams.engine.fingerprint import VERIFY_MODES

    command.add_argument("--resume", action="store_true", help="continue an interrupted run")
    command.add_argument(
        "--verify-resume",
        choices=VERIFY_MODES,
        default="full",
        help="how the source is checked to be the interrupted run's: full (default: a CRC of "
        "every byte, read at the start of both runs, so any changed byte is caught) or sampled "
        "(a hash of each file's header and spread blocks: cheaper, misses most edits in place)",
    )
    command.add_argument("--no-progress", action="store_true", help="draw no progress bars")


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


def _show_options(command: argparse.ArgumentParser) -> None:
    from lazyparams.engine.compile import STAGES

    _spec_and_source(command)
    command.add_argument("--stage", choices=STAGES, default="lazy", help="default: lazy")


def _demo_options(command: argparse.ArgumentParser) -> None:
    from lazyparams.engine.demo import DEMO_RECIPE, LlamaShape

    defaults = LlamaShape()
    command.add_argument("--layers", type=_positive, default=defaults.layers)
    command.add_argument("--hidden", type=_positive, default=defaults.hidden)
    command.add_argument("--intermediate", type=_positive, default=defaults.intermediate)
    command.add_argument("--recipe", default=DEMO_RECIPE, help=f"default: {DEMO_RECIPE}")
    command.add_argument("--no-progress", action="store_true", help="draw no progress bars")


def _inspect_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("file", metavar="FILE", help="the checkpoint (file or folder)")
    command.add_argument("--json", action="store_true", help="print the result as JSON")
    command.add_argument(
        "--allow-outside-links",
        action="store_true",
        help="let FILE's shards resolve (symlinks, ..) outside its folder",
    )


_OPTIONS = {
    "plan": _plan_options,
    "inspect": _inspect_options,
    "convert": _convert_options,
    "merge": _merge_options,
    "merge-lora": _merge_lora_options,
    "extract-lora": _extract_lora_options,
    "show": _show_options,
    "demo": _demo_options,
}
"""The options of each command, added only to the one being run."""
