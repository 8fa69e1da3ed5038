"""Redis leases + shared budget overhead vs today's in-process lease table.

    python benchmarks/redis_overhead.py [--cycles N] [--reps R] [--url URL] [--backend B]

Without ``--url`` it starts its own ``redis-server`` (127.0.0.1, a free port, persistence
off, a temp dir) and stops it afterwards. One delegation's hot path is measured, in one
process and one event loop, as the best of R repetitions of N cycles:

* in-process: a ``threading.Lock``-guarded dict take + release, as the runtime's lease
  table does today (the in-process budget meter has no equivalent step);
* Redis combined: ``acquire_and_reserve`` + ``release_and_settle`` (two scripts);
* Redis separate: ``acquire`` + ``reserve`` + ``release`` + ``settle`` (four scripts);
* one trivial script (``return 1``): the floor of one round trip.

Then the same through real delegations: a LeadAgent (scripted model) runs N sequential
``delegate_to_agent`` calls on one exclusive key, with the in-process lease table and no
shared budget, then with ``RedisLeases`` + ``RedisBudget`` of one ``RedisCoordinator``
(the combined path) and with the two on separate connections (the separate path); the
added cost per delegation is the difference to the in-process run of the same process.

Round trips per cycle are counted by the server (``INFO commandstats``: script calls and
loads), so they include nothing the client might batch or hide. A plain ``PING`` loop in
the same run gives the floor of one round trip on this machine through this client.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deputy_runtime import AgentDefinition, Chat, DelegationPolicy, LeadAgent
from deputy_runtime.chat import ModelRequest, ScriptedProvider, tool_call
from deputy_runtime.redis import (
    RedisBudget,
    RedisConnection,
    RedisCoordinator,
    RedisLeases,
)
from deputy_runtime.runtime import (
    BudgetLedger,
    LeaseBackend,
    UsageLimits,
)

SERIAL = itertools.count()  # holder ids are single use on a ledger
WANT = {"requests": 1, "tool_calls": 5, "input_tokens": 1000, "output_tokens": 500}
USED = {"requests": 1, "tool_calls": 2, "input_tokens": 700, "output_tokens": 300}


def in_process_cycles(cycles: int) -> float:
    table: dict[str, object] = {}
    lock = threading.Lock()
    start = time.perf_counter()
    for i in range(cycles):
        holder = object()
        with lock:
            if "repo" in table:
                raise RuntimeError("busy")
            table["repo"] = holder
        with lock:
            if table.get("repo") is holder:
                del table["repo"]
        del i
    return time.perf_counter() - start


async def scripts_run(connection: RedisConnection) -> int:
    """Client requests the server got so far: script calls (EVALSHA/EVAL) and loads.

    Commands a script issues inside the server are not round trips and not counted.
    """
    info = await connection.run("return redis.call('INFO', 'commandstats')", [], [])
    total = 0
    for line in str(info).splitlines():
        name, _, stats = line.partition(":")
        if name in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_script|load"):
            total += int(stats.split(",")[0].removeprefix("calls="))
    return total


async def measure(
    coord: RedisCoordinator, cycles: int, reps: int, cycle: Callable[[str], Awaitable[None]]
) -> tuple[float, float]:
    """Best seconds per cycle over ``reps`` and round trips per cycle."""
    best = float("inf")
    trips = 0.0
    for _ in range(reps):
        before = await scripts_run(coord.connection)
        start = time.perf_counter()
        for _ in range(cycles):
            await cycle(f"d{next(SERIAL)}")
        elapsed = time.perf_counter() - start
        # -1: the script of the next reading counts itself.
        trips = (await scripts_run(coord.connection) - before - 1) / cycles
        best = min(best, elapsed / cycles)
    return best, trips


async def run_redis(url: str, cycles: int, reps: int) -> dict[str, tuple[float, float]]:
    name = f"bench-{time.monotonic_ns()}"
    async with RedisCoordinator(
        url, budget_name=name, limits={"requests": 10**12}, namespace="bench"
    ) as coord:

        async def combined(holder: str) -> None:
            lease, _ = await coord.acquire_and_reserve("repo", holder, WANT, wait=False)
            await coord.release_and_settle(lease, USED)

        async def separate(holder: str) -> None:
            lease = await coord.leases.acquire("repo", holder, wait=False)
            await coord.budget.reserve(holder, WANT)
            await coord.leases.release(lease)
            await coord.budget.settle(holder, USED)

        async def ping(holder: str) -> None:
            await coord.connection.run("return 1", [], [])

        await measure(coord, max(cycles // 10, 10), 1, combined)  # warm-up (script load)
        await measure(coord, max(cycles // 10, 10), 1, ping)
        return {
            "1 script": await measure(coord, cycles, reps, ping),
            "combined": await measure(coord, cycles, reps, combined),
            "separate": await measure(coord, cycles, reps, separate),
        }


def delegating_lead(
    delegations: int, backend: LeaseBackend | None, budget: BudgetLedger | None
) -> LeadAgent:
    """A lead whose scripted model delegates ``delegations`` times, one after another."""
    calls = iter(range(delegations))

    def lead_turn(request: ModelRequest) -> object:
        index = next(calls, None)
        if index is None:
            return "done"
        return tool_call("delegate_to_agent", {"agent_name": "worker", "task": f"t{index}"})

    if backend is None:
        policy = DelegationPolicy(resource_mode="exclusive", resource_key="repo")
    else:
        policy = DelegationPolicy(
            resource_mode="exclusive", resource_key="repo", lease_backend=backend
        )
    provider = ScriptedProvider({"lead": lead_turn, "worker": lambda r: "ok"}, record=False)
    return LeadAgent(
        Chat(provider),
        [AgentDefinition("worker", description="w", prompt="w", max_requests=1)],
        delegation_policy=policy,
        shared_budget=budget,
        usage_limits=UsageLimits(max_requests=None),
    )


async def run_delegations(url: str, delegations: int, reps: int) -> dict[str, tuple[float, float]]:
    """Best seconds per delegation and round trips per delegation, per configuration."""
    name = f"bench-delegations-{time.monotonic_ns()}"
    limits = {"requests": 10**12}
    out: dict[str, tuple[float, float]] = {}
    async with (
        RedisCoordinator(url, budget_name=name, limits=limits, namespace="bench") as coord,
        RedisLeases(url, namespace="bench") as leases,
        RedisBudget(url, name, limits, namespace="bench") as budget,
    ):
        configs: dict[str, tuple[LeaseBackend | None, BudgetLedger | None]] = {
            "in-process": (None, None),
            "redis combined": (coord.leases, coord.budget),
            "redis separate": (leases, budget),
        }
        for label, (backend, ledger) in configs.items():
            await delegating_lead(5, backend, ledger).run("warm up")
            best = float("inf")
            trips = 0.0
            for _ in range(reps):
                lead = delegating_lead(delegations, backend, ledger)
                before = await scripts_run(coord.connection)
                start = time.perf_counter()
                await lead.run("go")
                elapsed = time.perf_counter() - start
                trips = (await scripts_run(coord.connection) - before - 1) / delegations
                best = min(best, elapsed / delegations)
            out[label] = (best, trips)
    return out


def start_server(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed; pass --url or install it")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    persistence_off = ["--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory, *persistence_off],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise SystemExit("redis-server did not start")
        time.sleep(0.01)
    return process, f"redis://127.0.0.1:{port}/0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--url", default=None)
    parser.add_argument("--backend", choices=("asyncio", "trio", "both"), default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        process = None
        url = args.url
        if url is None:
            process, url = start_server(directory)
        try:
            local = min(in_process_cycles(args.cycles * 10) for _ in range(args.reps))
            local_us = local / (args.cycles * 10) * 1e6
            print(f"in-process lock table: {local_us:8.2f} us per take+release")
            backends = ("asyncio", "trio") if args.backend == "both" else (args.backend,)
            for backend in backends:
                results = anyio.run(run_redis, url, args.cycles, args.reps, backend=backend)
                for label, (seconds, trips) in results.items():
                    us = seconds * 1e6
                    print(
                        f"redis {label:8s} ({backend:7s}): {us:8.1f} us per cycle, "
                        f"{trips:.1f} round trips, {us / local_us:8.0f}x the in-process lock"
                    )
                n = max(args.cycles // 10, 20)
                delegations = anyio.run(run_delegations, url, n, args.reps, backend=backend)
                base = delegations["in-process"][0] * 1e6
                for label, (seconds, trips) in delegations.items():
                    us = seconds * 1e6
                    print(
                        f"delegation {label:14s} ({backend:7s}): {us:8.1f} us per delegation, "
                        f"{trips:.1f} round trips, +{us - base:7.1f} us, {us / base:5.2f}x"
                    )
        finally:
            if process is not None:
                process.terminate()
                process.wait()


if __name__ == "__main__":
    main()
