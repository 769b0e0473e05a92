"""FuseLayoutCast: chains of concat, permute_dims and astype become one `R.layout_cast`, whose
kernel writes each part, permuted and cast, straight into the output.

A chain is fused when its parts are weights' loads each read only by it, and each of its
intermediates is read only by the next op of the chain, in the same block:
`astype(concat(parts))`, `astype` of a `permute_dims` (or the reverse), a `concat` of parts each
cast alike to a dtype at least as wide, and any mix of them with at most one cast. A narrowing
cast of a part stays before the join (fused, the join would hold the wide parts with its
output); a computed part stays unfused (it would be held until the fused op, where the chain's
first step frees it). The result is bit-identical (a cast is elementwise; joining and permuting
only move elements) and holds no intermediate, so the predicted peak never rises. Imports `ir`,
`op` and `analysis`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from lazyparams.analysis.liveness import used_vars
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    Expr,
    Function,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    struct_info_of,
)
from lazyparams.ir.dtype import bits, is_block
from lazyparams.op import layout_cast
from lazyparams.op.base import attr
from lazyparams.transform.base import NamedFunctionPass
from lazyparams.transform.util import is_op_call


@dataclass(frozen=True, slots=True)
class _Fused:
    """What a chain ending at a var computes: `parts` joined along `axis`, permuted by `axes`,
    cast to `dtype` (None: no cast yet); `absorbed` are the vars of the chain's intermediates
    and `ops` how many ops it holds."""

    parts: tuple[Var, ...]
    axis: int
    axes: tuple[int, ...]
    dtype: str | None
    absorbed: frozenset[Var]
    ops: int

    @staticmethod
    def of(var: Var) -> _Fused | None:
        """The empty chain of a tensor var of known rank and element dtype."""
        sinfo = struct_info_of(var)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim < 0 or not sinfo.dtype:
            return None
        if is_block(sinfo.dtype):
            return None
        return _Fused((var,), 0, tuple(range(sinfo.ndim)), None, frozenset(), 0)


class FuseLayoutCast(NamedFunctionPass):
    """Rewrite every fusable concat / permute_dims / astype chain into one `R.layout_cast`
    (see the module docstring); functions are selected as by the lazy passes."""

    def transform_function(self, name: str, func: Function) -> Function:
        readers = _readers(func)
        loads = _single_loads(func, readers)
        blocks = tuple(_fuse_block(block, readers, loads) for block in func.body.blocks)
        if all(new is old for new, old in zip(blocks, func.body.blocks, strict=True)):
            return func
        body = SeqExpr(blocks, func.body.body)
        return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _readers(func: Function) -> Counter[Var]:
    """How many expressions (binding values and the result) read each var."""
    counts: Counter[Var] = Counter(used_vars(func.body.body))
    for binding in func.bindings():
        counts.update(used_vars(binding.value))
    return counts


def _single_loads(func: Function, readers: Counter[Var]) -> frozenset[Var]:
    """Vars bound to an item of a param (a weight's load, lazily read where it is used) that
    one expression reads: the only parts a chain may start from. Such a part is loaded right
    before the fused op and freed by it, as before the intermediates it no longer makes; a
    computed part would be held until the fused op, where the unfused chain could free it
    (and what it keeps alive) at its first step, and the schedule could raise the peak."""
    params = set(func.params)
    return frozenset(
        b.var
        for b in func.bindings()
        if isinstance(b.value, TupleGetItem)
        and b.value.tuple_value in params
        and readers[b.var] == 1
    )


def _fuse_block(block: BindingBlock, readers: Counter[Var], loads: frozenset[Var]) -> BindingBlock:
    """The block with each chain's end bound to its fused call and its intermediates gone.

    1. walk the bindings in order, growing the chain ending at each var from its operand's;
    2. a chain is absorbed into its reader's when that reader extends it;
    3. rebind the ends of chains of two or more ops; drop what they absorbed.
    """
    chains: dict[Var, _Fused] = {}
    for binding in block.bindings:
        grown = _grow(binding, chains, readers, loads)
        if grown is not None:
            chains[binding.var] = grown
    absorbed = frozenset().union(*(c.absorbed for c in chains.values()))
    ends = {
        v: c
        for v, c in chains.items()
        if c.ops >= 2 and v not in absorbed and loads.issuperset(c.parts)
    }
    if not ends:
        return block
    dropped = frozenset().union(*(ends[v].absorbed for v in ends))
    kept = [_rebound(b, ends.get(b.var)) for b in block.bindings if b.var not in dropped]
    return type(block)(tuple(kept))


def _rebound(binding: Binding, chain: _Fused | None) -> Binding:
    """`binding` with its value replaced by the fused call of `chain` (if any)."""
    if chain is None:
        return binding
    sinfo = struct_info_of(binding.var)
    assert isinstance(sinfo, TensorStructInfo)
    tensors: Expr = chain.parts[0] if len(chain.parts) == 1 else Tuple(chain.parts)
    call = layout_cast(tensors, chain.axes, chain.dtype or sinfo.dtype, axis=chain.axis)
    return VarBinding(binding.var, call)


def _grow(
    binding: Binding, chains: dict[Var, _Fused], readers: Counter[Var], loads: frozenset[Var]
) -> _Fused | None:
    """The chain ending at `binding`'s var, or None where its value is no chain op."""
    value = binding.value
    if not isinstance(binding, VarBinding) or not isinstance(value, Call):
        return None
    if is_op_call(value, "concat"):
        return _joined(value, chains, readers, loads)
    x = value.args[0] if value.args else None
    if not isinstance(x, Var) or not (
        is_op_call(value, "astype") or is_op_call(value, "permute_dims")
    ):
        return None
    base = _operand_chain(x, chains, readers)
    if base is None:
        return None
    if is_op_call(value, "permute_dims"):
        perm = attr(value, "axes")
        axes = tuple(base.axes[p % len(base.axes)] for p in perm) if perm else base.axes[::-1]
        return replace(base, axes=axes, ops=base.ops + 1)
    if base.dtype is not None:  # a second cast rounds twice: the chain restarts at x
        base = _Fused.of(x)
        if base is None:
            return None
    dtype = attr(value, "dtype")
    return None if is_block(dtype) else replace(base, dtype=dtype, ops=base.ops + 1)


def _operand_chain(x: Var, chains: dict[Var, _Fused], readers: Counter[Var]) -> _Fused | None:
    """The chain an op reading `x` extends: x's own when x is read only there, else x alone."""
    found = chains.get(x)
    if found is not None and readers[x] == 1:
        return replace(found, absorbed=found.absorbed | {x})
    return _Fused.of(x)


def _joined(
    call: Call, chains: dict[Var, _Fused], readers: Counter[Var], loads: frozenset[Var]
) -> _Fused | None:
    """The chain of a `concat` of var fields, each field's own cast (all to one dtype) taken
    in where that cannot raise the peak (`_absorbable`); other chains of its fields stay apart
    (a permuted part would need its own layout)."""
    fields = call.args[0]
    if not isinstance(fields, Tuple) or not all(isinstance(f, Var) for f in fields.fields):
        return None
    parts: list[Var] = []
    absorbed: set[Var] = set()
    casts: set[str] = set()
    for field in fields.fields:
        assert isinstance(field, Var)
        found = chains.get(field)
        if found is not None and readers[field] == 1 and _absorbable(found):
            parts.append(found.parts[0])
            absorbed.add(field)
            casts.add(str(found.dtype))
        else:
            parts.append(field)
    first = _Fused.of(parts[0])
    if first is None or len(casts) > 1 or any(_Fused.of(p) is None for p in parts):
        return None
    axis = attr(call, "axis") % len(first.axes)
    dtype = casts.pop() if casts else None
    ops = 1 + (1 if absorbed else 0)
    return _Fused(tuple(parts), axis, first.axes, dtype, frozenset(absorbed), ops)


def _absorbable(chain: _Fused) -> bool:
    """Whether a join may take in a part's cast without raising the peak: the chain is one
    cast, to items as wide or wider (the join holds the parts as they are, not as they are
    cast)."""
    if not _plain_cast(chain):
        return False
    sinfo = struct_info_of(chain.parts[0])
    assert isinstance(sinfo, TensorStructInfo) and chain.dtype is not None
    return bits(chain.dtype) >= bits(sinfo.dtype)


def _plain_cast(chain: _Fused) -> bool:
    """Whether a chain is one cast of one tensor (no join, no permutation)."""
    identity = chain.axes == tuple(range(len(chain.axes)))
    return len(chain.parts) == 1 and identity and chain.dtype is not None and chain.ops == 1
