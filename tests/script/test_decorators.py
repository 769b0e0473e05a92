"""The decorators: standalone functions, classes in test bodies, aliases, evaluated annotations."""

from __future__ import annotations

import inspect

import pytest

from lazyparams.errors import ParseError
from lazyparams.ir import (
    FuncStructInfo,
    Function,
    IRModule,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.ir.structural import assert_structural_equal
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.script import relax as rx
from lazyparams.script import tir as T
from lazyparams.script.markers import ScriptFunction, Unchecked
from lazyparams.tir import Buffer, PrimFunc


def _line_of(marker: str) -> int:
    """The line of this file holding `marker` (after the line that defines this helper)."""
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()  # type: ignore[arg-type]
    return next(i for i, text in enumerate(lines, 1) if marker in text and "_line_of(" not in text)


@R.function
def standalone(x: R.Tensor((2, 3), "float32")) -> R.Tensor((3, 2), "float32"):
    y = R.permute_dims(x, axes=[1, 0])
    return y


@R.function(pure=False)
def impure(x: R.Tensor((2,), "float32")) -> R.Tuple:
    k = R.vm.kill_object(x)
    return k


@T.prim_func
def copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = A[i]


@rx.function
def aliased(x: rx.Tensor((2,), "float32")) -> rx.Tensor((2,), "float16"):
    y = rx.astype(x, "float16")
    return y


def test_standalone_definitions_parse_to_functions() -> None:
    assert isinstance(standalone, Function) and standalone.is_pure
    assert standalone.ret_struct_info == TensorStructInfo((3, 2), "float32")
    assert isinstance(impure, Function) and not impure.is_pure
    assert isinstance(copy, PrimFunc) and [b.name for b in copy.params] == ["A", "B"]


def test_a_namespace_imported_under_another_name_is_recognised() -> None:
    assert isinstance(aliased, Function)
    assert aliased.ret_struct_info == TensorStructInfo((2,), "float16")


def test_module_class_inside_a_function_matches_its_text() -> None:
    @I.ir_module
    class Local:
        I.module_attrs({"origin": "test"})

        @R.function
        def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
            n = T.int64()
            y: R.Tensor((n,), "float32") = R.add(x, x)
            return y

    assert isinstance(Local, IRModule) and Local.attrs == {"origin": "test"}
    text = """
@I.ir_module
class Local:
    I.module_attrs({"origin": "test"})

    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        y: R.Tensor((n,), "float32") = R.add(x, x)
        return y
"""
    assert_structural_equal(Local, parse(text))


def test_error_in_a_class_names_this_file_and_line() -> None:
    with pytest.raises(ParseError) as info:

        @I.ir_module
        class Broken:
            @R.function
            def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
                y = R.no_such_op(x)  # the error is here
                return y

    err = info.value
    assert err.file == __file__
    assert err.line == _line_of("# the error is here")
    assert err.col == 21 and "unknown op R.no_such_op" in err.reason


def test_invalid_annotation_is_reported_by_the_parser_with_its_location() -> None:
    assert isinstance(R.Tensor((2,), "flot32"), Unchecked)
    with pytest.raises(ParseError) as info:

        @I.ir_module
        class Broken:
            @R.function
            def main(x: R.Tensor((2,), "flot32")) -> R.Object:  # bad dtype
                return x

    assert info.value.line == _line_of("# bad dtype")
    assert "R.Tensor: expected a dtype such as \"float32\", got 'flot32'" in info.value.reason


def test_annotations_evaluate_to_struct_info() -> None:
    assert R.Tensor((3, 4), dtype="float32") == TensorStructInfo((3, 4), "float32")
    assert R.Tensor("float16", ndim=2) == TensorStructInfo(None, "float16", 2)
    assert R.Tuple() == TupleStructInfo(()) and R.Object == ObjectStructInfo()
    assert R.Any is R.Object
    assert R.Prim("int32") == PrimStructInfo("int32")
    assert R.Shape(ndim=2) == ShapeStructInfo(None, 2)
    callable_ = R.Callable([R.Prim("int64")], R.Object, purity=False)
    assert callable_ == FuncStructInfo((PrimStructInfo("int64"),), ObjectStructInfo(), False)
    assert isinstance(T.Buffer((3,), "float32"), Buffer)


def test_decorators_inside_a_plain_class_are_harmless_markers() -> None:
    class Plain:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Object:
            return x

    assert isinstance(Plain.__dict__["main"], ScriptFunction)


def test_a_private_function_is_marked_and_prints_its_decorator_back() -> None:
    @I.ir_module
    class Module:
        @R.function(pure=False, private=True)
        def helper(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

    text = Module.script()
    assert "@R.function(pure=False, private=True)" in text and "func_attr" not in text
    assert not Module["helper"].is_public and Module["main"].is_public
    assert_structural_equal(parse(text), Module)
