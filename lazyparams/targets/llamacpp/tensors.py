"""The GGUF tensors of a Hugging Face checkpoint: names matched to a table, checked, transformed.

`gguf_tensors` runs at trace time over the checkpoint's symbolic tensors, so every check (a
tensor no rule knows, a missing layer, a head count that does not divide the rows, an expert
count that disagrees) fails before any data is read. Outputs come in the order llama.cpp's
converter writes them: the checkpoint's order, a stacked expert tensor where its layer's last
expert appears. Imports the frontend and the tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.llamacpp.hparams import (
    HEAD_COUNT_KEYS,
    HIDDEN_KEYS,
    KV_HEAD_COUNT_KEYS,
    LAYER_COUNT_KEYS,
    first_present,
    head_dim,
)
from lazyparams.targets.llamacpp.tables import (
    DENSE,
    LAYER,
    MOE,
    Architecture,
    ExpertRule,
    HookContext,
    TensorRule,
    compiled_rules,
)


@dataclass(frozen=True, slots=True)
class Planned:
    """One GGUF output: its name, the checkpoint tensors it is made of and its rule."""

    name: str
    sources: tuple[str, ...]
    rule: TensorRule | ExpertRule
    bid: int | None


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The config facts the tensors are checked against, and config.json for tensor hooks.

    `heads` and `kv_heads` are the counts llama.cpp will read from the file (after the
    architecture's config hook); `moe_layers` the layers that hold experts; `extra_layers`
    how many layers past `layers` are written when the checkpoint holds them.
    """

    layers: int
    heads: int
    kv_heads: int
    experts: int
    config_path: Path
    moe_layers: frozenset[int] = frozenset()
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)
    extra_layers: int = 0


def model_shape(arch: Architecture, config: Mapping[str, Any], config_path: Path) -> ModelShape:
    """Layer, head and expert counts from config.json, each checked to be a positive int."""
    layers = _count(config, LAYER_COUNT_KEYS, config_path)
    written = arch.config_hook(config) if arch.config_hook is not None else config
    heads = _count(written, HEAD_COUNT_KEYS, config_path)
    kv = first_present(written, KV_HEAD_COUNT_KEYS)
    kv_heads = heads if kv is None else _count(written, KV_HEAD_COUNT_KEYS, config_path)
    # a family may store its experts stacked already: it names the count key, no ExpertRule
    counted = arch.experts or arch.expert_count_keys
    experts = _count(config, arch.expert_count_keys, config_path) if counted else 0
    extra = arch.extra_layers(config, config_path) if arch.extra_layers is not None else 0
    moe = _moe_layers(arch, config, layers + extra, config_path)
    return ModelShape(layers, heads, kv_heads, experts, config_path, moe, config, extra)


def _count(config: Mapping[str, Any], keys: tuple[str, ...], config_path: Path) -> int:
    value = first_present(config, keys)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConvertError(f"{config_path}: expected a positive integer {keys[0]!r}, got {value!r}")
    return value


def _moe_layers(
    arch: Architecture, config: Mapping[str, Any], layers: int, config_path: Path
) -> frozenset[int]:
    """The layers holding experts: those the family says (its experts may come stacked
    already, without expert rules), else all layers of a table with expert rules."""
    if arch.moe_layers is not None:
        return arch.moe_layers(config, layers, config_path)
    return frozenset(range(layers)) if arch.experts else frozenset()


def plan_tensors(arch: Architecture, names: list[str], shape: ModelShape) -> list[Planned]:
    """Every GGUF output of the checkpoint tensors `names`, in llama.cpp's order, checked
    against the table and the config (missing or extra layers, expert counts)."""
    singles: list[Planned] = []
    experts: dict[tuple[int, int], dict[int, str]] = {}
    order: list[tuple[str, Planned | int]] = []
    for name in names:
        for rule, bid, xid in _matches(arch, name, shape):
            if isinstance(rule, ExpertRule):
                assert bid is not None and xid is not None
                experts.setdefault((arch.experts.index(rule), bid), {})[xid] = name
                order.append((name, bid))
                continue
            _check_layer_kind(rule, name, bid, shape)
            singles.append(Planned(_gguf_name(rule.gguf, bid), (name,), rule, bid))
            order.append((name, singles[-1]))
    _check_required(arch, singles, shape)
    stacked = _stacked(arch, experts, shape)
    return list(_in_order(order, stacked))


_Match = tuple[TensorRule | ExpertRule, int | None, int | None]
_LAYER_PREFIX = re.compile(r"model\.layers\.(\d+)\.")


def converter_name(name: str) -> str:
    """The name the converter looks a checkpoint tensor up by: without `language_model.`
    (a multimodal checkpoint's text model), which it drops from every name."""
    return name.replace("language_model.", "")


def _matches(arch: Architecture, name: str, shape: ModelShape) -> list[_Match]:
    """The rules `name` falls under (several: a split), or none for a skipped tensor."""
    skipped = name.endswith(arch.skipped) or name.startswith(arch.skipped_prefixes)
    if skipped or _past_last_layer(arch, converter_name(name), shape):
        return []
    found: list[_Match] = []
    for pattern, rule in compiled_rules(arch):
        match = pattern.match(converter_name(name))
        if match is None:
            continue
        groups = match.groupdict()
        bid = int(groups["bid"]) if "bid" in groups else None
        if bid is not None and bid >= shape.layers + shape.extra_layers:
            raise ConvertError(
                f"tensor {name!r} is in layer {bid}, but {shape.config_path} says the model "
                f"has {shape.layers + shape.extra_layers} layers"
            )
        found.append((rule, bid, int(groups["xid"]) if "xid" in groups else None))
    if not found:
        raise ConvertError(
            f"tensor {name!r} matches nothing llama.cpp's {arch.gguf_arch} architecture has "
            f"(read from {shape.config_path}); expected names such as {arch.tensors[0].hf!r}"
        )
    return found


def _past_last_layer(arch: Architecture, name: str, shape: ModelShape) -> bool:
    """Whether `name` is in a layer past the config's count that the family leaves out."""
    match = _LAYER_PREFIX.match(name) if arch.extra_layers_skipped else None
    return match is not None and int(match.group(1)) >= shape.layers


def _check_layer_kind(rule: TensorRule, name: str, bid: int | None, shape: ModelShape) -> None:
    """A rule for dense (or expert) layers only must not match a tensor of the other kind."""
    if bid is None or not rule.layers or _layer_kind(bid, shape) == rule.layers:
        return
    raise ConvertError(
        f"tensor {name!r} belongs to a {_KIND_WORDS[rule.layers]} feed-forward, but "
        f"{shape.config_path} makes layer {bid} a {_KIND_WORDS[_layer_kind(bid, shape)]} layer"
    )


_KIND_WORDS = {DENSE: "dense", MOE: "mixture-of-experts"}


def _layer_kind(bid: int, shape: ModelShape) -> str:
    return MOE if bid in shape.moe_layers else DENSE


def _gguf_name(template: str, bid: int | None) -> str:
    return template if bid is None else template.replace(LAYER, str(bid))


def _check_required(arch: Architecture, found: list[Planned], shape: ModelShape) -> None:
    present = {(planned.rule, planned.bid) for planned in found}
    # a layer past the config's count is checked as a whole where the checkpoint has it
    kept = sorted({p.bid for p in found if p.bid is not None and p.bid >= shape.layers})
    for rule in arch.tensors:
        if not rule.required:
            continue
        for bid in _layers_of(rule, shape, kept) if rule.per_layer else (None,):
            if (rule, bid) not in present:
                hf = _gguf_name(rule.hf, bid)
                raise ConvertError(
                    f"tensor {hf!r} is missing: {shape.config_path} says the model has "
                    f"{shape.layers} layers, and llama.cpp's {arch.gguf_arch} needs it"
                )


def _layers_of(rule: TensorRule, shape: ModelShape, kept: list[int]) -> list[int]:
    """The layers a per-layer rule applies to (the config's and the `kept` ones past them):
    all, or those of its kind."""
    layers = [*range(shape.layers), *kept]
    return [b for b in layers if not rule.layers or _layer_kind(b, shape) == rule.layers]


def _stacked(
    arch: Architecture, experts: dict[tuple[int, int], dict[int, str]], shape: ModelShape
) -> dict[int, list[Planned]]:
    """Layer -> its stacked expert outputs, each checked to hold experts 0..n-1."""
    by_layer: dict[int, list[Planned]] = {}
    for bid in range(shape.layers + shape.extra_layers if arch.experts else 0):
        for index, rule in enumerate(arch.experts):
            members = experts.get((index, bid), {})
            if bid >= shape.layers and not members:
                continue  # a layer past the config's count that the checkpoint does not hold
            if bid not in shape.moe_layers:
                _refuse_dense_experts(rule, bid, members, shape)
                continue
            if sorted(members) != list(range(shape.experts)):
                raise ConvertError(
                    f"layer {bid}: expected experts 0..{shape.experts - 1} of "
                    f"{rule.hf.replace(LAYER, str(bid))!r} ({shape.config_path} says "
                    f"{shape.experts} experts), found {sorted(members) or 'none'}"
                )
            sources = tuple(members[x] for x in range(shape.experts))
            by_layer.setdefault(bid, []).append(
                Planned(_gguf_name(rule.gguf, bid), sources, rule, bid)
            )
    return by_layer


def _refuse_dense_experts(
    rule: ExpertRule, bid: int, members: Mapping[int, str], shape: ModelShape
) -> None:
    if members:
        raise ConvertError(
            f"tensor {members[min(members)]!r} is an expert of layer {bid}, but "
            f"{shape.config_path} makes layer {bid} a dense layer"
        )


def _in_order(
    order: list[tuple[str, Planned | int]], stacked: dict[int, list[Planned]]
) -> Iterator[Planned]:
    """Singles at their own place; a layer's stacked experts where its last expert appears."""
    remaining = {bid: sum(len(p.sources) for p in group) for bid, group in stacked.items()}
    for _, item in order:
        if isinstance(item, Planned):
            yield item
            continue
        remaining[item] -= 1
        if remaining[item] == 0:
            yield from stacked[item]


def build_tensor(planned: Planned, params: Mapping[str, Tensor], shape: ModelShape) -> Tensor:
    """The GGUF tensor `planned` before its type: stacked experts, or the rotary permutation."""
    if isinstance(planned.rule, ExpertRule):
        return ops.stack([params[name] for name in planned.sources], axis=0)
    tensor = params[planned.sources[0]]
    if planned.rule.hook is not None:
        context = HookContext(planned.sources[0], shape.config, shape.config_path)
        hooked: Tensor = planned.rule.hook(tensor, context)
        return hooked
    if planned.rule.rope:
        heads = shape.heads if planned.rule.rope == "q" else shape.kv_heads
        return unpermute_rotary(tensor, heads, planned.sources[0], shape)
    return tensor


def _check_head_rows(rows: int, heads: int, name: str, shape: ModelShape) -> None:
    """A q/k projection holds `heads` heads of the config's head width (`head_dim`, else
    hidden_size / num_attention_heads); a config that says otherwise would make a file
    llama.cpp cannot load, so it is refused here, before any data is read."""
    if not shape.config:
        return
    width = head_dim(shape.config, shape.config_path)
    if rows != heads * width:
        raise ConvertError(
            f"tensor {name!r} has {rows} rows; {shape.config_path} says {_head_key(name)}="
            f"{heads} heads of width {_width_source(shape.config, width)}, expected "
            f"{heads * width} rows"
        )


def _width_source(config: Mapping[str, Any], width: int) -> str:
    """Where a head's width comes from, for messages: `head_dim`, or hidden / heads."""
    if isinstance(config.get("head_dim"), int):
        return f"{width} (head_dim)"
    hidden = first_present(config, HIDDEN_KEYS)
    heads = first_present(config, HEAD_COUNT_KEYS)
    return f"{width} (hidden_size {hidden} // num_attention_heads {heads})"


def _head_key(name: str) -> str:
    """The config key giving the head count of a q or k projection."""
    is_q = name.endswith(("q_proj.weight", "q_proj.bias"))
    return "num_attention_heads" if is_q else "num_key_value_heads"


def unpermute_rotary(tensor: Tensor, heads: int, name: str, shape: ModelShape) -> Tensor:
    """Interleave the two rotary halves of each head of a q/k projection (rows = heads * dim),
    as llama.cpp's converter does for Hugging Face llama checkpoints."""
    rows = tensor.shape[0]
    if rows % (2 * heads):
        raise ConvertError(
            f"tensor {name!r} has {rows} rows, which {_head_key(name)}={heads} from "
            f"{shape.config_path} does not divide into heads of two rotary halves"
        )
    _check_head_rows(rows, heads, name, shape)
    rest = tensor.shape[1:]
    split = tensor.reshape(heads, 2, rows // heads // 2, *rest)
    axes = (0, 2, 1, *range(3, 3 + len(rest)))
    return split.transpose(*axes).reshape(rows, *rest)
