"""Shared helpers of the engine and CLI tests: small checkpoints, readers, a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

import lazyparams.engine
from lazyparams.engine.demo import LlamaShape, make_llama_checkpoint
from lazyparams.io import DictSource, open_source

ROOT = Path(lazyparams.engine.__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SMALL = LlamaShape(layers=2, hidden=64, intermediate=128, vocab=96)
SMALL_SHARD = 48 * 1024


def small_llama(folder: Path, shape: LlamaShape = SMALL) -> Path:
    """A small sharded llama-like checkpoint at `folder`."""
    return make_llama_checkpoint(folder, shape, shard_size=SMALL_SHARD)


def read_all(path: Path | str) -> dict[str, np.ndarray]:
    """Every tensor of a checkpoint, copied into memory."""
    with open_source(path) as source:
        return {name: np.array(source.load(name)) for name in source.names()}


def tree_bytes(path: Path) -> dict[str, bytes]:
    """The bytes of every file under `path` (or of `path` itself), by relative name."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def bert_tensors(layers: int = 1, hidden: int = 32, intermediate: int = 64) -> dict[str, Any]:
    """Random float32 tensors under Hugging Face BERT names, biases included."""
    rng = np.random.default_rng(1)
    shapes: dict[str, tuple[int, ...]] = {
        "bert.embeddings.word_embeddings.weight": (50, hidden),
        "bert.embeddings.LayerNorm.weight": (hidden,),
    }
    for i in range(layers):
        p = f"bert.encoder.layer.{i}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"] = (hidden, hidden)
            shapes[f"{p}attention.self.{name}.bias"] = (hidden,)
        shapes[f"{p}attention.output.dense.weight"] = (hidden, hidden)
        shapes[f"{p}attention.output.LayerNorm.weight"] = (hidden,)
        shapes[f"{p}intermediate.dense.weight"] = (intermediate, hidden)
        shapes[f"{p}intermediate.dense.bias"] = (intermediate,)
        shapes[f"{p}output.dense.weight"] = (hidden, intermediate)
    shapes["bert.pooler.dense.weight"] = (hidden, hidden)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


class CountingSource(DictSource):
    """A dict source that counts `load` calls, to prove nothing was read."""

    def __init__(self, tensors: dict[str, Any]) -> None:
        super().__init__(tensors, path="<counting>")
        self.loads: list[str] = []

    def load(self, name: str) -> Any:
        self.loads.append(name)
        return super().load(name)


def cli_env() -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout first on the path."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python -m lazyparams ARGS` to completion."""
    command = [sys.executable, "-m", "lazyparams", *map(str, args)]
    return subprocess.run(
        command, cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=120, check=False
    )


SLOW_SPEC = """
import time
from lazyparams.frontend import ops


def _slow_copy(x):
    time.sleep({delay})
    return x.copy()


def transform(params):
    out = {{}}
    for name, value in params.items():
        slow = ops.numpy_kernel(_slow_copy, value.shape, value.dtype, name="slow_copy")
        out[name] = slow(value).astype("float16")
    return out
"""


def slow_spec(folder: Path, delay: float) -> Path:
    """A spec file casting every tensor to float16 through a kernel that sleeps `delay` s."""
    path = folder / "slow_spec.py"
    path.write_text(SLOW_SPEC.format(delay=delay))
    return path


_GROUPS = (
    ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj")),
)
_MEMBERS = tuple(f"{m}.weight" for _, members in _GROUPS for m in members)


def eager_fuse_cast(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`fuse-qkv+cast:float16` done eagerly in numpy, for llama names."""
    out: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        for fused, members in _GROUPS:
            if name.endswith(f"{members[0]}.weight"):
                prefix = name[: -len(f"{members[0]}.weight")]
                joined = np.concatenate([tensors[f"{prefix}{m}.weight"] for m in members])
                out[f"{prefix}{fused}.weight"] = joined.T
        if name.endswith(("o_proj.weight", "down_proj.weight", "lm_head.weight")):
            out[name] = value.T
        elif not name.endswith(_MEMBERS):
            out[name] = value
    return {name: value.astype(np.float16) for name, value in out.items()}
