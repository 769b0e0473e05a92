"""Temporary files beside their final names, published together or removed together.

A sink writes into hidden temporaries in the destination folder, so that publishing is a rename on
the same file system and a failed run leaves nothing behind. Imports only the standard library
and io.reasons.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.reasons import os_reason

_FILE_MODE = 0o644


class Staging:
    """The temporaries of one sink: `new_file`, then `commit` (fsync + rename) or `discard`.

    Folders created for the output are removed again on `discard` when they are left empty. If a
    sink is dropped without either, the temporaries are removed when it is garbage-collected.
    """

    def __init__(self) -> None:
        self._files: list[tuple[Path, Path]] = []  # (temporary, final)
        self._made_dirs: list[Path] = []
        self._cleanup = weakref.finalize(self, _remove, self._files, self._made_dirs)

    def new_file(self, final: Path) -> Path:
        """Create an empty temporary for `final` and return its path.

        The caller opens it as it likes and must close it before `commit`.
        """
        self._make_dirs(final.parent)
        try:
            fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        except OSError as err:
            raise CheckpointError(
                f"{final}: cannot create the output file: {os_reason(err)}"
            ) from err
        os.fchmod(fd, _FILE_MODE)
        os.close(fd)
        self._files.append((Path(name), final))
        return Path(name)

    def commit(self) -> None:
        """Flush every temporary to disk, then rename each onto its final name."""
        for temp, _ in self._files:
            fsync_path(temp)
        for temp, final in self._files:
            os.replace(temp, final)
        for folder in {final.parent for _, final in self._files}:
            fsync_path(folder)
        self._files.clear()
        self._made_dirs.clear()
        self._cleanup.detach()

    def discard(self) -> None:
        """Delete every temporary and the folders this staging created."""
        self._cleanup()

    def _make_dirs(self, folder: Path) -> None:
        missing: list[Path] = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for path in reversed(missing):
            try:
                path.mkdir()
            except OSError as err:
                raise CheckpointError(
                    f"{path}: cannot create the output folder: {os_reason(err)}"
                ) from err
            self._made_dirs.append(path)


def fsync_path(path: Path) -> None:
    """Flush a file or folder entry to disk (a folder: so a rename in it survives a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(files: list[tuple[Path, Path]], made_dirs: list[Path]) -> None:
    for temp, _ in files:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    for folder in reversed(made_dirs):
        with contextlib.suppress(OSError):
            folder.rmdir()
    files.clear()
    made_dirs.clear()
