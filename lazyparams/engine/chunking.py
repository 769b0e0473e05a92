"""Chunked conversion: tensors larger than the budget, converted one block of rows at a time.

When the lazy function's predicted peak exceeds the budget, `fit_budget` unrolls the
row-separable chains (see `transform.chunk_rows`) that run while the peak is over it into
blocks, trying blocks from half the budget down, halving, and keeps the first whose exact
predicted peak fits. `row_externs` are the block loads and stores such a function calls,
over a source and an output. Imports `analysis`, `transform`, `io`, `ir` and the engine's own
modules.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from lazyparams.analysis.memory import MemoryProfile, estimate_peak_memory
from lazyparams.engine.compile import FUNC, function_of, names_of
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.io.partial import accepts_rows, flat_block, flat_info, load_cols, load_rows
from lazyparams.ir import Call, ExternFunc, Function, IRModule, PrimValue, StructInfo
from lazyparams.ir.prim import IntImm
from lazyparams.transform.chunk_chains import Chain, find_chains
from lazyparams.transform.chunk_rows import GET_COLS, GET_ROWS, MAX_CHUNKS, SET_ROWS, ChunkRows
from lazyparams.transform.stream_concat import StreamConcat

if TYPE_CHECKING:
    from lazyparams.engine.destination import Destination
    from lazyparams.engine.output import Output
    from lazyparams.engine.progress import Counter


def fit_budget(lazy: IRModule, inputs: Sequence[StructInfo], budget: int) -> IRModule:
    """`lazy` itself when its predicted peak fits `budget`; else with its concatenations
    streamed part by part (`transform.stream_concat`: stacked experts are written expert by
    expert) and, if that is not enough, with the chains that run while the peak exceeds it
    unrolled into the largest blocks that make it fit, or, when no
    block size does, into those that give the lowest peak (so the refusal names that minimum).

    `inputs` is the struct info of every input, as `estimate_peak_memory` takes it.
    """
    profile = estimate_peak_memory(function_of(lazy), inputs=inputs)
    if profile.peak_bytes <= budget:
        return lazy
    lazy = StreamConcat(inputs=inputs, func_names=[FUNC])(lazy)
    profile = estimate_peak_memory(function_of(lazy), inputs=inputs)
    if profile.peak_bytes <= budget:
        return lazy
    chains = over_budget(function_of(lazy), inputs, budget, profile)
    best, lowest = lazy, profile.peak_bytes
    only = {index for chain in chains for index in chain.indices}
    for block in block_sizes(chains, budget):
        pass_ = ChunkRows(block, inputs=inputs, func_names=[FUNC], only_inputs=only)
        candidate = pass_(lazy)
        peak = estimate_peak_memory(function_of(candidate), inputs=inputs).peak_bytes
        if peak <= budget:
            return candidate
        if peak < lowest:
            best, lowest = candidate, peak
    return best


def over_budget(
    func: Function, inputs: Sequence[StructInfo], budget: int, profile: MemoryProfile
) -> list[Chain]:
    """The chains of `func` during whose bindings (from the load to the last member) the
    predicted bytes exceed `budget`: the ones splitting into blocks can bring down."""
    position = {binding: index for index, binding in enumerate(func.bindings())}
    found = []
    for chain in find_chains(func, inputs):
        where = [position[b] for b in chain.members]
        if max(profile.timeline[min(where) : max(where) + 1]) > budget:
            found.append(chain)
    return found


def block_sizes(chains: Sequence[Chain], budget: int) -> Iterator[int]:
    """Block sizes to try, largest first: half the budget, halved down to the finest blocks
    any of `chains` can take (one row, or `MAX_CHUNKS` blocks), which comes last."""
    if not chains:
        return
    finest = min(c.row_bytes * math.ceil(c.length / min(c.length, MAX_CHUNKS)) for c in chains)
    block = budget // 2
    while block > finest:
        yield block
        block //= 2
    yield max(finest, 1)


def takes_rows(target: Destination) -> bool:
    """Whether the destination takes outputs in blocks of rows (every path and dict does; a
    sink object only with a `write_rows` method)."""
    if target.path is not None or isinstance(target.target, MutableMapping):
        return True
    return accepts_rows(target.target)


def row_externs(
    module: IRModule,
    infos: Sequence[TensorInfo],
    source: CheckpointSource,
    output: Output,
    counter: Counter,
    loading: threading.Lock,
) -> dict[str, Callable[..., Any]]:
    """`get_item_rows`, `get_item_cols` and `set_item_rows` of the lazy function of `module`:
    blocks read from `source` (one read at a time, under `loading`) and written to `output`.

    `infos` describes the outputs; the counter counts a tensor read at its first block and
    written at its last.
    """
    func = function_of(module)
    inputs, outputs = names_of(func, "input_names"), names_of(func, "output_names")
    by_name = {info.name: info for info in infos if info.shape}
    rows = {name: flat_info(info).shape[0] for name, info in by_name.items()}

    def reader(load: Callable[[CheckpointSource, str, int, int], Any]) -> Callable[..., Any]:
        def get_item_block(index: int, start: int, stop: int) -> Any:
            name = inputs[int(index)]
            with loading:
                block = load(source, name, int(start), int(stop))
            counter.loaded(name, int(block.nbytes), int(start == 0))
            return block

        return get_item_block

    def set_item_rows(index: int, start: int, block: Any) -> None:
        name = outputs[int(index)]
        output.write_rows(name, int(start), block)
        info = by_name.get(name)
        first, flat = (int(start), block) if info is None else flat_block(info, int(start), block)
        last = int(first) + len(flat) == rows.get(name)  # type: ignore[call-overload]
        counter.wrote(name, int(block.nbytes), int(last))

    return {GET_ROWS: reader(load_rows), GET_COLS: reader(load_cols), SET_ROWS: set_item_rows}


def row_outputs(module: IRModule) -> tuple[str, ...]:
    """Names of the outputs the lazy function of `module` writes in blocks of rows."""
    func = function_of(module)
    names = names_of(func, "output_names")
    found: dict[str, None] = {}
    for binding in func.bindings():
        call = binding.value
        if isinstance(call, Call) and isinstance(call.op, ExternFunc):
            index = call.args[0] if call.op.global_symbol == SET_ROWS else None
            if isinstance(index, PrimValue) and isinstance(index.value, IntImm):
                found[names[index.value.value]] = None
    return tuple(found)
