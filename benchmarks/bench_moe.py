"""A mixture of experts to GGUF under a hard memory limit: `lazyparams convert gguf:TYPE`
against llama.cpp's converter, side by side in one run.

The checkpoint is a random-init Mixtral of the real layer shapes (hidden 4096, 8 experts of
14336 x 4096, bfloat16) with few layers (4 by default: 12 GB), a trained sentencepiece
tokenizer, sharded as transformers shards. Each run is the whole command a user types, in a
fresh process, in a cgroup v1 memory group of its own (see `bench_merge.measure`): lazyparams
under `--limit` with no `--budget` (it takes its default from the cgroup limit), the converter
without a limit (its file is the reference the others are compared with, byte for byte) and,
with `--converter-limited`, under the same limit.

    python benchmarks/bench_moe.py --root SCRATCH --types q8_0,f16 --limit 1GiB \\
        --converter LLAMA_CPP/convert_hf_to_gguf.py --converter-python PYTHON_WITH_TORCH
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_merge import (
    MIB,
    Run,
    measure,
    own_memory_cgroup,
    random_bf16,
    remove_all,
    safetensors_header,
    usable_parent,
)

from lazyparams.engine.sizes import parse_size

SHARD_BYTES = 5 << 30
"""transformers' default shard size."""


@dataclass(frozen=True)
class MoeShape:
    """A Mixtral-shaped model."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    experts: int

    def tensors(self, vocab: int) -> list[tuple[str, tuple[int, ...]]]:
        """Every tensor, in the order transformers saves a Mixtral."""
        h, f, kv = self.hidden, self.intermediate, self.hidden // self.heads * self.kv_heads
        found: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (vocab, h))]
        for layer in range(self.layers):
            at = f"model.layers.{layer}"
            found += [
                (f"{at}.input_layernorm.weight", (h,)),
                (f"{at}.post_attention_layernorm.weight", (h,)),
                (f"{at}.self_attn.q_proj.weight", (h, h)),
                (f"{at}.self_attn.k_proj.weight", (kv, h)),
                (f"{at}.self_attn.v_proj.weight", (kv, h)),
                (f"{at}.self_attn.o_proj.weight", (h, h)),
                (f"{at}.block_sparse_moe.gate.weight", (self.experts, h)),
            ]
            for expert in range(self.experts):
                moe = f"{at}.block_sparse_moe.experts.{expert}"
                found += [(f"{moe}.w1.weight", (f, h)), (f"{moe}.w2.weight", (h, f))]
                found += [(f"{moe}.w3.weight", (f, h))]
        return [*found, ("model.norm.weight", (h,)), ("lm_head.weight", (vocab, h))]

    def config(self, vocab: int) -> dict[str, object]:
        return {
            "architectures": ["MixtralForCausalLM"],
            "model_type": "mixtral",
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "num_local_experts": self.experts,
            "num_experts_per_tok": 2,
            "vocab_size": vocab,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-05,
            "rope_theta": 1000000.0,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "torch_dtype": "bfloat16",
        }


SHAPES = {
    "mixtral-8x7b-4l": MoeShape("mixtral-8x7b-4l", 4096, 14336, 4, 32, 8, 8),
    "mixtral-8x7b-2l": MoeShape("mixtral-8x7b-2l", 4096, 14336, 2, 32, 8, 8),
    "tiny": MoeShape("mixtral-tiny", 256, 512, 2, 4, 2, 8),
}


def write_checkpoint(folder: Path, shape: MoeShape) -> Path:
    """A random-init Mixtral folder of `shape` (reused where a previous run left it whole)."""
    stamp = folder / "bench_moe.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == {"shape": shape.name, "format": 2}:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer

    vocab = write_sentencepiece_tokenizer(folder, 1000)
    rng = np.random.default_rng(0)
    shards, size = [[]], 0  # type: ignore[var-annotated]
    for name, dims in shape.tensors(vocab):
        nbytes = 2 * int(np.prod(dims))
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((name, dims))
        size += nbytes
    files = [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    weight_map, total = {}, 0
    for file_name, entries in zip(files, shards, strict=True):
        entries.sort()  # safetensors lays one dtype's tensors out by name
        with open(folder / file_name, "wb") as out:
            out.write(safetensors_header(entries))
            for name, dims in entries:
                weight_map[name] = file_name
                count = int(np.prod(dims))
                total += 2 * count
                for start in range(0, count, 8 * MIB):
                    random_bf16(rng, min(8 * MIB, count - start), len(dims) == 1).tofile(out)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (folder / "config.json").write_text(json.dumps(shape.config(vocab), indent=2) + "\n")
    stamp.write_text(json.dumps({"shape": shape.name, "format": 2}))
    return folder


def lazyparams_run(
    model: Path, out: Path, type_name: str, parent: Path | None, limit: int | None
) -> Run:
    command = [sys.executable, "-m", "lazyparams", "convert", f"gguf:{type_name}", str(model)]
    return measure("lazyparams", [*command, str(out), "--no-progress"], out, parent, limit=limit)


def converter_run(
    args: argparse.Namespace, model: Path, out: Path, type_name: str, limit: int | None
) -> Run:
    gguf_py = Path(args.converter).parent / "gguf-py"
    env = {**os.environ, "PYTHONPATH": str(gguf_py), "HF_HUB_OFFLINE": "1"}
    command = [args.converter_python, args.converter, str(model), "--outfile", str(out)]
    command += ["--outtype", type_name]
    return measure("convert_hf_to_gguf.py", command, out, args.parent, limit=limit, env=env)


def same_bytes(a: Path, b: Path) -> str:
    """ "yes" when both files exist and hold the same bytes, else why not."""
    if not (a.is_file() and b.is_file()):
        return "-"
    with open(a, "rb") as left, open(b, "rb") as right:
        while True:
            x, y = left.read(64 * MIB), right.read(64 * MIB)
            if x != y:
                return "no"
            if not x:
                return "yes"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MIB:.0f}"


def row(shape: str, type_name: str, run: Run, limit: int | None, same: str) -> str:
    wall = "-" if run.wall_s is None or not run.ok else f"{run.wall_s:.1f}"
    cap = "none" if limit is None else f"{limit / MIB:.0f} MiB"
    status = "ok" if run.ok else run.note
    cells = [shape, type_name, run.tool, cap, wall, _mib(run.cgroup_peak), _mib(run.rss_peak)]
    return "| " + " | ".join([*cells, status, same]) + " |"


def bench(args: argparse.Namespace, model: Path, shape: MoeShape) -> list[str]:
    lines = []
    for type_name in args.types.split(","):
        theirs = args.root / f"{shape.name}.{type_name}.converter.gguf"
        runs: list[tuple[Run, Path, int | None]] = []
        if args.converter:
            runs.append((converter_run(args, model, theirs, type_name, None), theirs, None))
        ours = args.root / f"{shape.name}.{type_name}.lazyparams.gguf"
        runs.append(
            (lazyparams_run(model, ours, type_name, args.parent, args.limit), ours, args.limit)
        )
        if args.converter and args.converter_limited:
            limited = args.root / f"{shape.name}.{type_name}.converter-limited.gguf"
            run = converter_run(args, model, limited, type_name, args.limit)
            runs.append((run, limited, args.limit))
        for run, out, limit in runs:
            same = same_bytes(out, theirs) if out != theirs and run.ok else "-"
            lines.append(row(shape.name, type_name, run, limit, same))
            print(lines[-1], flush=True)
        for _, out, _ in runs:
            out.unlink(missing_ok=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="scratch folder (~15 GB free)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="mixtral-8x7b-4l")
    parser.add_argument("--types", default="q8_0,f16")
    parser.add_argument("--limit", default="1GiB", help="the memory limit of the runs")
    parser.add_argument("--converter", help="llama.cpp's convert_hf_to_gguf.py")
    parser.add_argument("--converter-python", default=sys.executable)
    parser.add_argument("--converter-limited", action="store_true")
    parser.add_argument("--cgroup-parent", type=Path, help="a cgroup v1 memory group to work in")
    args = parser.parse_args(argv)
    args.limit = parse_size(args.limit)
    parent = args.cgroup_parent or own_memory_cgroup()
    why = usable_parent(parent)
    if why is not None:
        print(f"bench_moe: {why}; a memory limit needs a cgroup v1 memory group", file=sys.stderr)
        return 2
    args.parent = parent
    args.root.mkdir(parents=True, exist_ok=True)
    shape = SHAPES[args.shape]
    started = time.perf_counter()
    model = write_checkpoint(args.root / shape.name, shape)
    print(f"checkpoint ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    header = "| model | type | tool | limit | wall s | cgroup peak MiB | RSS peak MiB | result |"
    print(header + " same bytes as the converter |")
    print("|---" * 9 + "|")
    try:
        bench(args, model, shape)
    finally:
        remove_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
