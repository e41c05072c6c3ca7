"""Timing helper shared by the benchmark scripts."""

import os
import time
from collections.abc import Callable


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, object]:
    """Shortest wall time of ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def versions_line() -> str:
    """``# python 3.11.7, numpy 2.4.6, ml_dtypes 0.7.0, ...``: the peers a benchmark ran with."""
    import platform

    from mxsim import versions
    return f"# python {platform.python_version()}, {versions.describe()}, {platform.machine()}"


def memory_dir() -> str | None:
    """/dev/shm where the machine has a writable one (else None: the temporary directory).
    Benchmarks keep their files there: on the shared disk a 64-256 MB write took
    0.02-0.9 s from one run to the next (the kernel's write-back of other work), which is the
    disk's time, not mxsim's (bench_engine's --cli-big also times the disk)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
