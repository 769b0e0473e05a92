"""The compact struct-info and dim spellings of error messages, as the op layer offers them.

They live in `lazyparams.ir.describe` so that the IR's own messages can use them; this module
keeps the op layer's spelling of the import. Imports `ir` only.
"""

from lazyparams.ir.describe import describe, show_dim, show_shape

__all__ = ["describe", "show_dim", "show_shape"]
