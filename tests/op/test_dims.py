"""Dim arithmetic: polynomial equality, provable difference, exact division, slice extents."""

from __future__ import annotations

from lazyparams.ir.prim import FloorDiv, IntImm, PrimVar
from lazyparams.op.dims import (
    dims_differ,
    dims_equal,
    div_dim,
    exact_div,
    product,
    simplify,
    slice_extent,
)

n, m = PrimVar("n"), PrimVar("m")


def test_equality_is_up_to_polynomial_normal_form() -> None:
    assert dims_equal(n * 4, 4 * n)
    assert dims_equal(n + n, n * 2)
    assert dims_equal((n + 1) * 2, n * 2 + 2)
    assert dims_equal(n * m, m * n)
    assert dims_equal(IntImm(3), IntImm(3, "int32"))
    assert not dims_equal(n, m)
    assert not dims_equal(n, IntImm(4))


def test_only_provable_differences_count() -> None:
    assert dims_differ(IntImm(3), IntImm(4))
    assert dims_differ(n + 1, n)
    assert dims_differ(n * 4, n * 8)
    assert not dims_differ(n, IntImm(4))
    assert not dims_differ(n, m)
    assert not dims_differ(n * 2, n * 2)


def test_simplify_and_product() -> None:
    assert simplify((n - 1) - 1) == n - 2
    assert simplify(n + m - n) == m
    assert simplify(n - n) == IntImm(0)
    assert product([n, IntImm(4), IntImm(8)]) == n * 32
    assert product([]) == IntImm(1)


def test_exact_division() -> None:
    assert exact_div(n * 32, IntImm(8)) == n * 4
    assert exact_div(n * m * 6, n * 3) == m * 2
    assert exact_div(n * 4 + 8, IntImm(4)) == n + 2
    assert exact_div(n * 6, IntImm(4)) is None
    assert exact_div(n, m) is None
    assert exact_div(n, IntImm(0)) is None
    assert exact_div(n + m, n + m) == IntImm(1)
    assert div_dim(n, 2) == FloorDiv(n, IntImm(2))


def test_slice_extent_static_is_pythons() -> None:
    for dim in range(0, 7):
        for begin in range(-8, 9, 3):
            for end in range(-8, 9, 2):
                for stride in (-3, -1, 1, 2):
                    expected = len(range(dim)[begin:end:stride])
                    assert slice_extent(IntImm(dim), begin, end, stride) == IntImm(expected)


def test_slice_extent_symbolic() -> None:
    assert slice_extent(n, 1, -1, 1) == n - 2
    assert slice_extent(n, 0, 2**31 - 1, 3) == (n + 2) // 3
    assert slice_extent(n, -1, -(2**31), -1) == n
    assert slice_extent(n, 2, 5, 1) == IntImm(3)
    assert slice_extent(n, 5, 2, 1) == IntImm(0)
