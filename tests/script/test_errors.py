"""Malformed scripts: each ParseError names file, line and column and says what was expected."""

from __future__ import annotations

import textwrap

import pytest

from lazyparams.errors import ParseError
from lazyparams.script import parse

HEAD = """\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32")) -> R.Tensor((3, 4), "float32"):
"""
"""Module prefix; a case's body lines start at line 5, indented by 8 (column 9)."""


def relax(*body: str) -> str:
    return HEAD + textwrap.indent("\n".join(body), " " * 8) + "\n"


KERNEL = """\
@I.ir_module
class Module:
    @T.prim_func
    def k(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32")):
"""


def kernel(*body: str) -> str:
    return KERNEL + textwrap.indent("\n".join(body), " " * 8) + "\n"


CASES = [
    pytest.param(
        relax("y = R.transpose(x)", "return y"),
        (5, 13),
        "unknown op R.transpose; expected one of R.abs, R.acos, R.add, R.assert_op, R.astype",
        id="unknown-op",
    ),
    pytest.param(
        relax("y = R.add(x, z)", "return y"),
        (5, 22),
        "undefined variable 'z'; expected a parameter or a bound var",
        id="undefined-var",
    ),
    pytest.param(
        relax("y = R.permute_dims(x, axis=[1, 0])", "return y"),
        (5, 31),
        "R.permute_dims: expected one of x=, axes=, sinfo_args=, got axis=",
        id="unknown-keyword",
    ),
    pytest.param(
        relax("y: R.Tensr((3,), 'float32') = x", "return y"),
        (5, 12),
        "expected R.Tensor(...), R.Tuple(...), R.Object, R.Prim(...), R.Shape(...), "
        "R.Callable(...) or a dtype such as T.int64, got R.Tensr((3,), 'float32')",
        id="bad-struct-info",
    ),
    pytest.param(
        relax("y: R.Tensor((3, 4), 'flot32') = x", "return y"),
        (5, 29),
        "R.Tensor: expected a dtype such as \"float32\", got 'flot32'",
        id="unknown-dtype",
    ),
    pytest.param(
        relax("y = R.add(x, R.permute_dims(x))", "return y"),
        (5, 13),
        "R.add: expected shapes that broadcast, got (3, 4) and (4, 3)",
        id="op-rejects-operands",
    ),
    pytest.param(
        relax(
            "with R.dataflow():", "    lv = R.astype(x, 'float16')", "    R.output()", "return lv"
        ),
        (8, 16),
        "dataflow var 'lv' is used outside its dataflow block (line 5); expected it listed in "
        "R.output(...)",
        id="dataflow-var-escapes",
    ),
    pytest.param(
        relax("with R.dataflow():", "    lv = x", "    R.output(gv)", "return lv"),
        (7, 22),
        "R.output: expected a var bound in this dataflow block, got 'gv'",
        id="output-not-bound",
    ),
    pytest.param(
        relax("y = R.astype(x, 'float16')"),
        (5, 9),
        "function main: expected return <value> as the last statement",
        id="missing-return",
    ),
    pytest.param(
        relax("y = cls.nothing(x)", "return y"),
        (5, 13),
        "expected a Relax expression or cls.<function>, got cls.nothing",
        id="cls-without-module-alias",
    ),
    pytest.param(
        relax(
            "cls = Module",
            "y = R.call_tir(cls.nothing, (x,), out_sinfo=R.Tensor((3,), 'float32'))",
            "return y",
        ),
        (6, 24),
        "module Module has no function 'nothing'; expected one of main",
        id="unknown-function",
    ),
    pytest.param(
        relax("y = R.reshape(x, (m, 3))", "return y"),
        (5, 27),
        "undefined symbolic variable 'm'; expected it declared as m = T.int64() at the start "
        'of the function, or written as "m"',
        id="undeclared-symbol",
    ),
    pytest.param(
        relax("y: R.Tensor(('n +',), 'float32') = x", "return y"),
        (5, 22),
        "expected a dim expression inside the string, got 'n +'",
        id="bad-string-dim",
    ),
    pytest.param(
        relax("y = 3.5", "return y"),
        (5, 13),
        "expected a Relax expression (write R.prim_value(...) or R.const(...)), got 3.5",
        id="bare-float",
    ),
    pytest.param(
        relax("for i in range(3):", "    pass", "return x"),
        (5, 9),
        "expected a binding (x = ...), with R.dataflow():, if/else, R.func_attr({...}), "
        "cls = Module or return, got for i in range(3): pass",
        id="loop-in-relax",
    ),
    pytest.param(
        kernel("for i in T.grid(4, 4):", "    B[i] = A[i, 0]"),
        (5, 18),
        "T.grid: expected 1 extents for 1 loop variables, got 2",
        id="grid-arity",
    ),
    pytest.param(
        kernel("for i in range(4):", "    B[i] = A[i]"),
        (6, 20),
        "expected 2 indices for buffer A, got 1",
        id="buffer-rank",
    ),
    pytest.param(
        kernel(
            "for i in range(4):",
            "    with T.block('b'):",
            "        vi, vj = T.axis.remap('SS', [i, j])",
        ),
        (7, 49),
        "undefined name 'j'; expected a loop, block or symbolic variable",
        id="remap-unknown-loop-var",
    ),
    pytest.param(
        kernel("for i in range(4):", "    if 0 < i < 3:", "        B[i] = A[i, i]"),
        (6, 16),
        "expected a single comparison such as a < b, got 0 < i < 3",
        id="chained-comparison",
    ),
    pytest.param(
        kernel("for i in range(4):", "    B[i] = T.sin(A[i, i])"),
        (6, 20),
        "expected a T.* scalar function, got unknown T.sin",
        id="unknown-intrinsic",
    ),
    pytest.param(
        kernel("B = A"),
        (5, 9),
        "expected a for loop, with T.block(...):, a buffer store (A[i] = ...) or an if "
        "statement, got B = A",
        id="tir-assign-name",
    ),
    pytest.param(
        "@I.ir_module\nclass Module:\n    @R.function\n    def main(x):\n        return x\n",
        (4, 14),
        'parameter x: expected a struct info annotation such as x: R.Tensor((3,), "float32")',
        id="missing-annotation",
    ),
    pytest.param(
        "@I.ir_module\nclass Module:\n    @R.func\n    def main() -> R.Object:\n        return x\n",
        (3, 6),
        "function main: expected @R.function or @T.prim_func, got @R.func",
        id="unknown-decorator",
    ),
    pytest.param(
        "@I.ir_module\nclass Module:\n    def main(:\n",
        (3, 14),
        "invalid Python syntax",
        id="syntax-error",
    ),
]


@pytest.mark.parametrize(("text", "where", "message"), CASES)
def test_malformed_script(text: str, where: tuple[int, int], message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text, file="bad.py")
    err = info.value
    assert message in err.reason
    assert (err.file, err.line, err.col) == ("bad.py", *where), str(err)
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"bad.py:{where[0]}:{where[1]}: ")
    assert rendered[1].strip() == text.splitlines()[where[0] - 1].strip()
    assert rendered[2].index("^") == 4 + where[1] - 1


def test_parse_error_is_a_lazyparams_error() -> None:
    from lazyparams.errors import LazyParamsError

    assert issubclass(ParseError, LazyParamsError)
