"""Standard benchmark workloads, as eager transform modules built with BlockBuilder.

`llama_like(layers, d, f)` is the workload of DESIGN.md: per layer q, k, v, o (d x d), gate, up
(f x d), down (d x f) in float32; q/k/v and gate/up are fused with concat, every linear weight
is transposed and cast to float16, and every `params[i]` binding sits at the top of the
function, as a lifted transform has them. Shared by the benchmarks and the memory tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from lazyparams import op
from lazyparams.ir import (
    BlockBuilder,
    Call,
    Function,
    IRModule,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    struct_info_of,
)
from lazyparams.ir.dtype import itemsize

FUNC_NAME = "main_transform_params"
WEIGHTS = ("q", "k", "v", "o", "gate", "up", "down")
"""The weights of one layer, in input order."""


def llama_shapes(layers: int, d: int, f: int) -> list[tuple[str, tuple[int, int]]]:
    """(name, shape) of every input, layer by layer in `WEIGHTS` order."""
    shape = {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d)}
    shape |= {"gate": (f, d), "up": (f, d), "down": (d, f)}
    return [(f"layers.{i}.{w}", shape[w]) for i in range(layers) for w in WEIGHTS]


def llama_like(layers: int, d: int = 512, f: int = 1376) -> IRModule:
    """The llama-like eager transform module with `layers` layers (see the module docstring)."""
    shapes = llama_shapes(layers, d, f)
    fields = tuple(TensorStructInfo(s, "float32") for _, s in shapes)
    params = Var("params", TupleStructInfo(fields))
    bb = BlockBuilder()
    outputs: list[Var] = []
    with bb.dataflow():
        loaded = [
            bb.emit(TupleGetItem(params, i), _short(name)) for i, (name, _) in enumerate(shapes)
        ]
        for layer in range(layers):
            q, k, v, o, gate, up, down = loaded[layer * len(WEIGHTS) : (layer + 1) * len(WEIGHTS)]
            outputs.append(_linear(bb, bb.emit(op.concat((q, k, v), axis=0), "qkv")))
            outputs.append(_linear(bb, o))
            outputs.append(_linear(bb, bb.emit(op.concat((gate, up), axis=0), "gate_up")))
            outputs.append(_linear(bb, down))
        result = bb.emit_output(Tuple(tuple(outputs)), "gv")
    func = bb.finish_function((params,), result, attrs={"global_symbol": FUNC_NAME})
    return IRModule({FUNC_NAME: func})


def _short(name: str) -> str:
    layer, weight = name.split(".")[1:]
    return f"{weight}{layer}"


def _linear(bb: BlockBuilder, weight: Var) -> Var:
    """Transpose a linear weight and cast it to float16."""
    transposed = bb.emit(op.permute_dims(weight, axes=[1, 0]), "t")
    return bb.emit(op.astype(transposed, "float16"), "h")


def llama_inputs(layers: int, d: int, f: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Random float32 inputs for `llama_like(layers, d, f)`."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s, dtype=np.float32) for _, s in llama_shapes(layers, d, f))


def largest_step_bytes(func: Function) -> int:
    """The biggest op of `func`: the bytes of its tensor operands plus its result."""
    return max((_step_bytes(call) for call in _calls(func)), default=0)


def _calls(func: Function) -> Iterator[Call]:
    for binding in func.bindings():
        if isinstance(binding.value, Call):
            yield binding.value


def _step_bytes(call: Call) -> int:
    operands = [struct_info_of(call)]
    for arg in call.args:
        operands.extend(f for f in _leaves(arg))
    return sum(_tensor_bytes(s) for s in operands)


def _leaves(expr: object) -> list[object]:
    if isinstance(expr, Tuple):
        return [s for f in expr.fields for s in _leaves(f)]
    return [struct_info_of(expr)] if isinstance(expr, Var) else []


def _tensor_bytes(sinfo: object) -> int:
    if isinstance(sinfo, TupleStructInfo):
        return sum(_tensor_bytes(f) for f in sinfo.fields)
    if isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None:
        return int(np.prod(sinfo.static_shape)) * itemsize(sinfo.dtype)
    return 0
