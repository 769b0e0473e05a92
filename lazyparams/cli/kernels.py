"""Which loops the kernels run, as `lazyparams --version` reports it: the compiled extension
(`lazyparams.runtime._native`, with the CPU paths it takes) or the numpy fallback.

Importing `lazyparams.runtime` to ask would load numpy and the VM, several times what
`--version` takes otherwise; so unless the runtime is imported already (whose `native.enabled()`
then answers), the extension is loaded on its own, as `runtime.native` loads it: not at all
under `LAZYPARAMS_NATIVE=0`. Imports only the standard library.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

NATIVE = "lazyparams.runtime._native"


def kernels_line() -> str:
    """One line: `kernels: compiled loops (...)` or `kernels: numpy fallback (why)`."""
    if os.environ.get("LAZYPARAMS_NATIVE", "1") == "0":
        return "kernels: numpy fallback (compiled loops turned off by LAZYPARAMS_NATIVE=0)"
    runtime = sys.modules.get("lazyparams.runtime.native")
    if runtime is not None and not runtime.enabled():
        why = "turned off" if runtime.available() else "not built"
        return f"kernels: numpy fallback (compiled loops {why})"
    module = _extension()
    if module is None:
        return "kernels: numpy fallback (compiled loops not built)"
    return f"kernels: compiled loops ({', '.join(cpu_paths(module))})"


def _extension() -> ModuleType | None:
    """The compiled extension: the one imported already, else loaded from its file alone."""
    if NATIVE in sys.modules:
        return sys.modules[NATIVE]
    folder = Path(__file__).resolve().parent.parent / "runtime"
    spec = importlib.machinery.PathFinder.find_spec("_native", [str(folder)])
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module


def cpu_paths(module: ModuleType) -> list[str]:
    """The CPU paths the extension's loops take here: blocked SSE2 transposes where built,
    AVX2 + F16C and AVX-512 where the CPU has them (the extension's switches, read and put
    back), else portable C loops."""
    f16c = bool(module.use_f16c(True))
    module.use_f16c(f16c)
    avx512 = bool(module.use_avx512(True))
    module.use_avx512(avx512)
    paths = ["SSE2 transposes"] if module.BLOCKED_TRANSPOSE else []
    if f16c:
        paths.append("AVX2+F16C")
    if f16c and avx512 and _cpu_flags() >= {"avx512f", "avx512bw"}:
        paths.append("AVX-512")
    return paths if f16c else [*paths, "portable C casts"]


def _cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fp:
            for line in fp:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()
