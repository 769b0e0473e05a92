"""The shape of an architecture table: how Hugging Face tensors become llama.cpp's GGUF tensors.

A table lists, per tensor, the Hugging Face name pattern, the GGUF name, the transform llama.cpp
applies and whether the tensor must exist; experts that llama.cpp stacks into one 3-D tensor
per layer have rules of their own; `hparams` name the architecture's own metadata keys.
Where a family needs code (a tensor split, computed metadata), the table names a hook: a plain
function of the family's module, applied by the shared code in one place.
Adding a family is adding a module with one `Architecture`. Imports nothing of the project.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

LAYER = "{bid}"
EXPERT = "{xid}"
DENSE = "dense"
MOE = "moe"


@dataclass(frozen=True, slots=True)
class HookContext:
    """What a tensor hook may read: the Hugging Face tensor's name and config.json (as given)."""

    name: str
    config: Mapping[str, Any]
    config_path: Path


TensorHook = Callable[[Any, HookContext], Any]
"""(the Hugging Face tensor, context) -> the GGUF tensor; raises ConvertError on a bad shape."""

ConfigHook = Callable[[Mapping[str, Any]], dict[str, Any]]
"""config.json -> config.json as llama.cpp's converter rewrites it before writing metadata."""

HParamsHook = Callable[[Mapping[str, Any], Path], Iterable[tuple[str, str, Any]]]
"""(config, its path) -> the family's own metadata after the file type, as (key without the
architecture prefix, GGUF value type name, value); a key written before keeps its place."""

MoeLayersHook = Callable[[Mapping[str, Any], int, Path], frozenset[int]]
"""(config, layer count, config path) -> the layers whose feed-forward is a mixture of experts."""

HParamsWriter = Callable[[Mapping[str, Any], Path, int], Iterable[tuple[str, str, Any]]]
"""(config, its path, general.file_type) -> every hyperparameter and the file type, as (key
with its `{arch}.` or `general.` prefix, GGUF value type name, value), in the converter's order:
for a family whose converter class writes its own keys instead of the shared ones."""

ExtraLayersHook = Callable[[Mapping[str, Any], Path], int]
"""(config, its path) -> how many layers past the config's count the family writes when the
checkpoint holds them (multi-token prediction layers the converter keeps)."""

ExtraTensorsHook = Callable[[Mapping[str, Any], Path], Mapping[str, Any]]
"""(config, its path) -> GGUF name -> float32 numpy vector the converter computes from the
config and writes before the checkpoint's tensors (Phi-3's long-context rope factors)."""


@dataclass(frozen=True, slots=True)
class TensorRule:
    """One Hugging Face tensor -> one GGUF tensor.

    `hf` and `gguf` may hold `{bid}` (the layer). `rope` is "q" or "k" for the rotary
    permutation llama.cpp applies to Hugging Face's q/k projections (their halves of each head
    interleaved back); `keep_f32` forces F32 whatever the output type (llama.cpp keeps MoE
    routers so); `required` tensors must exist for every layer (or once, outside layers).
    `layers` limits a layer rule to the `DENSE` or the `MOE` layers of a model that has both
    (`Architecture.moe_layers`). `hook` computes the GGUF tensor from the Hugging Face one;
    several rules with hooks may share one Hugging Face tensor (a split), in table order.
    """

    hf: str
    gguf: str
    rope: str = ""
    keep_f32: bool = False
    required: bool = True
    layers: str = ""
    hook: TensorHook | None = None

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
    config.json are an error naming them. `choices`, when given, maps the config's string
    values to the numbers llama.cpp stores (its enums); another string is an error.
    """

    key: str
    config_keys: tuple[str, ...]
    kind: str = "UINT32"
    required: bool = False
    choices: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Architecture:
    """What llama.cpp's converter does for one family of Hugging Face architectures.

    `extra_hparams` follow the common hyperparameters (`hparams.COMMON`) as llama.cpp's
    converter writes them after its shared ones; `rope_dimension_count` and `vocab_size` are
    the keys llama's converter adds and others do not. `own_hparams` follow them, then what
    `hparams_hook` yields; `config_hook` rewrites config.json first, as the converter does
    before writing metadata. `moe_layers` says which layers hold experts (None: all, when the
    table has experts); `extra_layers_skipped` leaves out layers past the config's count, as
    the converter leaves out DeepSeek's multi-token-prediction layers. `hparams_writer`, when
    set, writes every hyperparameter itself (after `config_hook`), in place of the shared keys,
    `extra_hparams`, `own_hparams` and `hparams_hook`. `extra_layers` counts the layers past
    the config's count that are written when present, each checked as a whole layer.

    `llama3_rope_freqs` writes llama 3's rope frequency factors (`rope_freqs.weight`) for a
    config whose rope type is llama3, as the converter's classes that generate them do (its
    llama class always does).

    `extra_tensors` computes further tensors from the config, written first in F32;
    `early_hparams` yields keys (as `hparams_hook` does) that the converter writes while it
    makes those tensors, so they follow `general.architecture`, before `general.type`.

    `skipped_prefixes` leaves out tensors whose names start so, as `skipped` those that end so
    (ERNIE's multi-token-prediction tensors, outside the layers).
    """

    gguf_arch: str
    hf_names: tuple[str, ...]
    tensors: tuple[TensorRule, ...]
    experts: tuple[ExpertRule, ...] = ()
    expert_count_keys: tuple[str, ...] = ()
    extra_hparams: tuple[str, ...] = ()
    own_hparams: tuple[HParam, ...] = ()
    skipped: tuple[str, ...] = (".rotary_emb.inv_freq", ".attention.masked_bias")
    config_hook: ConfigHook | None = None
    hparams_hook: HParamsHook | None = None
    moe_layers: MoeLayersHook | None = None
    extra_layers_skipped: bool = False
    llama3_rope_freqs: bool = False
    hparams_writer: HParamsWriter | None = None
    extra_layers: ExtraLayersHook | None = None
    extra_tensors: ExtraTensorsHook | None = None
    early_hparams: HParamsHook | None = None
    skipped_prefixes: tuple[str, ...] = ()


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
