"""R.nn.conv2d: struct info as TVM infers it (symbolic spatial dims included), attrs as TVM
prints them, refusals naming the op, and a direct evaluation on the VM."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import StructInfoError
from lazyparams.ir import Var, struct_info_of
from lazyparams.ir.describe import show_dim
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op import conv2d
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R


def _tensor(name: str, shape: tuple[object, ...], dtype: str = "float32") -> Var:
    dims = tuple(PrimVar(d) if isinstance(d, str) else d for d in shape)
    return Var(name, TensorStructInfo(dims, dtype))  # type: ignore[arg-type]


def _shape(call: object) -> str:
    sinfo = struct_info_of(call)  # type: ignore[arg-type]
    assert isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None
    return str([show_dim(d) for d in sinfo.shape])


def test_same_padding_keeps_the_spatial_dims_even_symbolic_ones() -> None:
    call = conv2d(_tensor("x", (1, 3, 224, "n")), _tensor("w", (16, 3, 3, 3)), padding=(1, 1))
    assert _shape(call) == "['1', '16', '224', 'n']"
    assert call.attrs["padding"] == (1, 1, 1, 1)
    assert call.attrs["out_layout"] == "NCHW"


def test_strides_dilation_and_groups_shape_the_output() -> None:
    call = conv2d(
        _tensor("x", (2, 4, 9, 8)),
        _tensor("w", (6, 2, 3, 3)),
        strides=2,
        dilation=(1, 2),
        groups=2,
    )
    assert _shape(call) == "['2', '6', '4', '2']"


@pytest.mark.parametrize(
    ("kwargs", "weight", "expected"),
    [
        ({"data_layout": "NHWC"}, (4, 3, 3, 3), "expected data_layout='NCHW'"),
        ({}, (4, 5, 3, 3), "group\\(s\\) of the kernel's 5 input channels"),
        ({}, (4, 3, 9, 3), "to fit the padded input 8"),
        ({"padding": (1, 2, 3)}, (4, 3, 3, 3), "expected padding as 1, 2 or 4 ints"),
        ({"strides": 0}, (4, 3, 3, 3), "expected strides as one or two positive ints"),
    ],
)
def test_bad_convolutions_are_refused_naming_the_op(
    kwargs: dict[str, object], weight: tuple[int, ...], expected: str
) -> None:
    with pytest.raises(StructInfoError, match=f"R.nn.conv2d: .*{expected}"):
        conv2d(_tensor("x", (1, 3, 8, 8)), _tensor("w", weight), **kwargs)


@I.ir_module
class Conv:
    @R.function
    def main(x: R.Tensor((2, 4, 7, 6), "float32"), w: R.Tensor((6, 2, 3, 2), "float32")):
        y = R.nn.conv2d(x, w, strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), groups=2)
        return y


def _reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The same convolution by explicit loops over outputs."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 2), (0, 1)))
    out = np.zeros((2, 6, 4, 5))
    for n in range(2):
        for o in range(6):
            group = o // 3
            for i in range(4):
                for j in range(5):
                    window = padded[n, group * 2 : group * 2 + 2, 2 * i : 2 * i + 3, j : j + 3 : 2]
                    out[n, o, i, j] = np.sum(window * w[o])
    return out.astype(np.float32)


def test_the_vm_evaluates_a_grouped_strided_dilated_convolution() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 6)).astype("float32")
    w = rng.standard_normal((6, 2, 3, 2)).astype("float32")
    got = VirtualMachine(Conv)["main"](x, w)
    assert got.shape == (2, 6, 4, 5) and got.dtype == np.float32
    np.testing.assert_allclose(got, _reference(x, w), rtol=1e-5, atol=1e-5)


def test_tvm_reads_our_print_and_infers_the_same_shape() -> None:
    pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    from tvm.script import from_source

    theirs = from_source(Conv.script(flavor="tvm"))
    ret = theirs["main"].ret_ty
    assert [int(d) for d in ret.shape] == [2, 6, 4, 5]
