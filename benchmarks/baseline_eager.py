"""The eager baseline: load a whole checkpoint with `safetensors`, transform in numpy, save.

This is the path a user takes without lazyparams, and the reference the other pipelines must
match bit for bit. Also makes the llama-like checkpoint (Hugging Face names, sharded with an
index) and compares two checkpoints. Imports numpy, safetensors and the benchmark workloads.
Run `python -m benchmarks.baseline_eager --help`.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import load_file, save_file

from benchmarks.workloads import WEIGHTS, llama_shapes
from lazyparams.errors import CheckpointError, ConvertError

Array = NDArray[Any]
INDEX_NAME = "model.safetensors.index.json"
HF_NAMES = {
    "q": "self_attn.q_proj",
    "k": "self_attn.k_proj",
    "v": "self_attn.v_proj",
    "o": "self_attn.o_proj",
    "gate": "mlp.gate_proj",
    "up": "mlp.up_proj",
    "down": "mlp.down_proj",
}
"""Hugging Face llama spelling of each workload weight."""
FUSED = (
    ("self_attn.qkv_proj", ("q", "k", "v")),
    ("self_attn.o_proj", ("o",)),
    ("mlp.gate_up_proj", ("gate", "up")),
    ("mlp.down_proj", ("down",)),
)
"""The outputs of one layer, in order: fused name and the weights concatenated along axis 0.

The fused names are those of lazyparams' `fuse-qkv` recipe, so `fuse-qkv+cast:float16` is the
same transform."""


@dataclass(frozen=True, slots=True)
class Output:
    """One output tensor: its name, the inputs joined along axis 0, and its shard file."""

    name: str
    members: tuple[str, ...]
    file: str


def checkpoint_name(layer: int, weight: str) -> str:
    """The checkpoint name of workload weight `weight` (one of WEIGHTS) of layer `layer`."""
    return f"model.layers.{layer}.{HF_NAMES[weight]}.weight"


# -- making the input checkpoint -----------------------------------------------------------------


def make_checkpoint(
    folder: str | Path, layers: int, d: int = 512, f: int = 1376, shards: int = 4, seed: int = 0
) -> Path:
    """Write the llama-like float32 checkpoint into `folder`; returns the folder.

    Layers are split into `shards` contiguous runs (at most one per layer), one
    `model-0000i-of-0000n.safetensors` each, tied by `model.safetensors.index.json`. Values equal
    `workloads.llama_inputs(layers, d, f, seed)`, drawn in the same order, one shard in memory.
    """
    if layers < 1 or shards < 1:
        raise ConvertError(f"expected layers >= 1 and shards >= 1, got {layers} and {shards}")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    shapes = iter(llama_shapes(layers, d, f))
    runs = np.array_split(np.arange(layers), min(shards, layers))
    weight_map: dict[str, str] = {}
    total = 0
    for i, run in enumerate(runs):
        file = f"model-{i + 1:05d}-of-{len(runs):05d}.safetensors"
        tensors = {
            checkpoint_name(int(layer), weight): rng.standard_normal(next(shapes)[1], np.float32)
            for layer in run
            for weight in WEIGHTS
        }
        save_file(tensors, str(out / file))
        weight_map |= dict.fromkeys(tensors, file)
        total += sum(a.nbytes for a in tensors.values())
    write_index(out / INDEX_NAME, weight_map, total)
    return out


def write_index(path: Path, weight_map: Mapping[str, str], total_size: int) -> None:
    """Write a Hugging Face style shard index."""
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")


# -- reading the layout ------------------------------------------------------------------------


def read_weight_map(src: str | Path) -> tuple[dict[str, str], str | None]:
    """Tensor name -> shard file of the checkpoint folder `src`, and its index's file name.

    A folder without an index must hold exactly one .safetensors file.
    """
    folder = Path(src)
    indexes = sorted(folder.glob("*.safetensors.index.json"))
    if indexes:
        index = json.loads(indexes[0].read_text(encoding="utf-8"))
        if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
            raise CheckpointError(f"{indexes[0]}: expected a weight_map object, got none")
        return dict(index["weight_map"]), indexes[0].name
    files = sorted(folder.glob("*.safetensors"))
    if len(files) != 1:
        raise CheckpointError(
            f"{folder}: expected an index or one .safetensors file, got {len(files)} files"
        )
    with open(files[0], "rb") as fp:
        header = json.loads(fp.read(int.from_bytes(fp.read(8), "little")))
    return dict.fromkeys((n for n in header if n != "__metadata__"), files[0].name), None


def plan_outputs(weight_map: Mapping[str, str]) -> list[Output]:
    """The outputs of the llama-like transform, layer by layer, each in its first input's shard.

    Every checkpoint tensor must be a weight of a complete layer; anything else is refused,
    since the baselines implement this one transform only.
    """
    layers = _layer_count(weight_map)
    expected = {checkpoint_name(i, w) for i in range(layers) for w in WEIGHTS}
    stray = sorted(set(weight_map) - expected) + sorted(expected - set(weight_map))
    if stray:
        raise ConvertError(
            f"expected the {len(expected)} weights of {layers} llama layers, got "
            f"{len(weight_map)} tensors; first mismatch: {stray[0]!r}"
        )
    outputs = []
    for i in range(layers):
        for fused, weights in FUSED:
            members = tuple(checkpoint_name(i, w) for w in weights)
            outputs.append(
                Output(f"model.layers.{i}.{fused}.weight", members, weight_map[members[0]])
            )
    return outputs


def _layer_count(weight_map: Mapping[str, str]) -> int:
    """One more than the highest layer number among `model.layers.N.` names."""
    found = (re.match(r"model\.layers\.(\d+)\.", name) for name in weight_map)
    numbers = [int(match.group(1)) for match in found if match]
    if not numbers:
        raise ConvertError(f"expected model.layers.N.* tensors, got {sorted(weight_map)[:3]}")
    return max(numbers) + 1


# -- the eager transform -----------------------------------------------------------------------


def linear(parts: Sequence[Array]) -> Array:
    """Fuse the parts along axis 0 (if several), transpose, cast to float16, lay out in C order."""
    joined = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    return np.ascontiguousarray(joined.T.astype(np.float16))


def run_eager(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert `src_dir` into `dst_dir` the eager way; returns `dst_dir`.

    Every shard is loaded first, every output computed and kept, then each output shard is
    written with `save_file`, sharded like the input (same file and index names).
    """
    src, dst = Path(src_dir), Path(dst_dir)
    weight_map, index_name = read_weight_map(src)
    outputs = plan_outputs(weight_map)
    tensors: dict[str, Array] = {}
    for file in sorted(set(weight_map.values())):
        tensors |= load_file(str(src / file))
    results = {out.name: linear([tensors[m] for m in out.members]) for out in outputs}
    dst.mkdir(parents=True, exist_ok=True)
    for file in dict.fromkeys(out.file for out in outputs):
        shard = {out.name: results[out.name] for out in outputs if out.file == file}
        save_file(shard, str(dst / file))
    if index_name is not None:
        new_map = {out.name: out.file for out in outputs}
        write_index(dst / index_name, new_map, sum(a.nbytes for a in results.values()))
    return dst


# -- checking ------------------------------------------------------------------------------------


def load_checkpoint(folder: str | Path) -> dict[str, Array]:
    """Every tensor of a safetensors checkpoint folder, by name (for checks, not for speed)."""
    weight_map, _ = read_weight_map(folder)
    tensors: dict[str, Array] = {}
    for file in sorted(set(weight_map.values())):
        tensors |= load_file(str(Path(folder) / file))
    return tensors


def differences(a_dir: str | Path, b_dir: str | Path) -> list[str]:
    """What differs between two checkpoints: names, dtypes, shapes or bytes ([] if none)."""
    a, b = load_checkpoint(a_dir), load_checkpoint(b_dir)
    found = [f"{name}: only in {a_dir}" for name in a.keys() - b.keys()]
    found += [f"{name}: only in {b_dir}" for name in b.keys() - a.keys()]
    for name in sorted(a.keys() & b.keys()):
        x, y = a[name], b[name]
        if (x.dtype, x.shape) != (y.dtype, y.shape):
            found.append(f"{name}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        elif x.tobytes() != y.tobytes():
            found.append(f"{name}: same dtype and shape, different bytes")
    return sorted(found)


def main(argv: Sequence[str] | None = None) -> int:
    """`make DIR`, `run SRC DST` (prints seconds) or `compare A B` (exit 1 on a difference)."""
    args = _parser().parse_args(argv)
    if args.command == "make":
        make_checkpoint(args.dir, args.layers, args.d, args.f, args.shards, args.seed)
    elif args.command == "run":
        start = time.perf_counter()
        run_eager(args.src, args.dst)
        print(f"eager: {time.perf_counter() - start:.3f} s")
    else:
        found = differences(args.a, args.b)
        print("\n".join(found) if found else "identical")
        return 1 if found else 0
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.baseline_eager")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write the llama-like checkpoint")
    make.add_argument("dir")
    for flag, default in (("--layers", 8), ("--d", 512), ("--f", 1376), ("--shards", 4)):
        make.add_argument(flag, type=int, default=default)
    make.add_argument("--seed", type=int, default=0)
    run = commands.add_parser("run", help="convert SRC into DST eagerly")
    run.add_argument("src")
    run.add_argument("dst")
    compare = commands.add_parser("compare", help="compare two checkpoints tensor by tensor")
    compare.add_argument("a")
    compare.add_argument("b")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
