"""Real LeadAgents in several OS processes sharing one exclusive key and one budget.

Each worker process (``tests.redis.delegation_worker``) runs a LeadAgent on the scripted
model against the fixture's redis-server; half run on asyncio and half on trio.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import AgentDefinition, Chat, DelegationPolicy, ExclusiveResource, LeadAgent
from deputy_runtime.chat import ScriptedProvider
from deputy_runtime.redis import RedisBudget, RedisCoordinator
from tests.runtime.helpers import delegate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
BACKENDS = ("asyncio", "trio")


def start_worker(backend: str, mode: str, args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.redis.delegation_worker", backend, mode, json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    # The timeout only guards against a hang.
    out, err = process.communicate(timeout=55)
    assert process.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


async def ledger_state(url: str, namespace: str, name: str, limit: int) -> Any:
    async with RedisBudget(url, name, {"requests": limit}, namespace=namespace) as budget:
        return await budget.state()


def test_four_leads_of_fifty_delegations_never_overlap_on_one_key(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "holders.log"
    log.touch()
    args = {
        "url": redis_url,
        "namespace": namespace,
        "key": "one-exclusive-key",
        "delegations": 50,
        "file": str(log),
        # A holder renews every ttl/3: generous, so a loaded machine never lets a lease
        # lapse mid-delegation (which would fail it lease_lost, not overlap it).
        "ttl": 30.0,
    }
    workers = [start_worker(BACKENDS[i % 2], "lease", args) for i in range(PROCESSES)]
    results = [finish(w) for w in workers]
    assert [r["completed"] for r in results] == [50] * PROCESSES, results

    lines = log.read_text().splitlines()
    assert len(lines) == 2 * PROCESSES * 50
    previous = -1
    holders = set()
    # Every start is followed directly by the end of the same holder and token: nobody
    # else wrote in between, so no two holders overlapped; tokens strictly increase.
    for start, end in zip(lines[0::2], lines[1::2], strict=True):
        kind, token, holder = start.split()
        assert kind == "start", start
        assert end == f"end {token} {holder}", (start, end)
        assert int(token) > previous
        previous = int(token)
        holders.add(holder)
    assert len(holders) == PROCESSES * 50
    # The shared budget (combined with the lease) counted every request, the leads' own
    # included, holding none.
    state = anyio.run(ledger_state, redis_url, namespace, "lease-budget", 1_000_000)
    assert state.used.requests == sum(r["run_requests"] for r in results)
    assert sum(r["run_requests"] - r["requests"] for r in results) == 2 * PROCESSES
    assert (state.reserved.requests, state.holders) == (0, 0)


def test_four_leads_fanning_out_a_hundred_share_150_requests(
    redis_url: str, namespace: str
) -> None:
    name = f"budget-{uuid.uuid4().hex[:8]}"
    args = {"url": redis_url, "namespace": namespace, "name": name, "limit": 150, "tasks": 100}
    workers = [start_worker(BACKENDS[i % 2], "budget", args) for i in range(PROCESSES)]
    results = [finish(w) for w in workers]
    calls = sum(r["calls"] for r in results)
    assert 0 < calls <= 150
    for r in results:
        assert r["requests"] == r["calls"]  # each process's records match its provider
    state = anyio.run(ledger_state, redis_url, namespace, name, 150)
    assert state.used.requests == calls
    assert (state.reserved.requests, state.holders) == (0, 0)
    assert state.remaining.requests == 150 - calls


def test_four_leads_asking_for_a_hundred_delegations_each_spend_150_and_conclude(
    redis_url: str, namespace: str
) -> None:
    name = f"budget-{uuid.uuid4().hex[:8]}"
    args = {"url": redis_url, "namespace": namespace, "name": name, "limit": 150, "tasks": 100}
    workers = [start_worker(BACKENDS[i % 2], "fanout", args) for i in range(PROCESSES)]
    results = [finish(w) for w in workers]
    calls = sum(r["calls"] for r in results)
    # Every model request of every process, the leads' own included, is on the ledger,
    # and together they never pass its limit.
    state = anyio.run(ledger_state, redis_url, namespace, name, 150)
    assert state.used.requests == calls <= 150
    assert (state.reserved.requests, state.holders) == (0, 0)
    started = [r for r in results if r["calls"] > 0]
    assert started
    for r in results:
        assert r["run_requests"] == r["calls"]
        if r["calls"] == 0:
            # Started after the others had reserved all of it: refused its first request.
            assert (r["stop_reason"], r["statuses"]) == ("request_limit", []), r
            continue
        # A lead that made its first request kept its next one and concluded; what did
        # not fit did not start.
        assert r["stop_reason"] == "complete", r
        assert set(r["statuses"]) <= {"completed complete", "not_started request_limit"}, r
    assert sum(r["completed"] for r in results) == calls - 2 * len(started)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_holder_passes_its_lease_on_and_its_reservation_returns_once(
    redis_url: str, namespace: str, backend: str
) -> None:
    name = f"budget-{uuid.uuid4().hex[:8]}"
    ttl = 1.0
    args = {
        "url": redis_url,
        "namespace": namespace,
        "name": name,
        "limit": 10,
        "key": "repo",
        "ttl": ttl,
    }
    process = start_worker(backend, "hold", args)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        killed_token = int(json.loads(line)["token"])
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()

    async def next_holder() -> tuple[int | None, Any, float]:
        async with RedisCoordinator(
            redis_url,
            budget_name=name,
            limits={"requests": 10},
            namespace=namespace,
            lease_ttl=ttl,
            reserve_ttl=ttl,
        ) as coord:
            # The killed process's reservations are still held: its delegation's 2
            # requests, its lead's next request and its spare (its first was settled).
            before = await coord.budget.state()
            assert (before.reserved.requests, before.used.requests) == (2 + 1 + 1, 1)
            tokens: list[int | None] = []

            def chat(definition: AgentDefinition, context: Any) -> Chat:
                tokens.append(context.lease_token)
                return Chat(ScriptedProvider(["done"]))

            lead = LeadAgent(
                Chat(ScriptedProvider({"lead": [delegate("worker"), "ok"]})),
                [AgentDefinition("worker", description="w", prompt="w", max_requests=2)],
                delegation_policy=DelegationPolicy(
                    resource_modes=(ExclusiveResource("repo", wait=True, backend=coord.leases),),
                    chat=chat,
                ),
                shared_budget=coord.budget,
            )
            # The delegation waits until the killed holder's lease expires.
            started = anyio.current_time()
            await lead.run("go")
            assert lead.list_subagents()[-1].status == "completed"
            waited = anyio.current_time() - started
            return tokens[-1], await coord.budget.state(), waited

    token, state, waited = anyio.run(next_holder, backend=backend)
    assert token is not None
    assert token > killed_token
    assert waited < 10 * ttl  # bounded by the TTL (loose: the machine may be loaded)
    # The killed reservations came back exactly once: what counts is the killed lead's
    # first request, the new lead's two and its delegation's one.
    assert (state.used.requests, state.reserved.requests, state.holders) == (1 + 2 + 1, 0, 0)
    assert state.remaining.requests == 10 - 4
