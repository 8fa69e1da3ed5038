"""MCP overhead: a tool call through deputy_runtime vs the SDK client, and server start cost.

    python benchmarks/mcp_overhead.py [--quick] [--backend asyncio|trio]

1. **Per call.** Two processes of the same minimal stdio server (the standard-library
   server of the tests, ``tests/mcp/servers/tiny.py``, which answers in microseconds so
   the client side is what is measured). One is driven by the MCP SDK directly
   (``stdio_client`` + ``ClientSession.call_tool``), the other through deputy_runtime
   (``McpSession`` -> ``Tool`` -> ``invoke_tool``: argument validation, the call, result
   conversion, the call event). Batches alternate between the two so machine load hits
   both alike; the median per-call time of each and their ratio are reported. Target:
   within 1.2x.
2. **Per call through a delegation.** The same ``whoami`` call made by a subagent of a
   ``LeadAgent`` with the server attached (``McpResource``, shared mode, started before
   timing): one delegation makes K calls, one per scripted model turn, so each call
   passes the permission ceiling, the lead's hooks, the per-call recheck and the event
   stream. Per call = (wall of a delegation with K calls - wall of one with no call) / K,
   against the SDK client's median per call measured in batches interleaved with them.
   Target: within 1.2x. Also reported: the part beyond the same delegation calling a
   local no-op tool instead (what MCP adds to a delegated tool call; the rest is the
   runtime's per-call and per-turn cost).
3. **Owned start per delegation.** N delegations in one turn, each with its own server
   (owned mode, the minimal server), N = 1, 4, 16: wall of the lead's run divided by N,
   and the median server start time the ``McpServerEvent`` events report.
4. **Start.** Wall time of ``async with server.session()`` (spawn, MCP handshake, first
   tool listing, then close and reap) for N servers started in parallel, N = 1, 4, 16,
   with the minimal server; and one start of an SDK-written server (``reader.py``), whose
   import of the SDK dominates.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from deputy_runtime import LeadAgent, agent_definition, chat  # noqa: E402
from deputy_runtime.chat import (  # noqa: E402
    ContentToolResult,
    ModelRequest,
    reply,
    tool_call,
    tool_calls,
)
from deputy_runtime.mcp import McpResource, McpServer, McpStdio  # noqa: E402
from deputy_runtime.runtime import (  # noqa: E402
    DelegationPolicy,
    Event,
    McpServerEvent,
    UsageLimits,
)
from deputy_runtime.tools import invoke_tool, tool  # noqa: E402

SERVERS = HERE.parent / "tests" / "mcp" / "servers"
TINY = str(SERVERS / "tiny.py")
READER = str(SERVERS / "reader.py")


def server(name: str, script: str) -> McpServer:
    return McpServer(name, McpStdio(command=sys.executable, args=(script, "bench")))


async def per_call(batches: int, batch: int) -> dict[str, float]:
    params = StdioServerParameters(command=sys.executable, args=[TINY, "bench"])
    with open("/dev/null", "w") as devnull:
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as sdk,
            server("tiny", TINY).session() as ours,
        ):
            await sdk.initialize()
            (whoami,) = [t for t in ours.tools() if t.name == "mcp__tiny__whoami"]
            for _ in range(batch):  # warm both paths
                await sdk.call_tool("whoami", {})
                await invoke_tool(whoami, {})
            sdk_times: list[float] = []
            our_times: list[float] = []
            for _ in range(batches):
                start = time.perf_counter()
                for _ in range(batch):
                    await sdk.call_tool("whoami", {})
                sdk_times.append((time.perf_counter() - start) / batch)
                start = time.perf_counter()
                for _ in range(batch):
                    await invoke_tool(whoami, {})
                our_times.append((time.perf_counter() - start) / batch)
    sdk_med, our_med = statistics.median(sdk_times), statistics.median(our_times)
    return {"sdk": sdk_med, "ours": our_med, "ratio": our_med / sdk_med}


def _results(request: ModelRequest) -> int:
    return sum(
        1 for turn in request.turns for c in turn.contents if isinstance(c, ContentToolResult)
    )


@tool(read_only=True)
def noop() -> str:
    """A local tool that returns at once (the delegation path without MCP)."""
    return "ok"


def _lead(mode: str, calls: int, fanout: int, *, local: bool = False) -> LeadAgent:
    """A lead delegating ``fanout`` times in one turn to a worker making ``calls`` calls
    (of ``whoami`` on the server, or of the local ``noop`` tool)."""
    name = "noop" if local else "mcp__tiny__whoami"

    def lead_model(request: ModelRequest) -> Any:
        if not isinstance(request.turns[-1].contents[-1], ContentToolResult):
            delegate = {"agent_name": "worker", "task": "ask"}
            return tool_calls(*[("delegate_to_agent", delegate)] * fanout)
        return reply("done")

    def worker_model(request: ModelRequest) -> Any:
        if _results(request) < calls:
            return tool_call(name, {})
        return reply("done")

    worker = agent_definition(
        "worker",
        "Asks.",
        "Ask.",
        tools=(noop,) if local else (),
        mcp_tools=() if local else ("mcp__tiny__whoami",),
        max_requests=calls + 2,
    )
    return LeadAgent(
        chat("scripted", script={"lead": lead_model, "worker": worker_model}),
        [worker],
        usage_limits=UsageLimits(max_requests=None),
        delegation_policy=DelegationPolicy(
            resource_modes=(McpResource(server("tiny", TINY), mode=mode),)
        ),
    )


async def _timed(lead: LeadAgent) -> float:
    start = time.perf_counter()
    await lead.run("go")
    return time.perf_counter() - start


async def through_delegation(repeats: int, calls: int) -> dict[str, float]:
    """Per-call cost of an MCP call made by a subagent (see the module docstring).

    SDK batches of ``calls`` calls are interleaved with the delegations, so both see the
    same machine load (and whatever earlier measurements left running).
    """
    mcp = _lead("shared", calls, 1)
    empty = _lead("shared", 0, 1)
    local = _lead("shared", calls, 1, local=True)
    params = StdioServerParameters(command=sys.executable, args=[TINY, "bench"])
    with open("/dev/null", "w") as devnull:
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as sdk,
            mcp,
            empty,
            local,
        ):
            await sdk.initialize()
            for lead in (mcp, empty, local):
                await lead.run("warm")  # starts the shared server outside the timing
            times: dict[str, list[float]] = {"sdk": [], "mcp": [], "empty": [], "local": []}
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(calls):
                    await sdk.call_tool("whoami", {})
                times["sdk"].append((time.perf_counter() - start) / calls)
                times["mcp"].append(await _timed(mcp))
                times["empty"].append(await _timed(empty))
                times["local"].append(await _timed(local))
    med = {key: statistics.median(values) for key, values in times.items()}
    per_call = (med["mcp"] - med["empty"]) / calls
    mcp_part = (med["mcp"] - med["local"]) / calls
    return {
        "sdk": med["sdk"],
        "delegated": per_call,
        "ratio": per_call / med["sdk"],
        "beyond_local_tool": mcp_part,
        "beyond_local_tool_ratio": mcp_part / med["sdk"],
    }


async def owned_starts(n: int) -> dict[str, float]:
    """Owned mode: the lead's run wall per delegation, and the servers' own start times."""
    lead = _lead("owned", 1, n)
    starts: list[float] = []

    def on_event(event: Event) -> None:
        if isinstance(event, McpServerEvent) and event.action == "start":
            starts.append(event.duration)

    async with lead:
        begin = time.perf_counter()
        await lead.run("go", on_event=on_event)
        wall = time.perf_counter() - begin
    assert len(starts) == n, starts
    return {"wall": wall, "per_delegation": wall / n, "median_start": statistics.median(starts)}


async def starts(n: int, script: str) -> float:
    """Wall seconds to start (and then close) ``n`` servers in parallel."""

    async def one(i: int) -> None:
        async with server(f"s{i}", script).session():
            pass

    begin = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return time.perf_counter() - begin


async def main(args: argparse.Namespace) -> dict[str, Any]:
    batches, batch = (5, 50) if args.quick else (15, 200)
    calls = await per_call(batches, batch)
    print(
        f"per call: SDK client {calls['sdk'] * 1e6:,.0f} us, deputy_runtime Tool "
        f"{calls['ours'] * 1e6:,.0f} us, ratio {calls['ratio']:.2f}x (target <= 1.2x)"
    )
    results: dict[str, Any] = {"per_call": calls, "start": {}, "owned": {}}
    delegated = await through_delegation(3 if args.quick else 9, 50)
    results["delegated_call"] = delegated
    print(
        f"per call through a delegation: {delegated['delegated'] * 1e6:,.0f} us vs SDK "
        f"client {delegated['sdk'] * 1e6:,.0f} us (interleaved), ratio {delegated['ratio']:.2f}x "
        "(target <= 1.2x); beyond the same delegation calling a local no-op tool: "
        f"{delegated['beyond_local_tool'] * 1e6:,.0f} us, "
        f"{delegated['beyond_local_tool_ratio']:.2f}x"
    )
    for n in (1, 4, 16):
        owned = await owned_starts(n)
        results["owned"][n] = owned
        print(
            f"owned: {n:>2} parallel delegations, {owned['per_delegation'] * 1e3:,.1f} ms "
            f"per delegation (run wall {owned['wall'] * 1e3:,.0f} ms), median server "
            f"start {owned['median_start'] * 1e3:,.1f} ms"
        )
    for n in (1, 4, 16):
        runs = [await starts(n, TINY) for _ in range(1 if args.quick else 3)]
        wall = statistics.median(runs)
        results["start"][n] = wall
        print(
            f"start+close {n:>2} minimal servers in parallel: {wall * 1e3:,.0f} ms wall, "
            f"{wall / n * 1e3:,.1f} ms per server"
        )
    sdk_start = await starts(1, READER)
    results["start_sdk_server"] = sdk_start
    print(f"start+close 1 SDK-written server: {sdk_start * 1e3:,.0f} ms (mostly its imports)")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches and repetitions")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    ns = parser.parse_args()
    anyio.run(main, ns, backend=ns.backend)
