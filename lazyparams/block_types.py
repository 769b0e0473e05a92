"""GGML's quantized block types: the one table every layer reads (name, block, bytes, type id).

A tensor of a block type keeps its logical element shape (numpy order); its last dim is a
multiple of the block size, and in memory each row of it is the blocks' bytes, so a value is a
uint8 array of shape `(*shape[:-1], shape[-1] // block_size * type_size)`. Imports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BlockType:
    """One GGML block type: `block_size` values are stored in `type_size` bytes."""

    name: str
    block_size: int
    type_size: int
    ggml_id: int

    def row_bytes(self, count: int) -> int:
        """Bytes of `count` values (a multiple of the block size)."""
        return count // self.block_size * self.type_size

    def storage_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The uint8 array shape holding a tensor of logical `shape` (rank >= 1)."""
        return (*shape[:-1], self.row_bytes(shape[-1]))

    def logical_shape(self, storage: tuple[int, ...]) -> tuple[int, ...]:
        """The logical shape of a uint8 array of shape `storage` (the inverse of the above)."""
        return (*storage[:-1], storage[-1] // self.type_size * self.block_size)


def _table(*rows: tuple[str, int, int, int]) -> dict[str, BlockType]:
    return {name: BlockType(name, block, size, ggml_id) for name, block, size, ggml_id in rows}


BLOCK_TYPES: dict[str, BlockType] = _table(
    # name, values a block, bytes a block, GGML type id
    ("q4_0", 32, 18, 2),
    ("q4_1", 32, 20, 3),
    ("q5_0", 32, 22, 6),
    ("q5_1", 32, 24, 7),
    ("q8_0", 32, 34, 8),
    ("q2_k", 256, 84, 10),
    ("q3_k", 256, 110, 11),
    ("q4_k", 256, 144, 12),
    ("q5_k", 256, 176, 13),
    ("q6_k", 256, 210, 14),
    ("iq2_xxs", 256, 66, 16),
    ("iq2_xs", 256, 74, 17),
    ("iq3_xxs", 256, 98, 18),
    ("iq1_s", 256, 50, 19),
    ("iq4_nl", 32, 18, 20),
    ("iq3_s", 256, 110, 21),
    ("iq2_s", 256, 82, 22),
    ("iq4_xs", 256, 136, 23),
    ("iq1_m", 256, 56, 29),
    ("tq1_0", 256, 54, 34),
    ("tq2_0", 256, 66, 35),
    ("mxfp4", 32, 17, 39),
    ("nvfp4", 64, 36, 40),
)
"""Every block type a GGUF file may hold that can be read back to floats here."""

BY_GGML_ID: dict[int, BlockType] = {block.ggml_id: block for block in BLOCK_TYPES.values()}

QUANTIZABLE: frozenset[str] = frozenset(
    ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k")
)
"""The block types lazyparams writes from floats (the others are read and dequantized only)."""
