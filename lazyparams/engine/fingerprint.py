"""Content fingerprints of a source's files, recorded when a conversion starts, checked on resume.

Size and mtime say little (a file rewritten in place may keep both), so each file gets a hash
of its content (SHA-256): by default a sampled one (the whole of a file up to 1 MiB; else its
first 256 KiB, its last 16 KiB and 32 evenly spread 16 KiB blocks), or with `full` a hash of
every byte. A resume refuses a file whose fingerprint changed, naming it. Imports only the
standard library and `errors`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError

VERIFY_MODES = ("sampled", "full")
WHOLE_BYTES = 1024 * 1024
"""Files up to this size are hashed whole even when sampling."""
HEAD_BYTES = 256 * 1024
"""A checkpoint's header (names, shapes, offsets) is at its start: it is always hashed."""
TAIL_BYTES = 16 * 1024
SAMPLES = 32
SAMPLE_BYTES = 16 * 1024
_CHUNK = 16 * 1024 * 1024


def check_mode(mode: str) -> str:
    """`mode` checked to be one of VERIFY_MODES."""
    if mode not in VERIFY_MODES:
        choices = ", ".join(VERIFY_MODES)
        raise ConvertError(f"verify_resume: expected one of {choices}, got {mode!r}")
    return mode


def fingerprints(files: Sequence[Path], mode: str) -> dict[str, Any]:
    """What the job file records of the source's files: the mode and, per file name, its size
    and sampled hash (and, in `full` mode, the hash of every byte)."""
    check_mode(mode)
    entries = {}
    for path in files:
        with open(path, "rb") as fp:
            size = os.fstat(fp.fileno()).st_size
            entry = {"size": size, "sampled": _sampled(fp.fileno(), size)}
            if mode == "full":
                entry["full"] = _hash_ranges(fp.fileno(), [(0, size)])
        entries[path.name] = entry
    return {"mode": mode, "files": entries}


def _sampled(fd: int, size: int) -> str:
    if size <= WHOLE_BYTES:
        return _hash_ranges(fd, [(0, size)])
    stride = (size - HEAD_BYTES - TAIL_BYTES) // (SAMPLES + 1)
    starts = [HEAD_BYTES + stride * (k + 1) for k in range(SAMPLES)]
    ranges = [(0, HEAD_BYTES), *((s, s + SAMPLE_BYTES) for s in starts)]
    return _hash_ranges(fd, [*ranges, (size - TAIL_BYTES, size)])


def _hash_ranges(fd: int, ranges: Sequence[tuple[int, int]]) -> str:
    digest = hashlib.sha256()
    for start, end in ranges:
        for at in range(start, end, _CHUNK):
            digest.update(os.pread(fd, min(_CHUNK, end - at), at))
    return digest.hexdigest()


def check_unchanged(before: Mapping[str, Any], now: Mapping[str, Any], where: str) -> None:
    """Refuse a resume whose source files are not, by content, the interrupted run's."""
    old, new = before.get("files", {}), now.get("files", {})
    if now.get("mode") == "full" and before.get("mode") != "full":
        raise ConvertError(
            f"{where}: --verify-resume full needs the full hashes of the source, and the "
            "interrupted run recorded only sampled ones; expected it started with "
            "--verify-resume full (resume without the option, or run without --resume)"
        )
    for name in sorted(set(old) | set(new)):
        problem = _difference(old.get(name), new.get(name), now.get("mode") == "full")
        if problem is not None:
            raise ConvertError(
                f"{where}: source file {name!r} {problem} since the interrupted conversion "
                "started; expected the same source to resume (run without --resume to start over)"
            )


def _difference(old: Any, new: Any, full: bool) -> str | None:
    if old is None:
        return "appeared"
    if new is None:
        return "disappeared"
    if old.get("size") != new.get("size"):
        return f"changed size ({old.get('size')} -> {new.get('size')} bytes)"
    if old.get("sampled") != new.get("sampled") or (full and old.get("full") != new.get("full")):
        return "changed content (its size kept)"
    return None
