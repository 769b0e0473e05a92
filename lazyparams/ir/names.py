"""Unique names: what the BlockBuilder, the tracer and the printer hand out.

Its own module so that the printer's helpers, which messages of every `ir` module use, need not
import the BlockBuilder. Imports nothing.
"""

from __future__ import annotations


class NameTable:
    """Hands out unique names: the hint itself the first time, then hint_1, hint_2, ..."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._counter: dict[str, int] = {}

    def copy(self) -> NameTable:
        """An independent table holding the same names, to go back to after a scope."""
        table = NameTable()
        table._used, table._counter = set(self._used), dict(self._counter)
        return table

    def reserve(self, name: str) -> None:
        """Mark a name taken (a function param, for instance)."""
        self._used.add(name)

    def fresh(self, hint: str) -> str:
        """A name not handed out before, derived from `hint`."""
        # Resume counting where this hint left off: long functions stay linear, not quadratic.
        name, counter = hint, self._counter.get(hint, 0)
        if counter:
            name = f"{hint}_{counter}"
        while name in self._used:
            counter += 1
            name = f"{hint}_{counter}"
        self._counter[hint] = counter
        self._used.add(name)
        return name
