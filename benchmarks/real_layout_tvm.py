"""TVM's own lazy pipeline on the real checkpoint layout of `real_layout` (optional).

The eager Relax function takes every input in one tuple, binds every `params[i]` at the top (as
a lifted transform has them), then per output concatenates, transposes and casts as the recipe
does; `baseline_tvm.make_lazy` makes it lazy and `relax.build` compiles it for llvm, as the
llama-like TVM baseline does. Needs `apache-tvm` (the `bench` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.baseline_eager import read_weight_map, write_index
from benchmarks.baseline_tvm import _execute, _Io, _open_sinks, _require_tvm, make_lazy
from benchmarks.real_layout import Step, steps
from benchmarks.workloads import FUNC_NAME
from lazyparams.io import CheckpointSource, TensorInfo, open_source

try:
    from tvm import relax
except ImportError:  # the bench extra is optional
    relax = None


def build_eager_module(inputs: Sequence[TensorInfo], plan: Sequence[Step]) -> Any:
    """The eager transform of `plan` over the `inputs` tuple, as a TVM IRModule."""
    _require_tvm()
    index = {info.name: i for i, info in enumerate(inputs)}
    fields = [relax.TensorType(list(info.shape), info.dtype) for info in inputs]
    params = relax.Var("params", relax.TupleType(fields))
    bb = relax.BlockBuilder()
    with bb.function(FUNC_NAME, [params]):
        with bb.dataflow():
            loaded = [bb.emit(relax.TupleGetItem(params, i)) for i in range(len(inputs))]
            results = [_output(bb, step, [loaded[index[m]] for m in step.members]) for step in plan]
            result = bb.emit_output(relax.Tuple(results))
        bb.emit_func_output(result)
    return bb.get()


def _output(bb: Any, step: Step, parts: list[Any]) -> Any:
    joined = bb.emit(relax.op.concat(parts, axis=0)) if len(parts) > 1 else parts[0]
    if step.transpose:
        joined = bb.emit(relax.op.permute_dims(joined, [1, 0]))
    return bb.emit(relax.op.astype(joined, "float16"))


def output_infos(source: CheckpointSource, plan: Sequence[Step]) -> dict[str, TensorInfo]:
    """Name, float16 shape of every output, from the input headers."""
    infos = {}
    for step in plan:
        shapes = [source.info(m).shape for m in step.members]
        rows = sum(s[0] for s in shapes)
        shape = (shapes[0][1], rows) if step.transpose else (rows, *shapes[0][1:])
        infos[step.name] = TensorInfo.of(step.name, shape, "float16")
    return infos


def run_tvm(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert `src_dir` into `dst_dir` with TVM's lazy pipeline, sharded like the input."""
    _require_tvm()
    src, dst = Path(src_dir), Path(dst_dir)
    weight_map, index_name = read_weight_map(src)
    plan = steps(weight_map)
    dst.mkdir(parents=True, exist_ok=True)
    with open_source(src) as source:
        names = [m for step in plan for m in step.members]
        inputs = [source.info(name) for name in names]
        executable = relax.build(make_lazy(build_eager_module(inputs, plan)), target="llvm")
        infos = output_infos(source, plan)
        sinks = _open_sinks(dst, list(plan), infos)  # type: ignore[arg-type]
        _execute(executable, _Io(source, names, list(plan), sinks))  # type: ignore[arg-type]
    if index_name is not None:
        total = sum(info.nbytes for info in infos.values())
        write_index(dst / index_name, {s.name: s.file for s in plan}, total)
    return dst
