"""A MoE transform spec: stack each layer's routed experts into one tensor per projection.

This is the layout llama.cpp-style runtimes load (one `[experts, rows, cols]` tensor per
projection and layer, scales alike); every other tensor passes through. Each stacked output
needs all of its layer's experts, so a partitioned plan must keep them in one part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lazyparams.frontend import ops

_EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(\w+_proj\.\w+)$")


def transform(params: Mapping[str, Any]) -> dict[str, Any]:
    """Stacked experts per (layer, projection, weight or scale), the rest unchanged."""
    groups: dict[str, dict[int, Any]] = {}
    out: dict[str, Any] = {}
    for name, tensor in params.items():
        match = _EXPERT.match(name)
        if match is None:
            out[name] = tensor
            continue
        prefix, expert, rest = match.groups()
        groups.setdefault(f"{prefix}.{rest}", {})[int(expert)] = tensor
    for name, members in groups.items():
        out[name] = ops.stack([members[i] for i in sorted(members)], axis=0)
    return out
