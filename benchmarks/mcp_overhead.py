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
2. **Start.** Wall time of ``async with server.session()`` (spawn, MCP handshake, first
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

from deputy_runtime.mcp import McpServer, McpStdio  # noqa: E402
from deputy_runtime.tools import invoke_tool  # noqa: E402

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
    results: dict[str, Any] = {"per_call": calls, "start": {}}
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
