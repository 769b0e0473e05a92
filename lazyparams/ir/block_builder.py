"""BlockBuilder: builds functions binding by binding, inferring struct info on emit.

It keeps the blocks built so far and the one open block (plain or dataflow), and hands out
fresh names. Passes and the tracing frontend build all new IR through it. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lazyparams.errors import LazyParamsError
from lazyparams.ir.expr import (
    Binding,
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    MatchCast,
    SeqExpr,
    Var,
    VarBinding,
)
from lazyparams.ir.infer import struct_info_of
from lazyparams.ir.names import NameTable as NameTable  # re-exported, where the tracer looks
from lazyparams.ir.struct_info import StructInfo


@dataclass(slots=True)
class _OpenBlock:
    is_dataflow: bool
    bindings: list[Binding] = field(default_factory=list)


class BlockBuilder:
    """Builds one function at a time: `emit` bindings, inside `with bb.dataflow():` or not.

    `finish_function` then makes the Function; adjacent plain blocks come out as one block.
    """

    def __init__(self) -> None:
        self.names = NameTable()
        self._blocks: list[BindingBlock] = []
        self._open: _OpenBlock | None = None

    # Scopes ---------------------------------------------------------------------------------

    @contextmanager
    def dataflow(self) -> Iterator[None]:
        """Open a dataflow block; bindings emitted inside it use DataflowVars."""
        self.begin_block(is_dataflow=True)
        try:
            yield
        finally:
            self._close_open_block()

    @contextmanager
    def nested_scope(self) -> Iterator[None]:
        """Build the blocks of an inner SeqExpr (an If's branch) apart from the open ones, which
        are back as they were afterwards; names stay unique across both."""
        outer = self._blocks, self._open
        self._blocks, self._open = [], None
        try:
            yield
        finally:
            self._blocks, self._open = outer

    def begin_block(self, is_dataflow: bool) -> None:
        """Start a new block of the given kind (the current one, if any, is closed first)."""
        self._close_open_block()
        self._open = _OpenBlock(is_dataflow=is_dataflow)

    def end_block(self) -> None:
        """Close the current block, if any."""
        self._close_open_block()

    @property
    def in_dataflow(self) -> bool:
        """True while a dataflow block is open."""
        return self._open is not None and self._open.is_dataflow

    def _close_open_block(self) -> None:
        if self._open is not None and self._open.bindings:
            bindings = tuple(self._open.bindings)
            if self._open.is_dataflow:
                self._blocks.append(DataflowBlock(bindings))
            elif self._blocks and type(self._blocks[-1]) is BindingBlock:
                # Adjacent plain blocks are one block: the script syntax cannot tell them apart.
                self._blocks[-1] = BindingBlock(self._blocks[-1].bindings + bindings)
            else:
                self._blocks.append(BindingBlock(bindings))
        self._open = None

    def _current(self) -> _OpenBlock:
        if self._open is None:
            self._open = _OpenBlock(is_dataflow=False)
        return self._open

    # Emission -------------------------------------------------------------------------------

    def new_var(self, hint: str, sinfo: StructInfo | None, *, dataflow: bool = False) -> Var:
        """A fresh var (a DataflowVar when `dataflow`) with a unique name."""
        cls = DataflowVar if dataflow else Var
        return cls(self.names.fresh(hint), sinfo)

    def emit(self, value: Expr, name_hint: str = "lv", sinfo: StructInfo | None = None) -> Var:
        """Bind `value` to a fresh var whose struct info is inferred (or `sinfo` if given)."""
        sinfo = sinfo if sinfo is not None else struct_info_of(value)
        var = self.new_var(name_hint, sinfo, dataflow=self.in_dataflow)
        self._current().bindings.append(VarBinding(var, value))
        return var

    def emit_output(self, value: Expr, name_hint: str = "gv") -> Var:
        """Inside a dataflow block, bind `value` to a var visible after the block."""
        if not self.in_dataflow:
            raise LazyParamsError("emit_output: expected an open dataflow block, got a plain block")
        var = self.new_var(name_hint, struct_info_of(value))
        self._current().bindings.append(VarBinding(var, value))
        return var

    def match_cast(self, value: Expr, sinfo: StructInfo, name_hint: str = "lv") -> Var:
        """Bind `value` to a fresh var after checking it against `sinfo` at run time."""
        var = self.new_var(name_hint, sinfo, dataflow=self.in_dataflow)
        self._current().bindings.append(MatchCast(var, value, sinfo))
        return var

    def emit_binding(self, binding: Binding) -> None:
        """Append an already-made binding (its var is kept as is)."""
        self.names.reserve(binding.var.name_hint)
        self._current().bindings.append(binding)

    # Results --------------------------------------------------------------------------------

    def take_blocks(self) -> tuple[BindingBlock, ...]:
        """Close the open block and return every block built so far, resetting the builder."""
        self._close_open_block()
        blocks, self._blocks = tuple(self._blocks), []
        return blocks

    def finish_function(
        self,
        params: tuple[Var, ...],
        result: Expr,
        *,
        ret_struct_info: StructInfo | None = None,
        is_pure: bool = True,
        attrs: Mapping[str, Any] | None = None,
    ) -> Function:
        """Make a Function of `params`, the blocks emitted so far and `result`."""
        body = SeqExpr(self.take_blocks(), result)
        ret = ret_struct_info if ret_struct_info is not None else struct_info_of(result)
        return Function(params, body, ret, is_pure, dict(attrs or {}))
