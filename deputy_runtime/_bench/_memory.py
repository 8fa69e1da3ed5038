"""Memory measurements: Python allocations per in-flight delegation and process peak RSS.

tracemalloc sees every Python allocation (not the interpreter's free lists or arenas), so
its peak during one fan-out, minus what was allocated before it, divided by N, is what one
in-flight delegation costs in Python objects. VmHWM is the kernel's high-water mark of the
process's resident set, which includes the interpreter and imports; it is reported as is.
"""

from __future__ import annotations

import gc
import resource
import sys
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["peak_rss_kib", "traced_peak"]

T = TypeVar("T")


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_kib() -> int:
    """The process's peak resident set size in KiB (VmHWM; ``ru_maxrss`` off Linux)."""
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # macOS reports bytes, Linux and the BSDs KiB.
    return peak // 1024 if sys.platform == "darwin" else peak


async def traced_peak(run: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Run ``run()`` under tracemalloc; return its result and the peak bytes it added."""
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = await run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, max(0, peak - baseline)
