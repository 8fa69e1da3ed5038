"""Agent-loop overhead: deputy_runtime's Agent vs calling the provider in a loop.

    python benchmarks/agent_loop.py [--quick] [--reps N]

Both sides use the same zero-latency ``ScriptedProvider`` (a responder callable, request
log off) and the same read-only ``@tool``. The floor is the least code that holds the same
conversation: build the request, call ``provider.complete``, append the reply, call the
tool function, append its result, repeat. The agent adds what it is for: argument
validation, permission checks, hooks, usage limits, events, ids and the result. Runs of
K = 1 request (answer at once) and K = 5 requests (four tool rounds, then the answer) are
reported per model request, as a ratio to the floor with the same K, measured in the same
run by the same worker-process harness as the delegation benchmark. Target: under 2x.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from deputy_runtime.chat import (  # noqa: E402
    AssistantTurn,
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    ScriptedProvider,
    Turn,
    Usage,
)
from deputy_runtime.tools import Tool, tool  # noqa: E402

SYSTEM = "You are a benchmark agent."
ANSWER = "finished"
USAGE = Usage(requests=1, input_tokens=12, output_tokens=4)


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


def _provider(k: int) -> ScriptedProvider:
    """A scripted provider that asks for ``k - 1`` tool calls, then answers."""

    def respond(request: ModelRequest) -> AssistantTurn:
        done = (len(request.turns) - 1) // 2  # user task, then (call, result) pairs
        if done < k - 1:
            call = ContentToolRequest(f"call_{done}", "lookup", {"key": f"k{done}"})
            return AssistantTurn((call,), USAGE, "tool_use")
        return AssistantTurn((ContentText(ANSWER),), USAGE, "stop")

    return ScriptedProvider({None: respond}, usage=USAGE, record=False)


class Floor:
    """The provider called directly in a hand-written loop."""

    version = ""

    def __init__(self, k: int) -> None:
        self.name = f"floor K={k}"
        self.k = k
        self.provider = _provider(k)
        self.tools: dict[str, Tool] = {"lookup": lookup}
        self.specs = (lookup.spec(),)

    async def run(self) -> str:
        turns = [Turn("user", (ContentText("go"),))]
        while True:
            reply = await self.provider.complete(ModelRequest(SYSTEM, tuple(turns), self.specs))
            turns.append(reply.turn())
            calls = reply.tool_requests
            if not calls:
                return reply.text
            results = tuple(
                ContentToolResult(c.id, value=self.tools[c.name].function(**c.arguments))
                for c in calls
            )
            turns.append(Turn("user", results))

    async def sequential(self) -> str:
        return "done:1" if await self.run() == ANSWER else "wrong"

    async def fanout(self, n: int) -> str:
        raise NotImplementedError


class AgentContender:
    """deputy_runtime's Agent; ``governed`` adds a PreToolUse hook and usage limits,
    ``stream`` consumes every event through ``run_stream``."""

    def __init__(self, k: int, governed: bool = False, stream: bool = False) -> None:
        from deputy_runtime import Agent, HookEvent, Hooks, UsageLimits, __version__

        self.name = f"agent K={k}{' governed' if governed else ''}{' stream' if stream else ''}"
        self.version = f"deputy_runtime {__version__}"
        self.stream = stream
        hooks = Hooks()
        if governed:
            hooks.add(HookEvent.PreToolUse, lambda hook_input: None)
        limits = UsageLimits(max_requests=10**6, max_tool_calls=10**6) if governed else None
        self.agent = Agent(
            Chat(_provider(k), system_prompt=SYSTEM),
            tools=[lookup],
            hooks=hooks,
            usage_limits=limits,
        )

    async def sequential(self) -> str:
        # Each run is a fresh conversation, as in the floor.
        self.agent.chat.set_turns(())
        if self.stream:
            async for _event in self.agent.run_stream("go"):
                pass
            result = self.agent.last_result
            answer = "" if result is None else result.response
        else:
            answer = (await self.agent.run("go")).response
        return "done:1" if answer == ANSWER else f"wrong: {answer!r}"

    async def fanout(self, n: int) -> str:
        raise NotImplementedError


def floor_1(**_: Any) -> Floor:
    return Floor(1)


def floor_5(**_: Any) -> Floor:
    return Floor(5)


def agent_1(**_: Any) -> AgentContender:
    return AgentContender(1)


def agent_5(**_: Any) -> AgentContender:
    return AgentContender(5)


def governed_1(**_: Any) -> AgentContender:
    return AgentContender(1, governed=True)


def governed_5(**_: Any) -> AgentContender:
    return AgentContender(5, governed=True)


def stream_1(**_: Any) -> AgentContender:
    return AgentContender(1, governed=True, stream=True)


def stream_5(**_: Any) -> AgentContender:
    return AgentContender(5, governed=True, stream=True)


VARIANTS = (
    ("floor_1", "floor (provider in a loop)", 1),
    ("agent_1", "Agent.run (defaults)", 1),
    ("governed_1", "Agent.run + PreToolUse hook + limits", 1),
    ("stream_1", "Agent.run_stream + hook + limits", 1),
    ("floor_5", "floor (provider in a loop)", 5),
    ("agent_5", "Agent.run (defaults)", 5),
    ("governed_5", "Agent.run + PreToolUse hook + limits", 5),
    ("stream_5", "Agent.run_stream + hook + limits", 5),
)


def table(results: dict[str, Any], markdown: bool = False) -> str:
    """Per-request figures with ratios to the floor of the same K."""
    seq = results["summary"]["sequential"]
    header = ["K", "contender", "us per request, median [min-max]", "x floor"]
    rows = []
    for key, label, k in VARIANTS:
        if key not in seq:
            continue
        s = seq[key]["us"]
        paired = seq[key].get("ratios", {}).get(f"floor_{k}")  # same-repetition ratio
        ratio = "-" if paired is None else f"{paired:.2f}x"
        figure = f"{s['median'] / k:.1f} [{s['min'] / k:.1f}-{s['max'] / k:.1f}]"
        rows.append([str(k), label, figure, ratio])
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---:|---|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
    )


def main(argv: list[str] | None = None) -> int:
    from deputy_runtime._bench._runner import BenchConfig, ContenderSpec, run_benchmarks

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--update-readme", action="store_true", help="rewrite README tables")
    args = parser.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    config = BenchConfig(
        sizes=(),
        memory_sizes=(),
        reps=reps,
        memory_reps=0,
        seq_min_time=0.2 if args.quick else 0.5,
        seq_warmup=50,
    )
    specs = [
        ContenderSpec(
            key, label, f"{Path(__file__).resolve()}:{key}", floor=key.startswith("floor")
        )
        for key, label, _ in VARIANTS
    ]
    results = run_benchmarks(config, specs, lambda line: print(line, file=sys.stderr, flush=True))
    results["meta"]["benchmark"] = "agent_loop"
    from run import source_revision, update_readme

    results["meta"]["source"] = source_revision()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = (
        args.out
        or HERE / "results" / f"agent_loop-{'quick' if args.quick else 'full'}-{stamp}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(table(results))
    for error in results["errors"]:
        print(f"ERROR: {error['error']}")
    print(f"results: {out}", file=sys.stderr)
    if args.update_readme:
        meta = results["meta"]
        block = (
            f"Run {meta['started_utc']} ({meta['seconds']:.0f} s): {meta['implementation']} "
            f"{meta['python']}, {meta['cpu_count']} CPUs; {reps} repetitions, each in a fresh "
            f"worker process; source {meta['source']}.\n\n{table(results, markdown=True)}"
        )
        update_readme(block, "<!-- agent-loop:start -->", "<!-- agent-loop:end -->")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
