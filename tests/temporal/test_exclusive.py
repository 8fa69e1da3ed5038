"""Exclusive resources of durable delegations: leases kept by a real redis-server through
``RedisLeases``, two workers (each with its own Redis connection) and a real dev server."""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

pytest.importorskip("coredis", reason="the redis extra is not installed")

from deputy_runtime import AgentDefinition, Tool, UsageLimits, tool
from deputy_runtime.redis import RedisLeases
from deputy_runtime.runtime import Lease
from deputy_runtime.temporal import (
    DeputyActivities,
    ExclusiveResourceSpec,
    LeadOutput,
    current_delegation,
    data_converter,
    deputy_worker,
    lead_input,
    start_lead,
)
from tests.redis.redis_support import RedisServer
from tests.temporal.helpers import assert_replays, run_workflow_ids

pytestmark = pytest.mark.anyio

KEY = "shared-repo"
#: How long the guarded tool keeps the resource busy, so unguarded calls would overlap.
WORK_SECONDS = 0.3


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _guarded(log: Path) -> Tool:
    @tool
    async def guarded(step: str) -> str:
        """Work on the shared resource."""
        context = current_delegation()
        assert context is not None
        start = time.time()
        await anyio.sleep(WORK_SECONDS)  # the work itself: holds the resource for a while
        entry = [context.delegation_id, context.lease_token, start, time.time()]
        with log.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        return f"worked under token {context.lease_token}"

    return guarded


def _definitions(guarded: Tool) -> list[AgentDefinition]:
    return [
        AgentDefinition(
            n, f"Works on the repo ({n}).", "You work.", tools=(guarded,), max_requests=3
        )
        for n in ("alpha", "beta")
    ]


@contextlib.asynccontextmanager
async def _workers(
    client: Client,
    address: str,
    task_queue: str,
    redis_url: str,
    namespace: str,
    guarded: Tool,
    tmp: Path,
) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        # Two workers, each with its own connections to Temporal and to Redis.
        for own in (client, await Client.connect(address, data_converter=data_converter)):
            leases = await stack.enter_async_context(RedisLeases(redis_url, namespace=namespace))
            activities = DeputyActivities([guarded], working_dir=tmp, lease_backend=leases)
            await stack.enter_async_context(deputy_worker(own, activities, task_queue=task_queue))
        yield


async def test_two_leads_delegations_on_one_key_never_overlap(
    client: Client, temporal_address: str, task_queue: str, redis_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "work.log"
    guarded = _guarded(log)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    request = lead_input(
        "Work on the repo",
        _definitions(guarded),
        model="test",
        usage_limits=UsageLimits(max_requests=20),
        resources=(ExclusiveResourceSpec(key=KEY, wait=True),),
    )
    ids = [f"excl-{uuid.uuid4().hex}" for _ in range(2)]
    async with _workers(
        client, temporal_address, task_queue, redis_url, namespace, guarded, tmp_path
    ):
        handles = [
            await start_lead(client, request, workflow_id=i, task_queue=task_queue) for i in ids
        ]
        outs: list[LeadOutput] = [await h.result() for h in handles]
    records = [r for out in outs for r in out.subagents]
    assert len(records) == 4
    assert {(r.status, r.cleanup_error) for r in records} == {("completed", None)}
    entries = sorted(
        (json.loads(line) for line in log.read_text().splitlines()), key=lambda e: e[2]
    )
    assert sorted(e[0] for e in entries) == sorted(r.delegation_id for r in records)
    # The tools' own records: each interval ends before the next one starts, and the
    # fencing tokens grow in that order (each delegation held a later grant of the key).
    for earlier, later in itertools.pairwise(entries):
        assert earlier[3] <= later[2], (earlier, later)
        assert earlier[1] < later[1], (earlier, later)
    # Every lease was released.
    async with RedisLeases(redis_url, namespace=namespace) as leases:
        assert await leases.current(KEY) is None
    for wid, out in zip(ids, outs, strict=True):
        assert await assert_replays(client, run_workflow_ids(wid, out)) == 3


async def test_a_busy_key_fails_the_delegation_at_setup_without_waiting(
    client: Client, temporal_address: str, task_queue: str, redis_url: str, tmp_path: Path
) -> None:
    guarded = _guarded(tmp_path / "work.log")
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    request = lead_input(
        "Work on the repo",
        _definitions(guarded)[:1],
        model="test",
        usage_limits=UsageLimits(max_requests=10),
        resources=(ExclusiveResourceSpec(key=KEY),),
    )
    async with RedisLeases(redis_url, namespace=namespace) as holder:
        taken: Lease = await holder.acquire(KEY, "someone-else", wait=False)
        async with _workers(
            client, temporal_address, task_queue, redis_url, namespace, guarded, tmp_path
        ):
            handle = await start_lead(
                client, request, workflow_id=f"busy-{uuid.uuid4().hex}", task_queue=task_queue
            )
            out = await handle.result()
        await holder.release(taken)
    (record,) = out.subagents
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert record.error is not None
    assert "busy" in record.error
    assert not (tmp_path / "work.log").exists()  # its tool never ran


async def _activity_completed(client: Client, workflow_id: str, activity_type: str) -> bool:
    """Whether the workflow's history records an activity of ``activity_type`` completed."""
    scheduled: dict[int, str] = {}
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs_done = event.activity_task_completed_event_attributes
            if scheduled.get(attrs_done.scheduled_event_id) == activity_type:
                return True
    return False


async def test_a_lost_lease_stops_the_delegation_lease_lost(
    client: Client, temporal_address: str, task_queue: str, redis_url: str, tmp_path: Path
) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"

    @tool
    async def guarded(step: str) -> str:
        """Work on the shared resource until the test opens the gate."""
        context = current_delegation()
        assert context is not None
        started.write_text(json.dumps([context.delegation_id, context.lease_token]))
        while not gate.exists():
            await anyio.sleep(0.05)  # poll interval of the gate check
        return "worked"

    namespace = f"t-{uuid.uuid4().hex[:8]}"
    request = lead_input(
        "Work on the repo",
        _definitions(guarded)[:1],
        model="test",
        usage_limits=UsageLimits(max_requests=10),
        resources=(ExclusiveResourceSpec(key=KEY),),
    )
    workflow_id = f"lost-{uuid.uuid4().hex}"
    async with _workers(
        client, temporal_address, task_queue, redis_url, namespace, guarded, tmp_path
    ):
        handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
        with anyio.fail_after(120):
            while not started.exists():
                await anyio.sleep(0.05)  # poll interval of the tool-started check
            delegation_id, token = json.loads(started.read_text())
            # Someone frees the key under the delegation (as an expiry would).
            async with RedisLeases(redis_url, namespace=namespace) as leases:
                await leases.release(Lease(key=KEY, holder=delegation_id, token=token))
            child = f"{workflow_id}/{delegation_id}"
            while not await _activity_completed(client, child, "deputy_lease_hold"):
                await anyio.sleep(0.1)  # poll interval of the history check
            gate.touch()
            out = await handle.result()
    (record,) = out.subagents
    assert (record.status, record.stop_reason) == ("stopped", "lease_lost")
    assert record.error is not None
    assert "lease_expired" in record.error
    assert record.usage.requests == 1  # it stopped before its next model request
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


async def _activity_scheduled(client: Client, workflow_id: str, activity_type: str) -> bool:
    """Whether the workflow exists and its history has scheduled ``activity_type``."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.activity_type.name == activity_type:
                    return True
    except RPCError:  # the child workflow has not started yet
        return False
    return False


async def test_an_interrupt_stops_a_delegation_waiting_for_a_busy_key(
    client: Client, temporal_address: str, task_queue: str, redis_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "work.log"
    guarded = _guarded(log)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    request = lead_input(
        "Work on the repo",
        _definitions(guarded)[:1],
        model="test",
        usage_limits=UsageLimits(max_requests=10),
        resources=(ExclusiveResourceSpec(key=KEY, wait=True),),
    )
    workflow_id = f"waiting-{uuid.uuid4().hex}"
    async with RedisLeases(redis_url, namespace=namespace) as holder:
        taken = await holder.acquire(KEY, "someone-else", wait=False)
        async with _workers(
            client, temporal_address, task_queue, redis_url, namespace, guarded, tmp_path
        ):
            handle = await start_lead(
                client, request, workflow_id=workflow_id, task_queue=task_queue
            )
            with anyio.fail_after(120):
                child = ""
                while not child:
                    out_events = await handle.query("events", 0)
                    starts = [e for e in out_events if '"delegation_start"' in e]
                    if starts:
                        child = f"{workflow_id}/{json.loads(starts[0])['delegation_id']}"
                    await anyio.sleep(0.05)  # poll interval of the events check
                while not await _activity_scheduled(client, child, "deputy_lease_acquire"):
                    await anyio.sleep(0.05)  # poll interval of the history check
                await client.get_workflow_handle(child).signal("interrupt", "enough")
                out = await handle.result()
        # The key was never taken from its holder.
        current = await holder.current(KEY)
        assert current is not None
        assert current.token == taken.token
        await holder.release(taken)
    (record,) = out.subagents
    assert (record.status, record.stop_reason) == ("stopped", "interrupted")
    assert record.usage.requests == 0
    assert not log.exists()
    assert out.result.stop_reason == "complete"
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2
