"""Output names that npz, .npy folders or GGUF cannot store are refused, naming the tensor."""

from __future__ import annotations

import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import TensorInfo
from lazyparams.io.output_formats import output_format


def check_output_names(where: str, names: list[str], format: str) -> None:
    """The registered format's check, as a conversion runs it before any data."""
    output_format(format).check(where, [TensorInfo.of(name, (1,), "float32") for name in names])


UNSAFE = [
    ("../../x", "'..'"),
    ("a/../../b", "'..'"),
    ("/etc/passwd", "absolute path"),
    ("a//b", "empty"),
    ("a/", "empty"),
    ("./a", "'.'"),
    ("a\\b", "character"),
    ("a\nb", "character"),
    ("a\x00b", "NUL"),
    ("caf\udce9", "lone surrogate"),
]


@pytest.mark.parametrize("format", ["npz", "npy"])
@pytest.mark.parametrize(("name", "problem"), UNSAFE)
def test_unsafe_file_and_member_names_are_refused(format: str, name: str, problem: str) -> None:
    with pytest.raises(CheckpointError, match=problem) as caught:
        check_output_names("out", ["fine", name], format)
    assert repr(name) in str(caught.value)


@pytest.mark.parametrize(("name", "problem"), UNSAFE[-2:])
def test_gguf_refuses_names_a_c_string_cannot_hold(name: str, problem: str) -> None:
    with pytest.raises(CheckpointError, match=problem):
        check_output_names("out.gguf", [name], "gguf")


def test_gguf_refuses_names_past_llama_cpp_s_limit() -> None:
    check_output_names("out.gguf", ["x" * 63, "../odd but a plain string"], "gguf")
    with pytest.raises(
        CheckpointError,
        match=r"'y{64}' cannot be a GGUF tensor name: it is 64 bytes long; expected .* at most 63",
    ):
        check_output_names("out.gguf", ["y" * 64], "gguf")


@pytest.mark.parametrize(
    ("first", "second"),
    [("Embed", "embed"), ("caf\u00e9", "cafe\u0301"), ("a.npy/b", "a"), ("A", "a.npy/x")],
)
def test_npy_folder_names_that_collide_on_disk_are_refused(first: str, second: str) -> None:
    with pytest.raises(CheckpointError, match="ignoring case") as caught:
        check_output_names("out", [first, second], "npy")
    assert repr(first) in str(caught.value) and repr(second) in str(caught.value)
    check_output_names("out.npz", [first, second], "npz")  # zip member names keep case


def test_ordinary_names_pass() -> None:
    names = ["model.layers.0.self_attn.q_proj.weight", "a/b", "a.b", "a"]
    for format in ("npz", "npy", "gguf"):
        check_output_names("out", names, format)
