"""Cost per delegation of tracing: off, on, and the floor of the bare spans it emits.

    python benchmarks/tracing_overhead.py [--n N] [--reps R] [--backend B] [--capture-content]
                                          [--json FILE]

The same contender as ``run.py``'s deputy_runtime fan-out (a LeadAgent with permissions,
a PreToolUse hook, budgets and every event consumed), one process, one event loop. Each
repetition runs, back to back so drifts hit all alike:

* **off**: one fan-out of N delegations with tracing off;
* **on**: the same fan-out with tracing on (the SDK's ``TracerProvider``, a
  ``SimpleSpanProcessor`` into an ``InMemorySpanExporter``, cleared after each run,
  content capture off unless ``--capture-content``);
* **floor**: the spans that traced fan-out recorded, created again with the SDK directly
  on the same provider: the same tree (each span current while its children start, as
  the runtime attaches it), names, kinds and attributes, the attributes the runtime sets
  at the end (usage, status, decision) set after the start as it does. It is what any
  instrumentation emitting these spans pays to the SDK.

Reported per delegation, best of R: off, on, floor, and the runtime's own tracing cost
``on - off - floor`` (the target is at most 50 us). Tracing off is compared with no
tracing code at all by counting the ``STATE.tracer`` checks an untraced fan-out makes
(each one attribute read and an ``is None`` test, timed in the same run): the
checks' share of the untraced delegation is the most tracing-off can cost (target 2 %).
Needs ``opentelemetry-sdk``.
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import deputy_runtime._tracing as tracing_state
from deputy_runtime import tracing
from deputy_runtime._bench._deputy import create
from deputy_runtime._bench._shape import CHILD_ANSWER, done

#: The first attribute of a span that the runtime sets after the start (its outcome).
_SET_LATER = frozenset(
    {
        "gen_ai.usage.input_tokens",
        "deputy.delegation.status",
        "deputy.stop_reason",
        "deputy.permission.decision",
    }
)


class Result(msgspec.Struct):
    """One benchmark run's figures, in microseconds per delegation (best of reps)."""

    n: int
    reps: int
    backend: str
    capture_content: bool
    off_us: float
    on_us: float
    floor_us: float
    added_us: float
    runtime_us: float
    spans: int
    checks_per_delegation: float
    check_ns: float
    off_share: float


class _Node:
    __slots__ = ("children", "kind", "late", "name", "start")

    def __init__(self, span: ReadableSpan) -> None:
        self.name = span.name
        self.kind = span.kind
        items = list((span.attributes or {}).items())
        cut = next((i for i, (k, _) in enumerate(items) if k in _SET_LATER), len(items))
        self.start: Mapping[str, Any] = dict(items[:cut])
        self.late: Mapping[str, Any] = dict(items[cut:])
        self.children: list[_Node] = []


def _tree(spans: Sequence[ReadableSpan]) -> list[_Node]:
    """The recorded spans as trees, children in start order."""
    nodes = {s.context.span_id: (_Node(s), s) for s in spans}
    roots: list[_Node] = []
    for node, span in sorted(nodes.values(), key=lambda pair: pair[1].start_time or 0):
        parent = nodes.get(span.parent.span_id) if span.parent is not None else None
        (parent[0].children if parent is not None else roots).append(node)
    return roots


def _replay(tracer: Any, nodes: Sequence[_Node]) -> None:
    """Create ``nodes`` again with the SDK directly: the floor."""
    for node in nodes:
        span = tracer.start_span(node.name, kind=node.kind, attributes=node.start)
        token = context.attach(trace.set_span_in_context(span))
        _replay(tracer, node.children)
        if node.late:
            span.set_attributes(node.late)
        context.detach(token)
        span.end()


class _CountingState:
    """Stands in for ``STATE`` to count how often the runtime reads ``tracer``."""

    def __init__(self) -> None:
        self.reads = 0
        self.capture_content = False

    @property
    def tracer(self) -> None:
        self.reads += 1
        return None


async def _count_checks(contender: Any, n: int) -> float:
    """``STATE.tracer`` reads per delegation of an untraced fan-out."""
    import deputy_runtime.runtime._agent as agent_module
    import deputy_runtime.runtime._coordinator as coordinator_module

    counting = _CountingState()
    modules = (agent_module, coordinator_module)
    saved = [m.STATE for m in modules]  # type: ignore[attr-defined]
    for m in modules:
        m.STATE = counting  # type: ignore[attr-defined]
    try:
        await contender.fanout(n)
    finally:
        for m, state in zip(modules, saved, strict=True):
            m.STATE = state  # type: ignore[attr-defined]
    return counting.reads / n


def _check_ns() -> float:
    """The cost of one tracing-off check, ``STATE.tracer is not None``, in ns."""
    namespace = {"STATE": tracing_state.STATE}
    loops = 1_000_000
    best = min(timeit.repeat("STATE.tracer is not None", globals=namespace, number=loops, repeat=5))
    empty = min(timeit.repeat("pass", number=loops, repeat=5))
    return max(0.0, best - empty) / loops * 1e9


async def measure(n: int, reps: int, backend: str, capture_content: bool) -> Result:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("floor")
    contender = create()
    expected = done([CHILD_ANSWER] * n)
    off: list[float] = []
    on: list[float] = []
    floor: list[float] = []
    spans = 0
    await contender.fanout(n)  # warm-up: imports, caches
    for _ in range(reps):
        tracing.disable()
        start = time.perf_counter()
        answer = await contender.fanout(n)
        off.append(time.perf_counter() - start)
        assert answer == expected, answer
        tracing.configure(provider, capture_content=capture_content)
        start = time.perf_counter()
        answer = await contender.fanout(n)
        on.append(time.perf_counter() - start)
        tracing.disable()
        assert answer == expected, answer
        recorded = exporter.get_finished_spans()
        spans = len(recorded)
        roots = _tree(recorded)
        exporter.clear()
        start = time.perf_counter()
        _replay(tracer, roots)
        floor.append(time.perf_counter() - start)
        assert len(exporter.get_finished_spans()) == spans
        exporter.clear()
    provider.shutdown()
    checks = await _count_checks(contender, n)
    check_ns = _check_ns()
    best_off, best_on, best_floor = min(off) / n, min(on) / n, min(floor) / n
    return Result(
        n=n,
        reps=reps,
        backend=backend,
        capture_content=capture_content,
        off_us=best_off * 1e6,
        on_us=best_on * 1e6,
        floor_us=best_floor * 1e6,
        added_us=(best_on - best_off) * 1e6,
        runtime_us=(best_on - best_off - best_floor) * 1e6,
        spans=spans,
        checks_per_delegation=checks,
        check_ns=check_ns,
        off_share=checks * check_ns / (best_off * 1e9),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="delegations per fan-out")
    parser.add_argument("--reps", type=int, default=7, help="repetitions (best is reported)")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument(
        "--capture-content", action="store_true", help="record prompts and results too"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    r = anyio.run(
        measure, args.n, args.reps, args.backend, args.capture_content, backend=args.backend
    )
    content = ", content captured" if r.capture_content else ""
    print(
        f"fan-out of {r.n} on {r.backend}, best of {r.reps}, {r.spans} spans per fan-out{content}"
    )
    print(f"tracing off:                    {r.off_us:8.1f} us per delegation")
    print(f"tracing on (in-memory SDK):     {r.on_us:8.1f} us per delegation")
    print(f"added by tracing (on - off):    {r.added_us:8.1f} us per delegation")
    print(f"floor (same spans, SDK direct): {r.floor_us:8.1f} us per delegation")
    print(f"runtime's own (added - floor):  {r.runtime_us:8.1f} us per delegation (target <= 50)")
    print(
        f"tracing off: {r.checks_per_delegation:.1f} checks per delegation x "
        f"{r.check_ns:.1f} ns = {r.off_share:.3%} of the untraced delegation (target <= 2%)"
    )
    if args.json is not None:
        args.json.write_bytes(msgspec.json.encode(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
