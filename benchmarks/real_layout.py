"""A real checkpoint layout for the benchmark suite: llama with embeddings, norms and lm_head.

The checkpoint is the engine's demo model (Hugging Face llama names, sharded safetensors with an
index). `steps` reads its header into the outputs of lazyparams' `fuse-qkv+cast:float16` recipe:
q/k/v and gate/up fused, every linear weight (`*_proj`, `lm_head`) transposed, every tensor cast
to float16. `run_eager` is that transform as a user writes it without lazyparams: load every
shard with `safetensors`, transform in numpy, save shard by shard. Imports numpy, safetensors,
the eager baseline's helpers and the engine's demo generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import load_file, save_file

from benchmarks.baseline_eager import read_weight_map, write_index
from lazyparams.engine.demo import LlamaShape, make_llama_checkpoint

Array = NDArray[Any]
SHAPE = LlamaShape(layers=16, hidden=512, intermediate=1376, vocab=32000)
"""The default real layout: 16 layers of the llama-like workload plus a 32000-word vocabulary
(embedding and lm_head of 62.5 MiB each in float32)."""
SHARD_SIZE = 64 << 20
FUSED = (
    ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj")),
)
TRANSPOSED = ("_proj.weight", "lm_head.weight")


@dataclass(frozen=True, slots=True)
class Step:
    """One output: its name, the inputs joined along axis 0, whether it is transposed, and the
    shard file it goes to (that of its first input)."""

    name: str
    members: tuple[str, ...]
    transpose: bool
    file: str


def make_checkpoint(folder: str | Path, shape: LlamaShape = SHAPE) -> Path:
    """Write the real-layout float32 checkpoint into `folder` (shards and an index)."""
    return make_llama_checkpoint(folder, shape, shard_size=SHARD_SIZE)


def steps(weight_map: Mapping[str, str]) -> list[Step]:
    """The recipe's outputs for a checkpoint's tensor names, in checkpoint order."""
    fused_at = _fused_groups(weight_map)
    consumed = {m for _, members in fused_at.values() for m in members}
    out = []
    for name in weight_map:
        if name in fused_at:
            fused, members = fused_at[name]
            out.append(Step(fused, members, True, weight_map[name]))
        elif name not in consumed:
            out.append(Step(name, (name,), name.endswith(TRANSPOSED), weight_map[name]))
    return out


def _fused_groups(weight_map: Mapping[str, str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """First member -> (fused name, members), for each complete q/k/v or gate/up group."""
    found = {}
    for fused, members in FUSED:
        suffix = f"{members[0]}.weight"
        for name in weight_map:
            if name.endswith(suffix):
                prefix = name[: -len(suffix)]
                names = tuple(f"{prefix}{m}.weight" for m in members)
                if all(n in weight_map for n in names):
                    found[name] = (f"{prefix}{fused}.weight", names)
    return found


def apply(step: Step, tensors: Mapping[str, Array]) -> Array:
    """One output computed eagerly: concatenate, transpose, cast to float16, C order."""
    parts = [tensors[m] for m in step.members]
    joined = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    if step.transpose:
        joined = joined.T
    return np.ascontiguousarray(joined.astype(np.float16))


def run_eager(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert `src_dir` into `dst_dir` eagerly (everything in memory); returns `dst_dir`.

    The outputs are sharded like the input: each in its first input's shard file.
    """
    src, dst = Path(src_dir), Path(dst_dir)
    weight_map, index_name = read_weight_map(src)
    plan = steps(weight_map)
    tensors: dict[str, Array] = {}
    for file in sorted(set(weight_map.values())):
        tensors |= load_file(str(src / file))
    results = {step.name: apply(step, tensors) for step in plan}
    dst.mkdir(parents=True, exist_ok=True)
    for file in dict.fromkeys(step.file for step in plan):
        save_file({s.name: results[s.name] for s in plan if s.file == file}, str(dst / file))
    if index_name is not None:
        total = sum(a.nbytes for a in results.values())
        write_index(dst / index_name, {s.name: s.file for s in plan}, total)
    return dst
