"""A pool of fuzz worker processes with a per-case timeout; a hang or a crash costs one worker.

The parent sends each case to an idle worker and waits on all busy ones at once. A worker past
its deadline is killed (its faulthandler dump, in its stderr log, says where it was) and the case
is reported as a `hang`; one that dies is reported as a `crash`. Either way a new worker starts.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.fuzz.worker import read_frame, write_frame

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Worker:
    """One child process, its stderr log, and the case it is running."""

    process: subprocess.Popen[bytes]
    log: IO[bytes]
    job: Any = None
    deadline: float = 0.0
    done: int = 0
    history: list[str] = field(default_factory=list)

    def log_tail(self, size: int = 6000) -> str:
        self.log.flush()
        self.log.seek(max(0, self.log.seek(0, os.SEEK_END) - size))
        return self.log.read().decode("utf-8", "replace")


def spawn(memory: int) -> Worker:
    """A fresh worker limited to `memory` bytes of address space."""
    env = dict(os.environ, LAZYPARAMS_FUZZ_MEMORY=str(memory), OPENBLAS_NUM_THREADS="1")
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(paths)}
    log = tempfile.TemporaryFile()  # noqa: SIM115 - it lives as long as the worker
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fuzz.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        cwd=ROOT,
        env=env,
    )
    return Worker(process, log)


def wait_ready(worker: Worker) -> Worker:
    """`worker` once it has imported lazyparams and set its limits (its first frame says so)."""
    if read_frame(worker.process.stdout) != "ready":  # type: ignore[arg-type]
        raise RuntimeError(f"fuzz worker failed to start:\n{worker.log_tail()}")
    return worker


class Pool:
    """`size` workers; `run(jobs)` yields (job, reply) as replies come, in any order.

    A job is (label, request); the request is what the worker's `handle` takes. `recycle`
    starts a fresh worker after that many cases, so state one case leaves behind (a changed
    module global, say) stays with few others.
    """

    def __init__(self, size: int, timeout: float, memory: int, recycle: int = 500) -> None:
        self.size, self.timeout, self.memory, self.recycle = size, timeout, memory, recycle
        self.workers = [wait_ready(w) for w in [spawn(memory) for _ in range(size)]]
        self.restarts = 0

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (politely, by closing its stdin, then by force)."""
        for worker in self.workers:
            self._stop(worker)
        self.workers = []

    def run(self, jobs: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[tuple[Any, dict]]:
        pending = iter(jobs)
        selector = selectors.DefaultSelector()
        busy = 0
        try:
            while True:
                for worker in self.workers:
                    if worker.job is None and (job := next(pending, None)) is not None:
                        self._send(worker, job, selector)
                        busy += 1
                if busy == 0:
                    return
                for worker, reply in self._collect(selector):
                    busy -= 1
                    yield worker.job, reply
                    self._finish(worker, selector, bool(reply.get("retire")))
        finally:
            selector.close()

    def _send(self, worker: Worker, job: tuple[str, dict], selector: Any) -> None:
        label, request = job
        request = {**request, "timeout": self.timeout}
        worker.job, worker.deadline = job, time.monotonic() + self.timeout
        worker.history = [*worker.history[-4:], str(getattr(label, "label", label))]
        with contextlib.suppress(OSError):  # one that died between cases reports as a crash
            write_frame(worker.process.stdin, request)  # type: ignore[arg-type]
        selector.register(worker.process.stdout, selectors.EVENT_READ, worker)

    def _collect(self, selector: Any) -> list[tuple[Worker, dict]]:
        """Replies that are ready, or hangs past their deadline."""
        busy = [key.data for key in selector.get_map().values()]
        wait = max(0.0, min(w.deadline for w in busy) - time.monotonic())
        ready = [key.data for key, _ in selector.select(timeout=wait)]
        replies = [(w, self._reply(w)) for w in ready]
        now = time.monotonic()
        for worker in busy:
            if worker not in ready and now >= worker.deadline:
                worker.process.kill()
                worker.process.wait()
                hang = {"outcome": "hang", "seconds": self.timeout, "type": "Timeout"}
                replies.append((worker, hang | {"traceback": worker.log_tail()}))
        return replies

    def _reply(self, worker: Worker) -> dict[str, Any]:
        reply = read_frame(worker.process.stdout)  # type: ignore[arg-type]
        if reply is not None:
            return dict(reply)
        code = worker.process.wait()
        return {"outcome": "crash", "type": f"exit {code}", "traceback": worker.log_tail()}

    def _finish(self, worker: Worker, selector: Any, retired: bool) -> None:
        selector.unregister(worker.process.stdout)
        worker.job = None
        worker.done += 1
        if retired or worker.process.poll() is not None or worker.done >= self.recycle:
            self._stop(worker)
            self.workers[self.workers.index(worker)] = wait_ready(spawn(self.memory))
            self.restarts += 1

    def _stop(self, worker: Worker) -> None:
        process = worker.process
        with contextlib.suppress(OSError):  # a dead worker's pipe may refuse the flush
            process.stdin.close()  # type: ignore[union-attr]  # asks a live worker to exit
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()  # type: ignore[union-attr]
        worker.log.close()


def run_fresh(request: dict[str, Any], timeout: float, memory: int) -> dict[str, Any]:
    """Run one request on a worker of its own (to confirm a finding without earlier cases)."""
    with Pool(1, timeout, memory) as pool:
        return next(reply for _, reply in pool.run([("confirm", request)]))
