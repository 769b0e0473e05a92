"""A merge parameter's value for one tensor, from what the configuration wrote, by mergekit's
documented rules.

A setting is a value, a gradient or filter rules. A gradient is a list of values spread evenly
over a slice's layers: at a layer's position t in [0, 1] numbers are interpolated linearly
between their neighbours, other values (flags) are picked at index int(t * (n - 1)). A rule is
`{filter: TEXT, value: V}`, alone or in a list: the first whose filter occurs in the tensor's
name (or is absent, or `*`) gives the value. A setting that applies to nothing (no rule
matches, an empty list) gives None, so the next scope (the model's own parameters, the slice's,
the whole configuration's) is asked. Also the layer index in tensor names. Imports the errors
and the registry's types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.merge import Parameter

LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")
"""Where a tensor name holds its layer index (`model.layers.7.`, `transformer.h.7.`)."""
RULE_KEYS = frozenset({"filter", "value"})


def layer_of(name: str) -> int | None:
    """The layer index in tensor name `name`, else None (embeddings, final norm, head)."""
    found = LAYER.search(name)
    return None if found is None else int(found.group(1))


def with_layer(name: str, layer: int) -> str:
    """`name` with its layer index replaced by `layer`."""
    found = LAYER.search(name)
    assert found is not None, name
    start, end = found.span(1)
    return name[:start] + str(layer) + name[end:]


def evaluate(raw: Any, tensor: str, position: float, parameter: Parameter, where: str) -> Any:
    """The value the setting `raw` gives parameter `parameter` for tensor `tensor` at gradient
    position `position`, None where it gives none; ConvertError naming `where` for a value of
    the wrong kind or a setting of no accepted form."""
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        return _parsed(parameter, raw, where)
    if not raw:
        return None
    if all(isinstance(r, Mapping) for r in raw):
        rule = _first_rule(raw, tensor, where)
        if rule is None:
            return None
        if isinstance(rule["value"], Mapping) or _holds_rules(rule["value"]):
            raise ConvertError(
                f"{where}: rule {dict(rule)!r}: expected a value or a gradient, got rules"
            )
        return evaluate(rule["value"], tensor, position, parameter, where)
    if any(isinstance(r, Mapping | list) for r in raw):
        raise ConvertError(
            f"{where}: parameter {parameter.name!r} = {raw!r}: expected a value, a gradient of "
            "values or a list of {filter, value} rules"
        )
    return _gradient([_parsed(parameter, r, where) for r in raw], position, parameter, where)


def _holds_rules(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(v, Mapping | list) for v in value)


def _parsed(parameter: Parameter, value: Any, where: str) -> Any:
    try:
        return parameter.parse(value)
    except ValueError as err:
        raise ConvertError(f"{where}: parameter {parameter.name!r} = {value!r}: {err}") from None


def _first_rule(rules: list[Any], tensor: str, where: str) -> Mapping[str, Any] | None:
    """The first rule that applies to `tensor`, each checked for its keys."""
    for rule in rules:
        if set(rule) - RULE_KEYS or "value" not in rule:
            raise ConvertError(
                f"{where}: rule {dict(rule)!r}: expected {{filter: TEXT, value: V}} "
                "(filter optional)"
            )
        pattern = rule.get("filter")
        if pattern is not None and not isinstance(pattern, str):
            raise ConvertError(f"{where}: rule {dict(rule)!r}: expected the filter as text")
        if pattern is None or pattern == "*" or (tensor and pattern in tensor):
            return dict(rule)
    return None


def _gradient(values: list[Any], position: float, parameter: Parameter, where: str) -> Any:
    """The gradient's value at `position`: numbers interpolated, flags picked."""
    if parameter.kind != "number":
        return values[int(position * (len(values) - 1))]
    scaled = position * (len(values) - 1)
    low = int(scaled)
    high = min(len(values) - 1, low + 1)
    frac = scaled - low
    return _parsed(parameter, (1 - frac) * values[low] + frac * values[high], where)
