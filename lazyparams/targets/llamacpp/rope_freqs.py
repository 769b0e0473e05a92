"""llama 3's rope frequency factors, which llama.cpp stores as a tensor `rope_freqs.weight`.

A config whose rope type is `llama3` scales each rotary frequency by a factor that depends on
its wavelength; llama.cpp's converter computes the factors from config.json and writes them as
one float32 vector. Imports the hyperparameter helpers, and numpy for a llama 3 config only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.targets.llamacpp.hparams import head_dim, rope_parameters

if TYPE_CHECKING:
    import numpy as np

ROPE_FREQS = "rope_freqs.weight"


def llama3_rope_factors(config: Mapping[str, Any], config_path: Path) -> np.ndarray | None:
    """The factors for a `llama3` rope config, or None for any other rope."""
    rope = rope_parameters(config)
    if str(rope.get("rope_type", "")).lower() != "llama3":
        return None
    import numpy as np  # for the factors' float32 arithmetic, only where there are factors

    base = float(rope.get("rope_theta", 10000.0))
    dim = head_dim(config, config_path)
    exponents = np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)
    freqs = np.float32(1.0) / (np.float32(base) ** exponents)
    factor = float(rope.get("factor", 8.0))
    low = float(rope.get("low_freq_factor", 1.0))
    high = float(rope.get("high_freq_factor", 4.0))
    context = float(rope.get("original_max_position_embeddings", 8192))
    factors = [_factor(2 * math.pi / float(f), factor, low, high, context) for f in freqs]
    return np.asarray(factors, dtype=np.float32)


def _factor(wavelen: float, factor: float, low: float, high: float, context: float) -> float:
    if wavelen < context / high:
        return 1.0
    if wavelen > context / low:
        return factor
    smooth = (context / wavelen - low) / (high - low)
    return 1 / ((1 - smooth) / factor + smooth)
