"""Property tests: random well-typed modules round-trip through print/parse, and one random
mutation (a shape, a dtype, a tuple index or an operand) makes a module compare unequal."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lazyparams.ir import Call, Function, IRModule, TensorStructInfo, TupleGetItem, Var
from lazyparams.ir.prim import IntImm
from lazyparams.ir.print_prim import walk
from lazyparams.ir.structural import structural_equal
from lazyparams.script import parse
from tests.programs import SETTINGS, transform_programs
from tests.script.strategies import script_modules
from tests.script.util import roundtrip

modules = st.one_of(transform_programs(max_ops=6), script_modules())


@SETTINGS
@given(transform_programs())
def test_transform_programs_round_trip(mod: IRModule) -> None:
    roundtrip(mod)


@SETTINGS
@given(script_modules())
def test_modules_of_every_relax_node_kind_round_trip(mod: IRModule) -> None:
    roundtrip(mod)


@SETTINGS
@given(modules, st.data())
def test_one_mutation_makes_modules_unequal(mod: IRModule, data: st.DataObject) -> None:
    parsed = parse(mod.script())
    sites = _sites(parsed)
    kind = data.draw(st.sampled_from(sorted(k for k, v in sites.items() if v)), label="kind")
    old, new = data.draw(st.sampled_from(sites[kind]), label="site")
    mutated = _substitute(parsed, old, new)
    assert not structural_equal(mutated, parsed)
    assert not structural_equal(mutated, mod)


def _sites(mod: IRModule) -> dict[str, list[tuple[Any, Any]]]:
    """Candidate (node, replacement) pairs of each mutation kind."""
    nodes = [n for _, f in mod.items() for n in walk(f)]
    sites: dict[str, list[tuple[Any, Any]]] = {"shape": [], "dtype": [], "index": [], "operand": []}
    for node in nodes:
        if isinstance(node, TensorStructInfo) and node.shape and isinstance(node.shape[0], IntImm):
            dims = (IntImm(node.shape[0].value + 1), *node.shape[1:])
            sites["shape"].append((node, TensorStructInfo(dims, node.dtype)))
        if isinstance(node, TensorStructInfo) and node.dtype in ("float32", "float16"):
            other = "float16" if node.dtype == "float32" else "float32"
            sites["dtype"].append((node, dataclasses.replace(node, dtype=other)))
        if isinstance(node, TupleGetItem):
            sites["index"].append((node, TupleGetItem(node.tuple_value, node.index + 1)))
    for _, func in mod.relax_functions():
        sites["operand"] += _operand_sites(func)
    return sites


def _operand_sites(func: Function) -> list[tuple[Any, Any]]:
    """Calls with a var operand, each with that operand swapped for another var."""
    variables = [*func.params, *(b.var for b in func.bindings())]
    sites = []
    for node in walk(func.body):
        if not isinstance(node, Call):
            continue
        for i, arg in enumerate(node.args):
            other = next((v for v in variables if isinstance(arg, Var) and v is not arg), None)
            if other is not None:
                args = (*node.args[:i], other, *node.args[i + 1 :])
                sites.append((node, Call(node.op, args, node.attrs, node.sinfo_args)))
    return sites


def _substitute(mod: IRModule, old: Any, new: Any) -> IRModule:
    """A copy of `mod` with every occurrence of the object `old` replaced by `new`."""
    memo: dict[int, Any] = {id(old): new}

    def rebuild(node: Any) -> Any:
        if id(node) in memo:
            return memo[id(node)]
        result = node
        if isinstance(node, tuple | list):
            items = [rebuild(x) for x in node]
            if any(a is not b for a, b in zip(items, node, strict=True)):
                result = type(node)(items)
        elif isinstance(node, dict):
            result = {k: rebuild(v) for k, v in node.items()}
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            changes = {f.name: rebuild(getattr(node, f.name)) for f in dataclasses.fields(node)}
            if any(changes[k] is not getattr(node, k) for k in changes):
                result = dataclasses.replace(node, **changes)
        memo[id(node)] = result
        return result

    return IRModule({mod.get_global_var(n): rebuild(f) for n, f in mod.items()}, mod.attrs)
