"""Mixtures of experts to GGUF under a hard memory limit: `lazyparams convert gguf:TYPE`
against llama.cpp's converter, side by side in one run.

The checkpoint (`--shape`) is random-init, of real layer shapes with few layers: a Mixtral-8x7B
(8 experts of 14336 x 4096, bfloat16; 4 layers: 12 GB), a DeepSeek-V3 as DeepSeek ships it (FP8
weights with block scales, 256 routed experts of 2048 x 7168 and a shared one, a dense lead
layer; 2 layers: 12 GB) or, for comparison, a dense llama-7b; sharded as transformers shards,
with a trained tokenizer. Each run is the whole command a user types, in a fresh process, in a
cgroup v1 memory group of its own (see `bench_merge.measure`): lazyparams under `--limit` with
no `--budget` (it takes its default from the cgroup limit), the converter without a limit (its
file is the reference the others are compared with, byte for byte) and, with
`--converter-limited`, under the same limit. The BPE tokenizer of the DeepSeek checkpoint is
trained on the spot, so the converter runs through a wrapper naming its pre-tokenizer, as
lazyparams' `--gguf-pre` does.

    python benchmarks/bench_moe.py --root SCRATCH --shape mixtral-8x7b-4l --types q8_0,f16 \\
        --limit 1GiB --converter LLAMA_CPP/convert_hf_to_gguf.py \\
        --converter-python PYTHON_WITH_TORCH [--converter-limited]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_merge import (
    ITEM_BYTES,
    MIB,
    LlamaShape,
    Run,
    measure,
    own_memory_cgroup,
    random_bf16,
    remove_all,
    safetensors_header,
    usable_parent,
)
from bench_merge import SHAPES as LLAMA_SHAPES

from lazyparams.engine.sizes import parse_size

SHARD_BYTES = 5 << 30
"""transformers' default shard size."""


Tensor = tuple[str, tuple[int, ...], str]
"""A tensor of a checkpoint: name, shape, safetensors dtype."""


@dataclass(frozen=True)
class MoeShape:
    """A Mixtral-shaped model (bfloat16, a sentencepiece tokenizer)."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    experts: int
    pre: str | None = None

    def tensors(self, vocab: int) -> list[Tensor]:
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
        found += [("model.norm.weight", (h,)), ("lm_head.weight", (vocab, h))]
        return [(name, dims, "BF16") for name, dims in found]

    def tokenizer(self, folder: Path) -> int:
        """Write the tokenizer files; returns the vocabulary size."""
        from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer

        return write_sentencepiece_tokenizer(folder, 1000)

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


@dataclass(frozen=True)
class DeepseekShape:
    """A DeepSeek-V3-shaped model shipped as DeepSeek ships it: FP8 (e4m3) weights with
    128 x 128 block scales (`weight_scale_inv`), bfloat16 norms, router and embeddings, a
    float32 score-correction bias; dense leading layers, then layers of routed and shared
    experts; a byte-level BPE tokenizer."""

    name: str
    hidden: int
    intermediate: int
    expert_rows: int
    experts: int
    heads: int
    q_rank: int
    kv_rank: int
    nope: int
    rope: int
    value: int
    layers: int
    dense_layers: int
    pre: str | None = "llama-bpe"

    def tensors(self, vocab: int) -> list[Tensor]:
        """Every tensor, layer by layer."""
        h, heads = self.hidden, self.heads
        found: list[Tensor] = [("model.embed_tokens.weight", (vocab, h), "BF16")]
        for layer in range(self.layers):
            at = f"model.layers.{layer}"
            found += [(f"{at}.{n}.weight", (h,), "BF16") for n in ("input_layernorm",)]
            found += [(f"{at}.post_attention_layernorm.weight", (h,), "BF16")]
            found += [(f"{at}.self_attn.q_a_layernorm.weight", (self.q_rank,), "BF16")]
            found += [(f"{at}.self_attn.kv_a_layernorm.weight", (self.kv_rank,), "BF16")]
            found += _fp8(f"{at}.self_attn.q_a_proj", (self.q_rank, h))
            found += _fp8(
                f"{at}.self_attn.q_b_proj", (heads * (self.nope + self.rope), self.q_rank)
            )
            found += _fp8(f"{at}.self_attn.kv_a_proj_with_mqa", (self.kv_rank + self.rope, h))
            found += _fp8(
                f"{at}.self_attn.kv_b_proj", (heads * (self.nope + self.value), self.kv_rank)
            )
            found += _fp8(f"{at}.self_attn.o_proj", (h, heads * self.value))
            if layer < self.dense_layers:
                found += _mlp(f"{at}.mlp", h, self.intermediate)
                continue
            found += [(f"{at}.mlp.gate.weight", (self.experts, h), "BF16")]
            found += [(f"{at}.mlp.gate.e_score_correction_bias", (self.experts,), "F32")]
            for expert in range(self.experts):
                found += _mlp(f"{at}.mlp.experts.{expert}", h, self.expert_rows)
            found += _mlp(f"{at}.mlp.shared_experts", h, self.expert_rows)
        found += [("model.norm.weight", (h,), "BF16"), ("lm_head.weight", (vocab, h), "BF16")]
        return found

    def tokenizer(self, folder: Path) -> int:
        """Write the tokenizer files; returns the vocabulary size."""
        from tests.targets.llamacpp.tokenizer_fixtures import write_bpe_tokenizer

        return write_bpe_tokenizer(folder, 1000, "llama3")

    def config(self, vocab: int) -> dict[str, object]:
        block = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}
        rope = {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096}
        rope |= {"beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
        return {
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": "deepseek_v3",
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "moe_intermediate_size": self.expert_rows,
            "num_hidden_layers": self.layers,
            "first_k_dense_replace": self.dense_layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.heads,
            "n_routed_experts": self.experts,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "n_group": 8,
            "topk_group": 4,
            "norm_topk_prob": True,
            "routed_scaling_factor": 2.5,
            "scoring_func": "sigmoid",
            "topk_method": "noaux_tc",
            "moe_layer_freq": 1,
            "q_lora_rank": self.q_rank,
            "kv_lora_rank": self.kv_rank,
            "qk_nope_head_dim": self.nope,
            "qk_rope_head_dim": self.rope,
            "v_head_dim": self.value,
            "vocab_size": vocab,
            "max_position_embeddings": 163840,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000.0,
            "rope_scaling": rope,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "torch_dtype": "bfloat16",
            "quantization_config": {**block, "weight_block_size": [128, 128]},
        }


def _fp8(prefix: str, dims: tuple[int, int]) -> list[Tensor]:
    """An FP8 linear weight and its 128 x 128 block scales."""
    blocks = (-(-dims[0] // 128), -(-dims[1] // 128))
    weight = (f"{prefix}.weight", dims, "F8_E4M3")
    return [weight, (f"{prefix}.weight_scale_inv", blocks, "F32")]


def _mlp(prefix: str, hidden: int, rows: int) -> list[Tensor]:
    """A gated feed-forward block of FP8 weights."""
    found = _fp8(f"{prefix}.gate_proj", (rows, hidden)) + _fp8(f"{prefix}.up_proj", (rows, hidden))
    return found + _fp8(f"{prefix}.down_proj", (hidden, rows))


@dataclass(frozen=True)
class DenseShape:
    """A dense llama (bench_merge's shapes) with a sentencepiece tokenizer: the baseline a
    mixture of experts is compared with."""

    name: str
    llama: LlamaShape
    pre: str | None = None

    def tensors(self, vocab: int) -> list[Tensor]:
        return [(n, d, "BF16") for n, d in replace(self.llama, vocab=vocab).tensors()]

    def tokenizer(self, folder: Path) -> int:
        from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer

        return write_sentencepiece_tokenizer(folder, 1000)

    def config(self, vocab: int) -> dict[str, object]:
        return replace(self.llama, vocab=vocab).config()


Shape = MoeShape | DeepseekShape | DenseShape

SHAPES: dict[str, Shape] = {
    "mixtral-8x7b-4l": MoeShape("mixtral-8x7b-4l", 4096, 14336, 4, 32, 8, 8),
    "mixtral-8x7b-2l": MoeShape("mixtral-8x7b-2l", 4096, 14336, 2, 32, 8, 8),
    "mixtral-tiny": MoeShape("mixtral-tiny", 256, 512, 2, 4, 2, 8),
    "deepseek-v3-2l": DeepseekShape(
        "deepseek-v3-2l", 7168, 18432, 2048, 256, 128, 1536, 512, 128, 64, 128, 2, 1
    ),
    "deepseek-v3-2l-64e": DeepseekShape(
        "deepseek-v3-2l-64e", 7168, 18432, 2048, 64, 128, 1536, 512, 128, 64, 128, 2, 1
    ),
    "deepseek-v3-3l": DeepseekShape(
        "deepseek-v3-3l", 7168, 18432, 2048, 256, 128, 1536, 512, 128, 64, 128, 3, 1
    ),
    "llama-7b": DenseShape("llama-7b", LLAMA_SHAPES["7b"]),
    "llama-tiny": DenseShape("llama-tiny", LLAMA_SHAPES["tiny"]),
    "deepseek-tiny": DeepseekShape(
        "deepseek-tiny", 256, 512, 128, 16, 4, 128, 64, 32, 16, 32, 2, 1
    ),
}


def random_data(rng: np.random.Generator, dtype: str, count: int, norm: bool) -> np.ndarray:
    """`count` random values of a safetensors dtype, as the bytes a checkpoint holds: bfloat16
    weights about 0.02 and norms about 1, e4m3 bytes of every sign and mantissa but no NaN (the
    lowest exponent bit cleared), float32 scales and biases in [2**-12, 2**-9)."""
    if dtype == "BF16":
        return random_bf16(rng, count, norm)
    if dtype == "F8_E4M3":
        return rng.integers(0, 256, count, dtype=np.uint8) & np.uint8(0xF7)
    return rng.uniform(2.0**-12, 2.0**-9, count).astype(np.float32)


def _sharded(tensors: list[Tensor]) -> list[list[Tensor]]:
    """The tensors in shards of at most SHARD_BYTES, in order."""
    shards: list[list[Tensor]] = [[]]
    size = 0
    for tensor in tensors:
        nbytes = ITEM_BYTES[tensor[2]] * int(np.prod(tensor[1]))
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(tensor)
        size += nbytes
    return shards


def write_checkpoint(folder: Path, shape: Shape) -> Path:
    """A random-init folder of `shape` (reused where a previous run left it whole)."""
    stamp = folder / "bench_moe.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == {"shape": shape.name, "format": 3}:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    vocab = shape.tokenizer(folder)
    rng = np.random.default_rng(0)
    shards = _sharded(shape.tensors(vocab))
    files = [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    weight_map, total = {}, 0
    for file_name, entries in zip(files, shards, strict=True):
        entries.sort()  # laid out by name, the order the converter reads a shard in
        dtypes = {name: dtype for name, _, dtype in entries}
        with open(folder / file_name, "wb") as out:
            out.write(safetensors_header([(n, d) for n, d, _ in entries], dtypes))
            for name, dims, dtype in entries:
                weight_map[name] = file_name
                count = int(np.prod(dims))
                total += ITEM_BYTES[dtype] * count
                for start in range(0, count, 8 * MIB):
                    part = min(8 * MIB, count - start)
                    random_data(rng, dtype, part, len(dims) == 1).tofile(out)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (folder / "config.json").write_text(json.dumps(shape.config(vocab), indent=2) + "\n")
    stamp.write_text(json.dumps({"shape": shape.name, "format": 3}))
    return folder


def lazyparams_run(
    model: Path,
    out: Path,
    type_name: str,
    shape: Shape,
    args: argparse.Namespace,
    limit: int | None,
) -> Run:
    command = [sys.executable, "-m", "lazyparams", "convert", f"gguf:{type_name}", str(model)]
    command += [str(out), "--no-progress"]
    command += ["--gguf-pre", shape.pre] if shape.pre else []
    return measure("lazyparams", command, out, args.parent, limit=limit)


NAMED_PRE = """\"\"\"Run llama.cpp's converter (argv[1]) with the BPE pre-tokenizer named by PRE:
the benchmark's tokenizer is trained on the spot, so the converter cannot know its hash.\"\"\"
import os, runpy, sys
converter = os.path.abspath(sys.argv[1])
root = os.path.dirname(converter)
sys.path[:0] = [root, os.path.join(root, "gguf-py")]
import conversion.base
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: os.environ["PRE"]
sys.argv = sys.argv[1:]
runpy.run_path(converter, run_name="__main__")
"""


def converter_run(
    args: argparse.Namespace,
    model: Path,
    out: Path,
    type_name: str,
    shape: Shape,
    limit: int | None,
) -> Run:
    gguf_py = Path(args.converter).parent / "gguf-py"
    env = {**os.environ, "PYTHONPATH": str(gguf_py), "HF_HUB_OFFLINE": "1"}
    command = [args.converter_python, args.converter, str(model), "--outfile", str(out)]
    command += ["--outtype", type_name]
    if shape.pre:  # through a wrapper naming the pre-tokenizer, as `--gguf-pre` does ours
        wrapper = args.root / "converter_named_pre.py"
        wrapper.write_text(NAMED_PRE)
        command[1:1] = [str(wrapper)]
        env["PRE"] = shape.pre
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


def bench(args: argparse.Namespace, model: Path, shape: Shape) -> list[str]:
    lines = []
    for type_name in args.types.split(","):
        theirs = args.root / f"{shape.name}.{type_name}.converter.gguf"
        runs: list[tuple[Run, Path, int | None]] = []
        if args.converter:
            run = converter_run(args, model, theirs, type_name, shape, None)
            runs.append((run, theirs, None))
        ours = args.root / f"{shape.name}.{type_name}.lazyparams.gguf"
        run = lazyparams_run(model, ours, type_name, shape, args, args.limit)
        runs.append((run, ours, args.limit))
        if args.converter and args.converter_limited:
            limited = args.root / f"{shape.name}.{type_name}.converter-limited.gguf"
            run = converter_run(args, model, limited, type_name, shape, args.limit)
            runs.append((run, limited, args.limit))
        reference = runs[0][0].ok if args.converter else False
        for run, out, limit in runs:
            same = same_bytes(out, theirs) if out != theirs and run.ok and reference else "-"
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
