"""Process-wide settings a conversion measures best under, taken only where a caller opts in.

A library call (`lazyparams.convert`, `plan`, `trace`) leaves its host process as it found it:
the collector's state and generations, malloc's settings, the kernel's peak-RSS mark. The
`lazyparams` command owns its process, so it opts in for each command: glibc malloc hands freed
memory back at once, the resident peak is the kernel's high-water mark (reset at the start of
a run), and what tracing builds joins the oldest generation. Imports `frontend` and `engine`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lazyparams.engine import resident
from lazyparams.frontend.tracing import promote_after_tracing


@contextlib.contextmanager
def tune_process_for_conversion() -> Iterator[bool]:
    """Opt this process in while the block runs; yields whether malloc took the setting
    (False off glibc). malloc's threshold, once fixed, stays so: the process is the caller's."""
    promote_after_tracing(True)
    try:
        yield resident.opt_in(True)
    finally:
        resident.opt_in(False)
        promote_after_tracing(False)
