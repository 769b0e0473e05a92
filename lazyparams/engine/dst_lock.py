"""One lock per destination: `.<DST name>.lazyparams-lock` beside DST, held by one conversion.

The lock is an flock on that file, taken before anything about DST is checked or created, so
two conversions into one destination cannot both pass the checks (no check-then-create). The
holder writes its pid into the file, so a refused run can name it; releasing deletes the file
while still holding it, and a run that locked a file someone just deleted tries again.
Imports only the standard library and `errors`.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from lazyparams.errors import ConvertError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: destinations are not locked
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".lazyparams-lock"
_ATTEMPTS = 20


def lock_path(dst: Path) -> Path:
    """The lock file of a conversion into `dst`."""
    return dst.parent / f".{dst.name}{LOCK_SUFFIX}"


class DestinationLock:
    """Holds `lock_path(dst)` exclusively until `release` (or until the process ends)."""

    def __init__(self, dst: Path) -> None:
        self.path, self._fd = lock_path(dst), -1
        self._made = _missing_folders(dst.parent)
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            for _ in range(_ATTEMPTS):
                if self._try_lock(dst):
                    return
        except OSError as err:
            self.release()
            raise ConvertError(
                f"{dst}: cannot write the output: cannot take its lock {self.path}: {err}; "
                "expected a writable destination folder"
            ) from None
        raise ConvertError(f"{dst}: the lock {self.path} keeps vanishing; expected it to stay")

    def _try_lock(self, dst: Path) -> bool:
        """Lock the file now at the path; False if it was replaced meanwhile (try again)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise ConvertError(
                    f"{dst}: another conversion ({holder}) is writing this destination; expected "
                    f"no other run into it (wait for it to end, or stop it; its lock is "
                    f"{self.path})"
                ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the previous holder deleted it between our open and our lock
            os.close(fd)
            return False
        self._fd = fd
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return True

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd >= 0

    def release(self) -> None:
        """Delete the lock file, then let go of it, and remove the folders made for the lock
        that stayed empty (a refused run leaves nothing behind); idempotent."""
        if self._fd >= 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            os.close(self._fd)
            self._fd = -1
        while self._made:
            with contextlib.suppress(OSError):  # not empty: the output or its work is there
                self._made.pop().rmdir()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)  # the file stays; the next holder reuses and deletes it


def _missing_folders(folder: Path) -> list[Path]:
    """The folders above and at `folder` that do not exist yet, outermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def is_locked(dst: Path) -> bool:
    """Whether another process holds the destination's lock now (nothing is created)."""
    try:
        fd = os.open(lock_path(dst), os.O_RDONLY)
    except OSError:
        return False
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    """Who holds a lock, as its file says ("pid 123"), or "pid unknown" while it says nothing."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return f"pid {text}" if text.isdigit() else "pid unknown"
