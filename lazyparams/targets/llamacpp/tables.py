"""The shape of an architecture table: how Hugging Face tensors become llama.cpp's GGUF tensors.

A table lists, per tensor, the Hugging Face name pattern, the GGUF name, the transform llama.cpp
applies and whether the tensor must exist; experts that llama.cpp stacks into one 3-D tensor
per layer have rules of their own; `hparams` name the architecture's own metadata keys.
Adding a family is adding a module with one `Architecture`. Imports nothing of the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

LAYER = "{bid}"
EXPERT = "{xid}"


@dataclass(frozen=True, slots=True)
class TensorRule:
    """One Hugging Face tensor -> one GGUF tensor.

    `hf` and `gguf` may hold `{bid}` (the layer). `rope` is "q" or "k" for the rotary
    permutation llama.cpp applies to Hugging Face's q/k projections (their halves of each head
    interleaved back); `keep_f32` forces F32 whatever the output type (llama.cpp keeps MoE
    routers so); `required` tensors must exist for every layer (or once, outside layers).
    """

    hf: str
    gguf: str
    rope: str = ""
    keep_f32: bool = False
    required: bool = True

    @property
    def per_layer(self) -> bool:
        """Whether the rule repeats for every layer."""
        return LAYER in self.hf


@dataclass(frozen=True, slots=True)
class ExpertRule:
    """Experts `{xid}` of layer `{bid}` stacked along a new first axis into one GGUF tensor.

    `hf` holds both `{bid}` and `{xid}`, `gguf` only `{bid}`; every layer must hold experts
    0..n-1 of each rule, n as config.json says.
    """

    hf: str
    gguf: str


@dataclass(frozen=True, slots=True)
class HParam:
    """A GGUF metadata key `{arch}.<key>` read from the first config key present.

    `kind` is the GGUF value type's name (UINT32, FLOAT32, ...); `required` keys missing from
    config.json are an error naming them.
    """

    key: str
    config_keys: tuple[str, ...]
    kind: str = "UINT32"
    required: bool = False


@dataclass(frozen=True, slots=True)
class Architecture:
    """What llama.cpp's converter does for one family of Hugging Face architectures.

    `extra_hparams` follow the common hyperparameters (`hparams.COMMON`) as llama.cpp's
    converter writes them after its shared ones; `rope_dimension_count` and `vocab_size` are
    the keys llama's converter adds and others do not.
    """

    gguf_arch: str
    hf_names: tuple[str, ...]
    tensors: tuple[TensorRule, ...]
    experts: tuple[ExpertRule, ...] = ()
    expert_count_keys: tuple[str, ...] = ()
    extra_hparams: tuple[str, ...] = ()
    skipped: tuple[str, ...] = (".rotary_emb.inv_freq", ".attention.masked_bias")


@cache
def compiled_rules(
    arch: Architecture,
) -> tuple[tuple[re.Pattern[str], TensorRule | ExpertRule], ...]:
    """Each rule of `arch` with its Hugging Face pattern as a regex (named groups bid, xid)."""
    rules: tuple[TensorRule | ExpertRule, ...] = (*arch.tensors, *arch.experts)
    return tuple((_regex(rule.hf), rule) for rule in rules)


def _regex(pattern: str) -> re.Pattern[str]:
    text = re.escape(pattern).replace(re.escape(LAYER), r"(?P<bid>\d+)")
    return re.compile(text.replace(re.escape(EXPERT), r"(?P<xid>\d+)") + r"\Z")


def layer_tensors(prefix: str, rules: tuple[tuple[str, str, str], ...]) -> tuple[TensorRule, ...]:
    """Rules for `{prefix}.{bid}.<hf>` -> `blk.{bid}.<gguf>` from (hf, gguf, rope) triples."""
    return tuple(
        TensorRule(f"{prefix}.{LAYER}.{hf}", f"blk.{LAYER}.{gguf}", rope)
        for hf, gguf, rope in rules
    )
