"""numpy kernels of `R.mt_seed`, `R.mt_uniform` and `R.mt_skip`: MT19937 draws through numpy's
bit generator, set to the state a tensor holds.

numpy's `MT19937` and torch's CPU generator run the same engine, seeded alike (numpy's legacy
`RandomState(seed)` and `torch.manual_seed(seed)` both call `init_genrand(seed)`), and
`random_raw` yields its 32-bit outputs one by one, as torch's `random()` does. Draws are made
in slices of bounded size, so skipping or drawing billions never holds more than a slice of raw
words. Imports the runtime's kernel registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime.kernels import Array, kernel

WORDS = 624
SLICE = 1 << 22
"""Raw draws made at once (32 MiB of uint64)."""
UNIFORM_BITS = 24


@kernel("mt_seed")
def _mt_seed(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    state = np.random.RandomState(int(attrs["seed"])).get_state(legacy=False)["state"]
    return _words(state)


def _words(state: Mapping[str, Any]) -> Array:
    """numpy's MT19937 state as a state tensor: the 624 words, then the position."""
    return np.concatenate([state["key"].astype(np.uint32), np.array([state["pos"]], np.uint32)])


def _generator(op: str, state: Array) -> np.random.MT19937:
    words = np.asarray(state)
    if words.shape != (WORDS + 1,) or words.dtype != np.uint32 or int(words[WORDS]) > WORDS:
        raise RuntimeExecError(
            f"R.{op}: expected an MT19937 state (625 uint32, position <= {WORDS}), got "
            f"{words.shape} {words.dtype}"
        )
    generator = np.random.MT19937()
    generator.state = {
        "bit_generator": "MT19937",
        "state": {"key": words[:WORDS].copy(), "pos": int(words[WORDS])},
    }
    return generator


@kernel("mt_uniform")
def _mt_uniform(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    shape = tuple(int(d) for d in attrs["shape"])
    out = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=np.float32)
    generator = _generator("mt_uniform", ops[0])
    for start in range(0, out.size, SLICE):
        raw = generator.random_raw(min(SLICE, out.size - start))
        low = (raw & ((1 << UNIFORM_BITS) - 1)).astype(np.float32)
        np.multiply(low, np.float32(2.0**-UNIFORM_BITS), out=out[start : start + raw.size])
    return out.reshape(shape)


@kernel("mt_skip")
def _mt_skip(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    generator = _generator("mt_skip", ops[0])
    left = int(attrs["count"])
    while left > 0:
        step = min(SLICE, left)
        generator.random_raw(step)
        left -= step
    return _words(generator.state["state"])
