"""Orders of bindings with the lowest peak memory, over the buffer model of one segment.

`segment_graph` turns a run of bindings into nodes that allocate, load, consume and free
buffers; `exact_order` finds a lowest-peak order by dynamic programming over sets of nodes,
`greedy_order` a good one for large segments, and `peak_of` rates any order. Loads read by a
node are folded into it: they run right before their first reader. Imports `analysis` only.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lazyparams.analysis.memory_model import BufferModel
from lazyparams.ir import VarBinding


@dataclass(slots=True)
class SegmentGraph:
    """The nodes of one segment and the buffers they touch (buffer ids are the model's).

    `nodes[n]` is a binding index; `preds[n]` the nodes n must follow; `loads[n]` the folded
    load buffers n reads (loaded by whichever reader runs first, `folded[b]` being the load's
    binding); `consumers[b]` the nodes keeping buffer b alive; `persist[b]` means b outlives
    the segment. `tail` are bindings that always come last (the returned tuple).
    """

    nodes: list[int]
    tail: list[int]
    preds: list[set[int]] = field(default_factory=list)
    alloc: list[int] = field(default_factory=list)
    creates: list[list[int]] = field(default_factory=list)
    consumes: list[list[int]] = field(default_factory=list)
    loads: list[list[int]] = field(default_factory=list)
    consumers: dict[int, list[int]] = field(default_factory=dict)
    persist: dict[int, bool] = field(default_factory=dict)
    size: dict[int, int] = field(default_factory=dict)
    external: list[int] = field(default_factory=list)
    folded: dict[int, int] = field(default_factory=dict)

    def emit(self, order: Iterable[int]) -> list[int]:
        """Binding indices for a node order: each folded load right before its first reader."""
        emitted: set[int] = set()
        result = []
        for node in order:
            for buffer in self.loads[node]:
                load = self.folded[buffer]
                if load not in emitted:
                    emitted.add(load)
                    result.append(load)
            result.append(self.nodes[node])
        return result + self.tail


def segment_graph(
    model: BufferModel, lo: int, hi: int, deps: Mapping[int, set[int]]
) -> SegmentGraph:
    """The graph of bindings `lo..hi-1`; `deps[i]` are the binding indices i must follow."""
    created: dict[int, list[int]] = {}
    for buffer, at in enumerate(model.created_by):
        if lo <= at < hi:
            created.setdefault(at, []).append(buffer)
    tail = [model.output_tuple] if _is_tail(model, lo, hi) else []
    folded = _foldable_loads(model, created, lo, hi, tail)
    nodes = [i for i in range(lo, hi) if i not in folded and i not in tail]
    graph = SegmentGraph(nodes, tail)
    local = {index: n for n, index in enumerate(nodes)}
    graph.folded = {b: load for load in folded for b in created[load]}
    for index in nodes:
        graph.preds.append({local[d] for d in deps.get(index, ()) if d in local})
        graph.creates.append(created.get(index, []))
        graph.alloc.append(sum(model.sizes[b] for b in graph.creates[-1]))
        graph.consumes.append([])
        graph.loads.append([])
    _add_buffers(graph, model, local, lo, hi)
    _add_load_readers(graph, model, created, folded)
    return graph


def _add_load_readers(
    graph: SegmentGraph, model: BufferModel, created: dict[int, list[int]], folded: set[int]
) -> None:
    """A node reading a folded load's var without keeping it alive (a copy the lazy form
    drops) still needs the load before it: it consumes the load's buffers in the graph."""
    load_of = {model.bindings[load].var: load for load in folded}
    for node, index in enumerate(graph.nodes):
        for var in model.readers[index]:
            for buffer in created.get(load_of.get(var, -1), []):
                if node not in graph.consumers.setdefault(buffer, []):
                    graph.consumers[buffer] = sorted((*graph.consumers[buffer], node))
                    graph.consumes[node].append(buffer)
                    graph.loads[node].append(buffer)


def _is_tail(model: BufferModel, lo: int, hi: int) -> bool:
    """True when the returned tuple is bound in this segment and nothing in it reads it."""
    out = model.output_tuple
    if not lo <= out < hi:
        return False
    var = model.bindings[out].var
    return not any(var in model.readers[j] for j in range(out + 1, hi))


def _foldable_loads(
    model: BufferModel, created: dict[int, list[int]], lo: int, hi: int, tail: list[int]
) -> set[int]:
    """Loads that some binding of the segment keeps alive, and that only such bindings read."""
    readers: dict[object, list[int]] = {}
    for index in range(lo, hi):
        if index not in tail:
            for var in model.readers[index]:
                readers.setdefault(var, []).append(index)
    found = set()
    for index in range(lo, hi):
        binding = model.bindings[index]
        made = created.get(index, [])
        if model.loads[index] and isinstance(binding, VarBinding) and made:
            if any(b in model.handoff for b in made):
                continue  # a handed-off load counts only while it loads: it stays a node
            users = readers.get(binding.var, [])
            if users and all(binding.var in model.cost_reads[j] for j in users):
                found.add(index)
    return found


def _add_buffers(
    graph: SegmentGraph, model: BufferModel, local: dict[int, int], lo: int, hi: int
) -> None:
    """Size, consumers, persistence and origin of every buffer the segment touches."""
    for buffer, born in enumerate(model.created_by):
        users = model.users(buffer) if born < hi else set()
        inside = sorted(local[u] for u in users if u in local)
        if not inside and not lo <= born < hi:
            continue
        graph.size[buffer] = model.sizes[buffer]
        graph.consumers[buffer] = inside
        graph.persist[buffer] = model.pinned[buffer] or any(u >= hi for u in users)
        by = model.handoff_by.get(buffer)
        if by is not None and (by == born or by in local):
            # A sink takes it at `by`: it is freed then, whoever still reads it.
            inside = [] if by == born else [local[by]]
            graph.consumers[buffer], graph.persist[buffer] = inside, False
        for node in inside:
            graph.consumes[node].append(buffer)
            if buffer in graph.folded:
                graph.loads[node].append(buffer)
        if born < lo:
            graph.external.append(buffer)


# Rating an order -------------------------------------------------------------------------


def peak_of(graph: SegmentGraph, order: Iterable[int]) -> int:
    """The peak of running the segment's nodes in `order` (loads just before first use)."""
    remaining = {b: len(c) for b, c in graph.consumers.items()}
    live = sum(graph.size[b] for b in graph.external)
    loaded: set[int] = set()
    peak = live
    for node in order:
        new = [b for b in graph.loads[node] if b not in loaded]
        loaded.update(new)
        step = graph.alloc[node] + sum(graph.size[b] for b in new)
        peak = max(peak, live + step)
        live += step - _freed(graph, node, remaining)
    return peak


def _freed(graph: SegmentGraph, node: int, remaining: dict[int, int]) -> int:
    """Bytes dropped once `node` has run; updates the remaining consumer counts."""
    freed = 0
    for buffer in graph.consumes[node]:
        remaining[buffer] -= 1
        if remaining[buffer] == 0 and not graph.persist[buffer]:
            freed += graph.size[buffer]
    for buffer in graph.creates[node]:
        if not graph.consumers[buffer] and not graph.persist[buffer]:
            freed += graph.size[buffer]
    return freed


# The exact order -----------------------------------------------------------------------------


def exact_order(graph: SegmentGraph) -> list[int]:
    """An order with the lowest peak, by dynamic programming over sets of nodes that have run.

    What is held after a set of nodes has run depends on the set alone, so the best peak of a
    set is the best, over its possible last nodes, of the best peak before that node and the
    bytes held while it runs. Cost: 2^n * n steps; meant for n up to a dozen.
    """
    count = len(graph.nodes)
    pred_masks = [sum(1 << p for p in preds) for preds in graph.preds]
    users = {b: sum(1 << n for n in c) for b, c in graph.consumers.items()}
    load_masks = [[(graph.size[b], users[b]) for b in graph.loads[n]] for n in range(count)]
    live = _live_by_mask(graph, users)
    inf = float("inf")
    best: list[float] = [inf] * (1 << count)
    choice = [-1] * (1 << count)
    best[0] = 0
    for mask in range(1, 1 << count):
        for node in range(count):
            before = mask & ~(1 << node)
            if before == mask or pred_masks[node] & ~before or best[before] == inf:
                continue
            step = graph.alloc[node] + sum(s for s, u in load_masks[node] if not u & before)
            cost = max(best[before], live[before] + step)
            if cost < best[mask]:
                best[mask], choice[mask] = cost, node
    order, mask = [], (1 << count) - 1
    while mask:
        order.append(choice[mask])
        mask &= ~(1 << choice[mask])
    return order[::-1]


def _live_by_mask(graph: SegmentGraph, users: dict[int, int]) -> list[int]:
    """Bytes held after the nodes of each mask have run."""
    creators = {b: n for n, made in enumerate(graph.creates) for b in made}
    facts = []
    for buffer, size in graph.size.items():
        if buffer in graph.folded:
            born = users[buffer]
        elif buffer in creators:
            born = 1 << creators[buffer]
        else:
            born = -1
        facts.append((size, born, users[buffer], graph.persist[buffer]))
    live = []
    for mask in range(1 << len(graph.nodes)):
        held = 0
        for size, born, used_by, persist in facts:
            if (born < 0 or born & mask) and (persist or used_by & ~mask):
                held += size
        live.append(held)
    return live


# The greedy order ----------------------------------------------------------------------------


def greedy_order(graph: SegmentGraph) -> list[int]:
    """A good order for large segments: run next whatever frees most, or costs least.

    A node's key is (bytes it adds net of what it frees, bytes it adds, original position):
    finishing the consumers of a loaded value frees it, so they run before the next load.
    Keys change as neighbours run; stale heap entries are skipped by their stamp.
    """
    succs: list[list[int]] = [[] for _ in graph.nodes]
    waiting = [len(p) for p in graph.preds]
    for node, preds in enumerate(graph.preds):
        for pred in preds:
            succs[pred].append(node)
    state = _GreedyState(graph)
    for node, count in enumerate(waiting):
        if not count:
            state.push(node)
    order = []
    while state.heap:
        _, stamp, node = heapq.heappop(state.heap)
        if stamp != state.stamps[node] or node in state.done:
            continue
        order.append(node)
        state.run(node)
        for succ in succs[node]:
            waiting[succ] -= 1
            if not waiting[succ]:
                state.push(succ)
    return order


class _GreedyState:
    """What the greedy scheduler knows as it goes: what is loaded, what each buffer awaits."""

    def __init__(self, graph: SegmentGraph) -> None:
        self.graph = graph
        self.remaining = {b: len(c) for b, c in graph.consumers.items()}
        self.loaded: set[int] = set()
        self.ready: set[int] = set()
        self.done: set[int] = set()
        self.stamps = [0] * len(graph.nodes)
        self.heap: list[tuple[tuple[int, int, int], int, int]] = []

    def key(self, node: int) -> tuple[int, int, int]:
        graph = self.graph
        new_loads = sum(graph.size[b] for b in graph.loads[node] if b not in self.loaded)
        need = graph.alloc[node] + new_loads
        freed = sum(
            graph.size[b]
            for b in graph.consumes[node]
            if self.remaining[b] == 1 and not graph.persist[b]
        )
        freed += sum(
            graph.size[b]
            for b in graph.creates[node]
            if not graph.consumers[b] and not graph.persist[b]
        )
        return need - freed, need, node

    def push(self, node: int) -> None:
        self.ready.add(node)
        self.stamps[node] += 1
        heapq.heappush(self.heap, (self.key(node), self.stamps[node], node))

    def run(self, node: int) -> None:
        """Record that `node` ran, and re-key the ready nodes whose costs it changed."""
        graph, touched = self.graph, set()
        self.done.add(node)
        for buffer in graph.loads[node]:
            if buffer not in self.loaded:
                self.loaded.add(buffer)
                touched.update(graph.consumers[buffer])
        for buffer in graph.consumes[node]:
            self.remaining[buffer] -= 1
            if self.remaining[buffer] == 1:
                touched.update(graph.consumers[buffer])
        for other in touched:
            if other in self.ready and other not in self.done:
                self.push(other)
