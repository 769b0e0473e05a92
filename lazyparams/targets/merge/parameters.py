"""A merge parameter's value for one tensor, from what the configuration wrote.

A value may be a plain number (or flag), a gradient (a list of numbers spread evenly over the
layers and interpolated linearly between them, as mergekit reads one), or a list of filter
rules `{filter: TEXT, value: V}` where the first rule whose filter occurs in the tensor's name
wins and a rule without a filter matches every tensor. Imports the errors only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lazyparams.errors import ConvertError

LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")
"""Where a tensor name holds its layer index (`model.layers.7.`, `transformer.h.7.`)."""


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


def value_for(raw: Any, tensor: str, layers: int, where: str) -> Any:
    """The value of a parameter written as `raw` for tensor `tensor` of a model of `layers`
    layers; ConvertError naming `where` when `raw` has none of the accepted forms."""
    if isinstance(raw, list) and raw and all(isinstance(r, Mapping) for r in raw):
        return value_for(_first_rule(raw, tensor, where), tensor, layers, where)
    if isinstance(raw, list):
        return _gradient(raw, layer_of(tensor), layers, where)
    return raw


def _first_rule(rules: list[Any], tensor: str, where: str) -> Any:
    for rule in rules:
        unknown = set(rule) - {"filter", "value"}
        if unknown or "value" not in rule:
            raise ConvertError(
                f"{where}: rule {dict(rule)!r}: expected {{filter: TEXT, value: V}} "
                "(filter optional)"
            )
        pattern = rule.get("filter")
        if pattern is None or str(pattern) in tensor:
            return rule["value"]
    return None


def _gradient(points: list[Any], layer: int | None, layers: int, where: str) -> float:
    numbers = [p for p in points if isinstance(p, int | float) and not isinstance(p, bool)]
    if len(numbers) != len(points) or not numbers:
        raise ConvertError(
            f"{where}: {points!r}: expected a number, a gradient of numbers or "
            "a list of {filter, value} rules"
        )
    if len(numbers) == 1:
        return float(numbers[0])
    position = 0.0 if layer is None or layers <= 1 else layer / (layers - 1)
    scaled = position * (len(numbers) - 1)
    low = min(int(scaled), len(numbers) - 2)
    frac = scaled - low
    return float(numbers[low] * (1 - frac) + numbers[low + 1] * frac)
