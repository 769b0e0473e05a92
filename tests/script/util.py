"""Helpers shared by the script tests: round trips and golden comparisons."""

from __future__ import annotations

import textwrap

from lazyparams.ir import IRModule
from lazyparams.ir.structural import assert_structural_equal, structural_hash
from lazyparams.script import parse


def roundtrip(mod: IRModule) -> IRModule:
    """Print `mod`, parse the text back, and check both agree; returns the parsed module."""
    text = mod.script()
    parsed = parse(text)
    assert_structural_equal(parsed, mod)
    assert structural_hash(parsed) == structural_hash(mod)
    assert parsed.script() == text, "printing is not a fixed point of print/parse"
    return parsed


def golden(mod: IRModule, expected: str) -> None:
    """The printed text of `mod` is exactly `expected` (dedented), and it parses back equal."""
    assert mod.script() == textwrap.dedent(expected).lstrip("\n")
    roundtrip(mod)
