"""The fuzz worker: a child process that runs cases sent over its stdin, under memory limits.

Run as `python -m tests.fuzz.worker`. Each request is a length-prefixed pickle naming an action
(`exercise` by default) and a case; the reply says how it ended: `ok`, `refused` (a
LazyParamsError) or a finding (`error`, `memory`, `mismatch`, `leftover`, or `internals`: a
refusal whose message shows an object's repr) with the traceback.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import os
import pickle
import pkgutil
import re
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO, Any

import numpy as np

from lazyparams.errors import CheckpointError, LazyParamsError
from tests.fuzz import reference

FRAME = struct.Struct("<I")
OBJECT_REPR = re.compile(r"<[^<>\n]* at 0x[0-9a-fA-F]+>")
"""An object's default repr (`<ast.Name object at 0x7f...>`, `<function f at 0x...>`): a
message that shows one passes on Python's internals instead of saying what is wrong."""


class Mismatch(Exception):
    """A source handed back something other than what it declared (a silent-wrong finding)."""


def read_frame(stream: IO[bytes]) -> Any:
    """The next pickled frame from `stream`, or None at its end."""
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    (size,) = FRAME.unpack(head)
    return pickle.loads(stream.read(size))


def write_frame(stream: IO[bytes], value: Any) -> None:
    """`value` pickled onto `stream` with its length in front, flushed."""
    data = pickle.dumps(value)
    stream.write(FRAME.pack(len(data)) + data)
    stream.flush()


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    """The case's files under `root` (names are the generator's own, never outside `root`)."""
    for name, data in files.items():
        path = root / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            raise ValueError(f"case file {name!r} would leave the case folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def identity(params: dict[str, Any]) -> dict[str, Any]:
    """The SPEC of the sampled conversions: every tensor written as it was read."""
    return dict(params)


def _check_load(source: Any, name: str) -> np.ndarray:
    """Load `name` whole, by rows and by columns; Mismatch unless all agree with its info."""
    from lazyparams.io import check_declared
    from lazyparams.io.dtypes import is_block

    info = source.info(name)
    array = source.load(name)
    try:
        check_declared(source.path, {name: info}, name, array)
    except CheckpointError as err:
        raise Mismatch(f"load differs from info: {err}") from None
    data = np.ascontiguousarray(array)
    if info.shape and info.shape[0] > 0 and (len(info.shape) > 1 or not is_block(info.dtype)):
        rows = source.load_rows(name, 0, min(2, info.shape[0]))
        if not is_block(info.dtype) and rows.tobytes() != data[: rows.shape[0]].tobytes():
            raise Mismatch(f"tensor {name!r}: load_rows(0, 2) differs from load()[:2]")
        if len(info.shape) == 2 and info.shape[1] > 0 and not is_block(info.dtype):
            cols = source.load_cols(name, 0, 1)
            if cols.tobytes() != np.ascontiguousarray(data[:, :1]).tobytes():
                raise Mismatch(f"tensor {name!r}: load_cols(0, 1) differs from load()[:, :1]")
    return data


def _convert(target: Path, out: Path, format: str) -> None:
    """Convert `target` with the identity SPEC; a failed run must leave nothing at DST."""
    from lazyparams.engine import convert

    dst = out / {"npy": "out", "npz": "out.npz", "gguf": "out.gguf"}.get(format, "out.safetensors")
    try:
        convert(identity, target, dst, format=format, progress=False)
    except LazyParamsError:
        if dst.exists():
            raise Mismatch(f"a failed convert to {format} left {dst.name} at DST") from None
        raise


def exercise(case: dict[str, Any], work: Path) -> dict[str, Any]:
    """Open the case's checkpoint, list it, load every tensor, convert it when asked."""
    from lazyparams.io import open_source

    root, out = work / "case", work / "out"
    write_tree(root, case["files"])
    out.mkdir()
    target = root / case["entry"] if case["entry"] != "." else root
    loaded, seen = 0, {}
    with open_source(target) as source:
        for name in source.names():
            data = _check_load(source, name)
            loaded += int(data.nbytes)
            if case.get("reference"):
                seen[name] = reference.snapshot(source.info(name).shape, data)
    if case.get("reference"):
        reference.compare(case["format"], target, seen)
    if case.get("convert_to"):
        _convert(target, out, case["convert_to"])
    return {"tensors_bytes": loaded}


def _innermost(tb: traceback.StackSummary) -> tuple[str, str]:
    """(innermost frame anywhere, innermost frame in lazyparams), as 'file:function'."""
    frames = [f"{Path(f.filename).name}:{f.name}" for f in tb]
    ours = [f"{Path(f.filename).name}:{f.name}" for f in tb if "lazyparams" in f.filename]
    return (frames[-1] if frames else "?"), (ours[-1] if ours else "?")


def outcome_of(err: BaseException) -> dict[str, Any]:
    """How a case that raised `err` ended, with what a findings report needs."""
    tb = traceback.extract_tb(err.__traceback__)
    inner, ours = _innermost(tb)
    last = traceback.format_exception_only(type(err), err)[-1].strip()
    if isinstance(err, LazyParamsError):
        kind = "internals" if OBJECT_REPR.search(str(err)) else "refused"
    elif isinstance(err, Mismatch):
        kind = "leftover" if "left" in str(err) else "mismatch"
    elif isinstance(err, reference.ReferenceDisagrees):
        kind = err.kind
    else:
        kind = "memory" if isinstance(err, MemoryError) else "error"
    text = "".join(traceback.format_exception(err)) if kind != "refused" else ""
    if kind == "internals":
        last = f"the message shows an object's repr: {last}"
    reply = {"outcome": kind, "type": type(err).__name__, "last_line": last[:500], "frame": inner}
    return reply | {"our_frame": ours, "traceback": text[-6000:]}


def _resolve(action: str) -> Any:
    module, _, name = action.partition(":")
    return getattr(importlib.import_module(module), name)


def _status_kib(field: str) -> int:
    """A memory figure of /proc/self/status (VmRSS, VmHWM), in KiB; 0 where there is none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak() -> int:
    """Reset this process's peak RSS to its current RSS (Linux clear_refs); the RSS in bytes."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_kib("VmRSS") << 10


def _check_growth(result: dict[str, Any], before: int, allowed: int) -> None:
    """Turn a case whose peak RSS rose past `before + allowed` into a memory finding (and
    retire the worker, so the next case starts small again)."""
    grown = (_status_kib("VmHWM") << 10) - before
    if before and grown > allowed and result["outcome"] in ("ok", "refused"):
        last = f"peak RSS grew by {grown >> 20} MiB (allowed {allowed >> 20} MiB), then it "
        result |= {"outcome": "memory", "type": "RSS", "last_line": last + result["outcome"]}
        result["retire"] = True


def handle(request: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Run one request in a fresh folder under `scratch`; the reply (never raises)."""
    work = Path(tempfile.mkdtemp(dir=scratch))
    before = reset_peak()
    started = time.perf_counter()
    faulthandler.dump_traceback_later(request.get("timeout", 2.0) * 0.9, exit=False)
    try:
        extra = _resolve(request.get("action", f"{__name__}:exercise"))(request["case"], work)
        result = {"outcome": "ok", **(extra or {})}
    except BaseException as err:
        result = outcome_of(err)
    finally:
        faulthandler.cancel_dump_traceback_later()
        shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = time.perf_counter() - started
    _check_growth(result, before, int(os.environ.get("LAZYPARAMS_FUZZ_RSS", 64 << 20)))
    return result


def _import_everything() -> None:
    """Import the engine and every io module now, before the limits and the first case's
    clock (a first case that paid for the imports would look slow)."""
    import lazyparams.engine
    import lazyparams.io

    for module in pkgutil.iter_modules(lazyparams.io.__path__, "lazyparams.io."):
        importlib.import_module(module.name)


def _limit(memory: int, file_size: int) -> None:
    """Cap address space, written file size and core dumps; writes past the cap fail (EFBIG)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def main() -> None:
    """Serve requests until stdin closes; stdout carries only replies (prints go to stderr)."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _import_everything()

    _limit(int(os.environ.get("LAZYPARAMS_FUZZ_MEMORY", 1 << 30)), 64 << 20)
    scratch = Path(tempfile.mkdtemp(prefix="lazyparams-fuzz-worker-"))
    write_frame(replies, "ready")
    try:
        while (request := read_frame(sys.stdin.buffer)) is not None:
            reply = handle(request, scratch)
            write_frame(replies, reply)
            if reply.get("retire"):
                break
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
