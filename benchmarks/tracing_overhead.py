"""Cost per delegation of tracing: off, and on with the SDK's in-memory exporter.

    python benchmarks/tracing_overhead.py [--n N] [--reps R] [--backend B]

The same contender as ``run.py``'s deputy_runtime fan-out (a LeadAgent with permissions,
a PreToolUse hook, budgets and every event consumed), one process, one event loop. Each
repetition runs one fan-out of N delegations with tracing off, then one with tracing on
(``SimpleSpanProcessor`` into an ``InMemorySpanExporter``, cleared after each run, content
capture off), so drifts hit both alike; the best of R repetitions is reported per
delegation, with the number of spans one fan-out records. Needs ``opentelemetry-sdk``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deputy_runtime import tracing
from deputy_runtime._bench._deputy import create
from deputy_runtime._bench._shape import CHILD_ANSWER, done


async def measure(n: int, reps: int) -> tuple[float, float, int]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    contender = create()
    expected = done([CHILD_ANSWER] * n)
    off: list[float] = []
    on: list[float] = []
    spans = 0
    await contender.fanout(n)  # warm-up: imports, caches
    for _ in range(reps):
        tracing.disable()
        start = time.perf_counter()
        answer = await contender.fanout(n)
        off.append(time.perf_counter() - start)
        assert answer == expected, answer
        tracing.configure(provider)
        start = time.perf_counter()
        answer = await contender.fanout(n)
        on.append(time.perf_counter() - start)
        tracing.disable()
        assert answer == expected, answer
        spans = len(exporter.get_finished_spans())
        exporter.clear()
    provider.shutdown()
    return min(off) / n, min(on) / n, spans


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="delegations per fan-out")
    parser.add_argument("--reps", type=int, default=7, help="repetitions (best is reported)")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    args = parser.parse_args()
    off, on, spans = anyio.run(measure, args.n, args.reps, backend=args.backend)
    print(f"fan-out of {args.n} on {args.backend}, best of {args.reps}")
    print(f"tracing off:                 {off * 1e6:8.1f} us per delegation")
    print(f"tracing on (in-memory SDK):  {on * 1e6:8.1f} us per delegation")
    print(f"added by tracing:            {(on - off) * 1e6:8.1f} us per delegation")
    print(f"spans per fan-out:           {spans}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
