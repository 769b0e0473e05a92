"""The architectures the `gguf` recipe knows, looked up by config.json's `architectures`.

Imports the tables only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp import (
    cohere2,
    command_r,
    deepseek2,
    ernie45moe,
    exaone,
    gemma,
    gemma2,
    gemma3,
    glm4,
    glm4moe,
    gptoss,
    granite,
    granitemoe,
    llama,
    llama4,
    mixtral,
    olmo2,
    olmoe,
    phi2,
    phi3,
    qwen2,
    qwen2moe,
    qwen3,
    qwen3moe,
    smollm3,
    stablelm,
    starcoder2,
)
from lazyparams.targets.llamacpp.tables import Architecture

ARCHITECTURES: tuple[Architecture, ...] = (
    llama.ARCH,
    mixtral.ARCH,
    qwen2.ARCH,
    qwen3.ARCH,
    qwen2moe.ARCH,
    qwen3moe.ARCH,
    deepseek2.ARCH,
    olmo2.ARCH,
    glm4moe.ARCH,
    olmoe.ARCH,
    ernie45moe.ARCH,
    llama4.ARCH,
    gptoss.ARCH,
    smollm3.ARCH,
    command_r.ARCH,
    cohere2.ARCH,
    starcoder2.ARCH,
    gemma.ARCH,
    gemma2.ARCH,
    gemma3.ARCH,
    phi3.ARCH,
    granite.ARCH,
    granitemoe.ARCH,
    phi2.ARCH,
    stablelm.ARCH,
    glm4.ARCH,
    exaone.ARCH,
)
BY_HF_NAME: dict[str, Architecture] = {
    name: arch for arch in ARCHITECTURES for name in arch.hf_names
}
SUPPORTED: tuple[str, ...] = tuple(sorted(BY_HF_NAME))
GUIDE = "docs/adding-an-architecture.md"


def architecture_of(config: Mapping[str, Any], config_path: Path) -> tuple[str, Architecture]:
    """The Hugging Face architecture name in `config` and its table; ConvertError otherwise."""
    names = config.get("architectures")
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        raise ConvertError(
            f"{config_path}: expected 'architectures' to list the model class "
            f"(one of {', '.join(SUPPORTED)}), got {names!r}"
        )
    arch = BY_HF_NAME.get(names[0])
    if arch is None:
        raise ConvertError(
            f"{config_path}: architecture {names[0]!r} is not supported by the gguf recipe; "
            f"supported: {', '.join(SUPPORTED)} (a family is added as one module: see "
            f"{GUIDE} in the lazyparams repository)"
        )
    return names[0], arch
