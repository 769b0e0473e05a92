"""The destination lock: atomic, naming its holder, cleaned up, reusable after a kill."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert
from lazyparams.engine.dst_lock import DestinationLock, is_locked, lock_path
from lazyparams.errors import ConvertError
from tests.engine.helpers import CountingSource

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX locks")


def test_a_second_holder_is_refused_with_the_first_one_s_pid(tmp_path: Path) -> None:
    dst = tmp_path / "out.gguf"
    first = DestinationLock(dst)
    assert is_locked(dst)
    with pytest.raises(ConvertError, match=rf"another conversion \(pid {os.getpid()}\)"):
        DestinationLock(dst)
    first.release()
    assert not lock_path(dst).exists() and not is_locked(dst)
    DestinationLock(dst).release()


def test_a_lock_file_left_by_a_killed_run_is_reused_and_removed(tmp_path: Path) -> None:
    dst = tmp_path / "out.npz"
    lock_path(dst).write_text("999999\n")  # nobody holds it
    lock = DestinationLock(dst)
    assert lock_path(dst).read_text() == f"{os.getpid()}\n"
    lock.release()
    assert list(tmp_path.iterdir()) == []


def test_a_refused_run_leaves_no_folder_it_made_for_the_lock(tmp_path: Path) -> None:
    source = CountingSource({"w": np.ones((4, 4), np.float32)})
    dst = tmp_path / "new" / "deeper" / "out.npz"
    with pytest.raises(Exception, match="budget"):
        convert("cast:float16", source, dst, budget=1, progress=False)
    assert list(tmp_path.iterdir()) == [] and source.loads == []
