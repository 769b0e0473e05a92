"""TVM's own lazy pipeline on the llama-like transform, for the benchmark suite (optional).

The eager Relax function (one tuple parameter, every `params[i]` bound at the top) is made lazy
with `ToNonDataflow`, `RemovePurityChecking` and `LazyTransformParams`, built for llvm and run on
a VM whose `get_item` loads one tensor from the source and whose `set_item` streams one output
to a sink. Needs `apache-tvm` (the `bench` extra); imports the eager baseline for the layout.
Run `python -m benchmarks.baseline_tvm --help`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.baseline_eager import (
    Output,
    differences,
    plan_outputs,
    read_weight_map,
    run_eager,
    write_index,
)
from benchmarks.workloads import FUNC_NAME
from lazyparams.errors import ConvertError
from lazyparams.io import CheckpointSource, SafetensorsSink, TensorInfo, open_source

try:
    import tvm

    # LazyTransformParams calls relax.op.vm.kill_object, which 0.27 does not import by itself
    import tvm.relax.op.vm
    import tvm_ffi
    from tvm import relax
except ImportError:  # the bench extra is optional
    tvm = None


def available() -> bool:
    """Whether TVM can be imported here."""
    return tvm is not None


def _require_tvm() -> None:
    if tvm is None:
        raise ConvertError("the TVM baseline needs apache-tvm: expected it installed, got none")


# -- the Relax function ------------------------------------------------------------------------


def input_order(outputs: Sequence[Output]) -> list[str]:
    """The input tuple's names: every output's members, in output order."""
    return [name for out in outputs for name in out.members]


def build_eager_module(inputs: Sequence[TensorInfo], outputs: Sequence[Output]) -> Any:
    """The eager transform as a TVM IRModule holding `FUNC_NAME`.

    One tuple parameter of the float32 `inputs`; every `params[i]` is bound first, as a lifted
    transform has them; then per output concat (if fused), permute_dims and astype float16.
    """
    _require_tvm()
    index = {info.name: i for i, info in enumerate(inputs)}
    fields = [relax.TensorType(list(info.shape), info.dtype) for info in inputs]
    params = relax.Var("params", relax.TupleType(fields))
    bb = relax.BlockBuilder()
    with bb.function(FUNC_NAME, [params]):
        with bb.dataflow():
            loaded = [bb.emit(relax.TupleGetItem(params, i)) for i in range(len(inputs))]
            results = [_linear(bb, [loaded[index[m]] for m in out.members]) for out in outputs]
            result = bb.emit_output(relax.Tuple(results))
        bb.emit_func_output(result)
    return bb.get()


def _linear(bb: Any, parts: list[Any]) -> Any:
    """concat (when fused) -> permute_dims -> astype float16, as the eager baseline does."""
    joined = bb.emit(relax.op.concat(parts, axis=0)) if len(parts) > 1 else parts[0]
    transposed = bb.emit(relax.op.permute_dims(joined, [1, 0]))
    return bb.emit(relax.op.astype(transposed, "float16"))


def make_lazy(mod: Any) -> Any:
    """TVM's lazy pipeline: the passes its LazyTransformParams documents as prerequisites."""
    _require_tvm()
    passes = [
        relax.transform.ToNonDataflow(),
        relax.transform.RemovePurityChecking(),
        relax.transform.LazyTransformParams(),
    ]
    return tvm.transform.Sequential(passes)(mod)


# -- running -------------------------------------------------------------------------------------


class _Io:
    """The get_item / set_item pair: tensors by tuple index from a source, outputs to sinks."""

    def __init__(
        self,
        source: CheckpointSource,
        inputs: list[str],
        outputs: list[Output],
        sinks: dict[str, SafetensorsSink],
    ) -> None:
        self.source = source
        self.inputs = inputs
        self.outputs = outputs
        self.sinks = sinks

    def get_item(self, index: int) -> Any:
        """Load input `index` and copy it into a TVM tensor (the mapping is dropped after)."""
        return tvm.runtime.tensor(self.source.load(self.inputs[int(index)]))

    def set_item(self, index: int, value: Any) -> None:
        """Write output `index` to its shard's sink, which keeps nothing."""
        out = self.outputs[int(index)]
        self.sinks[out.file].write(out.name, value.numpy())


def _open_sinks(dst: Path, outputs: list[Output], infos: dict[str, TensorInfo]) -> Any:
    """One streaming safetensors sink per output shard file, in output order."""
    files = dict.fromkeys(out.file for out in outputs)
    return {
        file: SafetensorsSink(dst / file, [infos[o.name] for o in outputs if o.file == file])
        for file in files
    }


def output_infos(source: CheckpointSource, outputs: list[Output]) -> dict[str, TensorInfo]:
    """Name, shape and dtype of every output, from the input headers: (cols, sum of rows) f16."""
    infos = {}
    for out in outputs:
        shapes = [source.info(m).shape for m in out.members]
        shape = (shapes[0][1], sum(s[0] for s in shapes))
        infos[out.name] = TensorInfo.of(out.name, shape, "float16")
    return infos


def run_tvm(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert `src_dir` into `dst_dir` with TVM's lazy pipeline; returns `dst_dir`.

    Output files and index are named as the eager baseline names them. The compile (passes and
    `relax.build`) is part of the run, as it is of any conversion.
    """
    _require_tvm()
    src, dst = Path(src_dir), Path(dst_dir)
    weight_map, index_name = read_weight_map(src)
    outputs = plan_outputs(weight_map)
    dst.mkdir(parents=True, exist_ok=True)
    with open_source(src) as source:
        names = input_order(outputs)
        inputs = [source.info(name) for name in names]
        executable = relax.build(make_lazy(build_eager_module(inputs, outputs)), target="llvm")
        infos = output_infos(source, outputs)
        _execute(executable, _Io(source, names, outputs, _open_sinks(dst, outputs, infos)))
    if index_name is not None:
        weight_map = {out.name: out.file for out in outputs}
        write_index(dst / index_name, weight_map, sum(i.nbytes for i in infos.values()))
    return dst


def _execute(executable: Any, io: _Io) -> None:
    """Register get_item / set_item, then make the VM (it binds them when made) and run it.

    The global functions are removed afterwards so the source and sinks are not kept alive.
    """
    try:
        tvm.register_global_func("get_item", io.get_item, override=True)
        tvm.register_global_func("set_item", io.set_item, override=True)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm[FUNC_NAME]()
    except BaseException:
        for sink in io.sinks.values():
            sink.abort()
        raise
    finally:
        for name in ("get_item", "set_item"):
            tvm_ffi.remove_global_func(name)
    for sink in io.sinks.values():
        sink.finalize()


def verify(src_dir: str | Path) -> list[str]:
    """Run both baselines on `src_dir` into temporary folders; returns their differences."""
    with tempfile.TemporaryDirectory() as tmp:
        eager, lazy = Path(tmp) / "eager", Path(tmp) / "tvm"
        run_eager(src_dir, eager)
        run_tvm(src_dir, lazy)
        return differences(eager, lazy)


def main(argv: Sequence[str] | None = None) -> int:
    """`SRC DST` converts and prints seconds; `--verify SRC` compares with the eager baseline."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.baseline_tvm")
    parser.add_argument("src")
    parser.add_argument("dst", nargs="?")
    parser.add_argument("--verify", action="store_true", help="compare with the eager baseline")
    args = parser.parse_args(argv)
    if args.verify:
        found = verify(args.src)
        print("\n".join(found) if found else "identical to the eager baseline")
        return 1 if found else 0
    if args.dst is None:
        parser.error("DST is required unless --verify is given")
    start = time.perf_counter()
    run_tvm(args.src, args.dst)
    print(f"tvm: {time.perf_counter() - start:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
