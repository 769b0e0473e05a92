"""The pass protocol: a `Pass` maps an IRModule to a new IRModule and never mutates its input.

`FunctionPass` rewrites Relax functions one at a time, `NamedFunctionPass` those selected by
name; `Sequential` chains passes. Imports `ir` and the passes' own helpers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from lazyparams.errors import TransformError
from lazyparams.ir import Function, IRModule
from lazyparams.transform.util import func_names_arg, select_functions


class Pass(ABC):
    """A module-to-module transformation; an instance is called as `pass_(mod)`."""

    @property
    def name(self) -> str:
        """The pass's name, used in error messages."""
        return type(self).__name__

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TransformError(f"{self.name}: expected an IRModule, got {type(mod).__name__}")
        return self.transform_module(mod)

    @abstractmethod
    def transform_module(self, mod: IRModule) -> IRModule:
        """The rewritten module (a new object; `mod` itself is left as it was)."""

    def __repr__(self) -> str:
        return f"{self.name}()"


class FunctionPass(Pass):
    """A pass that rewrites some Relax functions of a module independently of each other."""

    def selected(self, mod: IRModule) -> list[str]:
        """Names of the functions to rewrite (by default every Relax function)."""
        return [name for name, _ in mod.relax_functions()]

    def transform_module(self, mod: IRModule) -> IRModule:
        result = mod
        for name in self.selected(mod):
            func = mod[name]
            assert isinstance(func, Function)
            new_func = self.transform_function(name, func)
            if new_func is not func:
                result = result.with_function(name, new_func)
        return result

    @abstractmethod
    def transform_function(self, name: str, func: Function) -> Function:
        """The rewritten function (`func` itself when nothing changes)."""


class NamedFunctionPass(FunctionPass):
    """A FunctionPass over the Relax functions named in `func_names`, by default those whose
    name ends with `transform_params` (the functions the lazy passes are meant for), or, with
    `every_public=True`, every public Relax function, as TVM selects them."""

    def __init__(self, func_names: Sequence[str] | None = None, every_public: bool = False) -> None:
        self.func_names = func_names_arg(func_names, self.name)
        if not isinstance(every_public, bool) or (every_public and func_names is not None):
            raise TransformError(
                f"{self.name}: expected every_public=True without func_names, or a bool, got "
                f"every_public={every_public!r} with func_names={func_names!r}"
            )
        self.every_public = every_public

    def selected(self, mod: IRModule) -> list[str]:
        if self.every_public:
            return [name for name, func in mod.relax_functions() if func.is_public]
        return select_functions(mod, self.func_names, self.name)


class Sequential(Pass):
    """Runs passes one after the other: `Sequential([a, b])(mod) == b(a(mod))`."""

    def __init__(self, passes: Sequence[Pass]) -> None:
        if isinstance(passes, Pass) or not isinstance(passes, Sequence):
            raise TransformError(
                f"Sequential: expected a list of passes, got {type(passes).__name__}"
            )
        for i, item in enumerate(passes):
            if not isinstance(item, Pass):
                raise TransformError(
                    f"Sequential: expected passes[{i}] to be a Pass, got {type(item).__name__}"
                )
        self.passes: tuple[Pass, ...] = tuple(passes)

    def transform_module(self, mod: IRModule) -> IRModule:
        for item in self.passes:
            mod = item(mod)
        return mod

    def __repr__(self) -> str:
        return f"Sequential([{', '.join(repr(p) for p in self.passes)}])"
