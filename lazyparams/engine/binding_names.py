"""The tensor each binding of a lazy function belongs to, so that messages name tensors.

A peak or a budget refusal happens at a binding (`astype_39`), which means little to a user;
the tensor it belongs to does: the input a load reads, the output a value is handed off as (or
the first output that a temporary feeds). Imports `ir` and the chunking externs' names.
"""

from __future__ import annotations

import re

from lazyparams.analysis.liveness import used_vars
from lazyparams.ir import Call, ExternFunc, Function, PrimValue, Var
from lazyparams.ir.prim import IntImm
from lazyparams.transform.chunk_rows import GET_COLS, GET_ROWS, SET_ROWS

_LOADS = ("get_item", GET_ROWS, GET_COLS)
_STORES = ("set_item", SET_ROWS)
_BINDING = re.compile(r"\bbinding ([A-Za-z_][\w.]*)")


def binding_tensors(func: Function) -> dict[str, str]:
    """Binding name -> `input 'NAME'` or `output 'NAME'`, for every binding that has one.

    A load names its input; a value handed to `set_item` names that output, and a temporary
    names the first output it flows into (walking the bindings backwards from each hand-off).
    """
    inputs = tuple(func.attrs.get("input_names", ()))
    outputs = tuple(func.attrs.get("output_names", ()))
    owner: dict[Var, str] = {}
    for binding in reversed(func.bindings()):
        call = _extern_call(binding.value)
        if call is not None and call[0] in _STORES and call[1] < len(outputs):
            for var in _vars(call[2]):
                owner[var] = f"output {outputs[call[1]]!r}"
        elif binding.var in owner:
            for var in used_vars(binding.value):
                owner.setdefault(var, owner[binding.var])
    for binding in func.bindings():
        call = _extern_call(binding.value)
        if call is not None and call[0] in _LOADS and call[1] < len(inputs):
            owner[binding.var] = f"input {inputs[call[1]]!r}"
    return {var.name_hint: label for var, label in owner.items()}


def _extern_call(value: object) -> tuple[str, int, Call] | None:
    """(extern name, index, call) of a `call_packed` with a constant index, else None."""
    if not isinstance(value, Call) or not isinstance(value.op, ExternFunc) or not value.args:
        return None
    index = value.args[0]
    if not isinstance(index, PrimValue) or not isinstance(index.value, IntImm):
        return None
    return value.op.global_symbol, int(index.value.value), value


def _vars(call: Call) -> list[Var]:
    """The vars a hand-off passes (its tensor argument)."""
    return [arg for arg in call.args[1:] if isinstance(arg, Var)]


def with_tensor(binding: str, tensors: dict[str, str]) -> str:
    """`binding`, followed by its tensor in parentheses when it has one."""
    label = tensors.get(binding)
    return binding if label is None else f"{binding} ({label})"


def name_tensors(message: str, tensors: dict[str, str]) -> str:
    """`message` with each `binding NAME` followed by the tensor NAME belongs to."""
    return _BINDING.sub(lambda m: f"binding {with_tensor(m.group(1), tensors)}", message)
