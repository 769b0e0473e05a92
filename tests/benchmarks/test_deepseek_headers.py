"""The header-only DeepSeek-V3 checkpoint of the partition benchmark: published layout, no data."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.deepseek_headers import EXPERTS, deepseek_v3_infos, make_header_only
from lazyparams.io import open_source


def test_the_layout_has_the_published_parameter_count() -> None:
    infos = deepseek_v3_infos()
    params = sum(math.prod(i.shape) for i in infos if not i.name.endswith("weight_scale_inv"))
    assert 684e9 < params < 686e9  # 671B main model plus the 14B multi-token-prediction layer
    experts = {i.name for i in infos if ".mlp.experts." in i.name}
    assert (
        len(experts) == 59 * EXPERTS * 3 * 2
    )  # 58 MoE layers and the MTP one, 3 projections, weight + scale


def test_files_have_real_headers_and_sparse_data(tmp_path: Path) -> None:
    root = make_header_only(tmp_path / "ds", layers=4)
    files = sorted(root.glob("*.safetensors"))
    assert files and (root / "model.safetensors.index.json").exists()
    on_disk = sum(f.stat().st_blocks * 512 for f in files)
    assert on_disk < sum(f.stat().st_size for f in files) / 100
    with open_source(root) as source:
        info = source.info("model.layers.61.mlp.experts.255.down_proj.weight")
        assert (info.shape, info.dtype) == ((7168, 2048), "float8_e4m3fn")
        scale = source.info("model.layers.61.mlp.experts.255.down_proj.weight_scale_inv")
        assert (scale.shape, scale.dtype) == ((56, 16), "float32")
