"""Unit signatures: units that differ only in the tensors they name share one compiled plan,
wherever those tensors sit in the checkpoint, and each still gets its own outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lazyparams.engine.compile import output_infos
from lazyparams.engine.output import StagedSafetensors
from lazyparams.engine.part_run import run_part
from lazyparams.engine.partition import partition
from lazyparams.frontend import ops
from lazyparams.io import DictSource, open_source

EXPERTS = 6
PROJECTIONS = (("gate_proj", (8, 4)), ("down_proj", (4, 8)))


def _stack_experts(params: dict[str, object]) -> dict[str, object]:
    """Each layer's experts stacked per projection."""
    out = {}
    for layer in range(4):
        for proj, _ in PROJECTIONS:
            members = [params[f"l{layer}.experts.{e}.{proj}"] for e in range(EXPERTS)]
            out[f"l{layer}.{proj}"] = ops.stack(members, axis=0)
    return out


def _experts_in_two_orders() -> dict[str, np.ndarray]:
    """Odd layers list their experts shuffled: first use and checkpoint order disagree."""
    rng = np.random.default_rng(0)
    arrays = {}
    for layer in range(4):
        order = range(EXPERTS) if layer % 2 == 0 else (3, 0, 5, 1, 4, 2)
        for expert in order:
            for proj, shape in PROJECTIONS:
                name = f"l{layer}.experts.{expert}.{proj}"
                arrays[name] = rng.standard_normal(shape).astype(np.float32)
    return arrays


def test_layers_share_a_plan_whatever_their_checkpoint_order(tmp_path: Path) -> None:
    arrays = _experts_in_two_orders()
    source = DictSource(arrays)
    parts = partition(_stack_experts, source, workers=2, part_size=2048)
    assert len(parts.units) == 8 and len(parts.templates) == len(PROJECTIONS)
    staged = StagedSafetensors(
        tmp_path / "out", output_infos(parts.traced), None, {"job": 1}, False
    )
    for part in parts.parts:
        stats = run_part(parts, part, source, staged)
        assert stats.measured_peak_bytes == part.predicted_peak_bytes
    staged.finalize()
    with open_source(tmp_path / "out") as out:
        for layer in range(4):
            for proj, _ in PROJECTIONS:
                members = [arrays[f"l{layer}.experts.{e}.{proj}"] for e in range(EXPERTS)]
                got = np.asarray(out.load(f"l{layer}.{proj}"))
                np.testing.assert_array_equal(got, np.stack(members))
