"""Every architecture table's GGUF names are the ones gguf-py's TensorNameMap gives for the same
Hugging Face names: the map llama.cpp's converter renames tensors with."""

from __future__ import annotations

import gguf
import pytest

from lazyparams.targets.llamacpp.architectures import ARCHITECTURES
from lazyparams.targets.llamacpp.tables import EXPERT, LAYER, Architecture

# the converter renames these before it looks the name up (in every architecture)
_RENAMED = (("e_score_correction_bias", "e_score_correction.bias"),)


def _model_arch(name: str) -> gguf.MODEL_ARCH:
    return next(arch for arch, spelled in gguf.MODEL_ARCH_NAMES.items() if spelled == name)


def _as_looked_up(hf: str) -> str:
    for old, new in _RENAMED:
        hf = hf.replace(old, new)
    return hf.replace(LAYER, "1")


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.hf_names[0])
def test_each_rule_names_its_tensor_as_gguf_py_does(arch: Architecture) -> None:
    names = gguf.get_tensor_name_map(_model_arch(arch.gguf_arch), 2)
    for rule in arch.tensors:
        if rule.hook is not None:
            continue  # a hook's tensors are checked below: its own name is not looked up
        hf, expected = _as_looked_up(rule.hf), rule.gguf.replace(LAYER, "1")
        assert names.get_name(hf, try_suffixes=(".weight", ".bias")) == expected, rule
    for expert in arch.experts:
        # the converter looks a stack up by its members' name without the expert number
        hf = _as_looked_up(expert.hf.replace(f".{EXPERT}", ""))
        assert names.get_name(hf, try_suffixes=(".weight",)) == expert.gguf.replace(LAYER, "1")


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.hf_names[0])
def test_hooked_tensors_are_the_architectures_own(arch: Architecture) -> None:
    """A hook's output (DeepSeek's attn_k_b, attn_v_b) is a tensor llama.cpp's architecture
    lists, in gguf-py's table of its tensors."""
    model_arch = _model_arch(arch.gguf_arch)
    known = {gguf.TENSOR_NAMES[t].format(bid=1) for t in gguf.MODEL_TENSORS[model_arch]}
    for rule in arch.tensors:
        if rule.hook is not None:
            assert rule.gguf.replace(LAYER, "1").rsplit(".", 1)[0] in known, rule
