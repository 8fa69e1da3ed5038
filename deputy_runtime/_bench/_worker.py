"""One measurement in a fresh process: ``python -m deputy_runtime._bench._worker SPEC``.

SPEC is a JSON object (see :class:`WorkerSpec`). The worker imports the contender, warms it
up (excluded from the figures), measures, checks that every run answered ``done:N``, and
prints one JSON object on stdout. Running each measurement in its own process keeps one
contender's imports, caches and heap from colouring another's numbers.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

from ._memory import peak_rss_kib, traced_peak
from ._shape import Contender, check_answer

__all__ = ["WorkerResult", "WorkerSpec", "load_factory", "main"]

Kind = Literal["sequential", "fanout", "memory"]

#: Seconds a full-size fan-out warm-up may take (estimated from the small warm-up).
_FULL_WARMUP_MAX = 1.5


class WorkerSpec(msgspec.Struct, frozen=True):
    """What one worker measures.

    ``target`` is ``"module:function"`` or ``"/path/file.py:function"`` naming the
    contender factory; ``n`` is the fan-out size (1 for sequential); ``min_time`` is how
    long, in seconds, the timed loop runs at least; ``warmup`` the sequential warm-up runs.
    """

    target: str
    kind: Kind
    n: int = 1
    min_time: float = 0.5
    warmup: int = 20
    backend: str = "asyncio"


class WorkerResult(msgspec.Struct, frozen=True):
    """One sample. ``us`` is microseconds per sequential run or per delegation;
    ``bytes_per_delegation`` is set by memory workers."""

    name: str
    version: str
    kind: Kind
    n: int
    runs: int
    answer: str
    us: float | None = None
    bytes_per_delegation: float | None = None
    rss_setup_kib: int = 0
    rss_peak_kib: int = 0


def load_factory(target: str) -> Any:
    """Import the contender factory named by ``target`` (module or file path, ``:name``)."""
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        raise ValueError(
            f"worker target {target!r}: expected 'module:function' or 'file.py:function'"
        )
    if where.endswith(".py"):
        path = Path(where)
        spec = importlib.util.spec_from_file_location(f"_bench_contender_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"worker target {target!r}: cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, attr)


async def _time_sequential(contender: Contender, spec: WorkerSpec) -> tuple[float, int]:
    for _ in range(spec.warmup):
        check_answer(await contender.sequential(), 1)
    # Batch enough runs that one batch takes ~20 ms, so timer resolution never matters.
    start = time.perf_counter()
    check_answer(await contender.sequential(), 1)
    one = max(time.perf_counter() - start, 1e-7)
    batch = max(1, int(0.02 / one))
    gc.collect()
    per_run: list[float] = []
    runs = 0
    begin = time.perf_counter()
    while True:
        start = time.perf_counter()
        for _ in range(batch):
            check_answer(await contender.sequential(), 1)
        per_run.append((time.perf_counter() - start) / batch)
        runs += batch
        if time.perf_counter() - begin >= spec.min_time and len(per_run) >= 3:
            break
        if spec.min_time <= 0:
            break
    return statistics.median(per_run) * 1e6, runs


async def _time_fanout(contender: Contender, spec: WorkerSpec) -> tuple[float, int]:
    warm = min(spec.n, 100)
    start = time.perf_counter()
    check_answer(await contender.fanout(warm), warm)
    # A full-size warm-up too (heap growth to N tasks is not the steady state), unless
    # it would take long: slow peers at large N would double the run for little gain.
    if spec.n > warm and (time.perf_counter() - start) * spec.n / warm <= _FULL_WARMUP_MAX:
        check_answer(await contender.fanout(spec.n), spec.n)
    gc.collect()
    per_delegation: list[float] = []
    begin = time.perf_counter()
    while True:
        start = time.perf_counter()
        answer = await contender.fanout(spec.n)
        per_delegation.append((time.perf_counter() - start) / spec.n)
        check_answer(answer, spec.n)
        if time.perf_counter() - begin >= spec.min_time or spec.min_time <= 0:
            break
    return statistics.median(per_delegation) * 1e6, len(per_delegation)


async def measure(spec: WorkerSpec) -> WorkerResult:
    """Run the measurement ``spec`` describes in this process."""
    factory = load_factory(spec.target)
    contender: Contender = factory(child_yields=spec.kind == "memory")
    rss_setup = peak_rss_kib()
    us: float | None = None
    per_bytes: float | None = None
    if spec.kind == "sequential":
        us, runs = await _time_sequential(contender, spec)
    elif spec.kind == "fanout":
        us, runs = await _time_fanout(contender, spec)
    else:
        warm = min(spec.n, 100)
        check_answer(await contender.fanout(warm), warm)
        answer, peak = await traced_peak(lambda: contender.fanout(spec.n))
        check_answer(answer, spec.n)
        per_bytes, runs = peak / spec.n, 1
    expected = 1 if spec.kind == "sequential" else spec.n
    return WorkerResult(
        name=contender.name,
        version=contender.version,
        kind=spec.kind,
        n=spec.n,
        runs=runs,
        answer=f"done:{expected}",
        us=us,
        bytes_per_delegation=per_bytes,
        rss_setup_kib=rss_setup,
        rss_peak_kib=peak_rss_kib(),
    )


def main(argv: list[str] | None = None) -> int:
    """Worker entry point: measure the spec in ``argv[0]`` and print the result as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m deputy_runtime._bench._worker SPEC_JSON", file=sys.stderr)
        return 2
    spec = msgspec.json.decode(args[0], type=WorkerSpec)
    result = anyio.run(measure, spec, backend=spec.backend)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
