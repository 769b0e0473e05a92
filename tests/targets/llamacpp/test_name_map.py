"""Every architecture table's GGUF names are the ones gguf-py's TensorNameMap gives for the same
Hugging Face names: the map llama.cpp's converter renames tensors with."""

from __future__ import annotations

import gguf
import pytest

from lazyparams.targets.llamacpp.architectures import ARCHITECTURES
from lazyparams.targets.llamacpp.tables import LAYER, Architecture


def _model_arch(name: str) -> gguf.MODEL_ARCH:
    return next(arch for arch, spelled in gguf.MODEL_ARCH_NAMES.items() if spelled == name)


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.hf_names[0])
def test_each_rule_names_its_tensor_as_gguf_py_does(arch: Architecture) -> None:
    names = gguf.get_tensor_name_map(_model_arch(arch.gguf_arch), 2)
    for rule in arch.tensors:
        hf, expected = rule.hf.replace(LAYER, "1"), rule.gguf.replace(LAYER, "1")
        assert names.get_name(hf, try_suffixes=(".weight", ".bias")) == expected, rule
