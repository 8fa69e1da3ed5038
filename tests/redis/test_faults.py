"""Faults: a holder process killed with SIGKILL, and redis-server restarted mid-run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from deputy_runtime.errors import (
    BudgetLedgerError,
    CoordinationUnavailableError,
    ResourceBusyError,
)
from deputy_runtime.redis import LostReason, RedisBudget, RedisCoordinator, RedisLeases
from tests.redis.redis_support import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WORKER = Path(__file__).with_name("worker.py")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


async def test_a_killed_holders_lease_and_reservation_come_back_exactly_once(
    redis_url: str, namespace: str, processes: list[subprocess.Popen[str]]
) -> None:
    ttl = 2.0
    name = f"budget-{uuid.uuid4().hex[:8]}"
    args = {
        "url": redis_url,
        "namespace": namespace,
        "name": name,
        "limit": 10,
        "key": "repo",
        "holder": "victim",
        "ttl": ttl,
    }
    victim = subprocess.Popen(
        [sys.executable, str(WORKER), "asyncio", "hold", json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes.append(victim)
    assert victim.stdout is not None
    line = await anyio.to_thread.run_sync(victim.stdout.readline)
    assert line, victim.communicate()[1]
    victim_token = json.loads(line)["token"]

    async with (
        RedisLeases(redis_url, namespace=namespace, ttl=ttl) as leases,
        RedisBudget(redis_url, name, {"requests": 10}, namespace=namespace) as budget,
    ):
        assert (await leases.current("repo")).holder == "victim"  # type: ignore[union-attr]
        assert (await budget.state()).reserved.requests == 2

        victim.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(victim.wait)
        # Nobody renews it now: the server frees the key within one TTL of the kill
        # (-2: already gone; -1, no expiry, would be the bug).
        pttl = int(
            await leases.connection.run(
                "return redis.call('PTTL', KEYS[1])", leases.lease_keys("repo")[:1], []
            )
        )
        assert pttl == -2 or 0 < pttl <= ttl * 1000

        # The lease is granted to this process once the victim's TTL runs out.
        with anyio.fail_after(60):  # a hang guard, not a timing assertion
            survivor = await leases.acquire("repo", "survivor", wait=True)
        assert survivor.token > victim_token

        with anyio.fail_after(60):
            while (await budget.state()).reserved.requests != 0:
                await anyio.sleep(0.02)
        for _ in range(3):  # returned exactly once, whoever reads or reserves next
            state = await budget.state()
            assert (state.remaining.requests, state.used.requests, state.holders) == (10, 0, 0)
        grant = await budget.reserve("next", {"requests": 100})
        assert grant["requests"] == 10  # not 12: the victim's 2 came back once
        await budget.settle("next", {"requests": 4})
        assert (await budget.state()).remaining.requests == 6
        await leases.release(survivor)


async def test_restart_with_persistence_counts_nothing_twice_and_keeps_the_lease(
    restartable_redis: RedisServer,
) -> None:
    url = restartable_redis.url
    async with RedisCoordinator(
        url,
        budget_name="b",
        limits={"requests": 10},
        lease_ttl=20.0,
        reserve_ttl=20.0,
        connect_timeout=2.0,
        timeout=2.0,
        retry_for=120.0,
    ) as coord:
        lease, grant = await coord.acquire_and_reserve("repo", "a", {"requests": 3}, wait=False)
        assert grant["requests"] == 3
        await coord.budget.reserve("b", {"requests": 2})
        lost: list[str] = []
        settled = anyio.Event()

        async def settle_through_outage() -> None:
            await coord.budget.settle("b", {"requests": 1})
            settled.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(coord.hold, lease, lost.append)
            await anyio.to_thread.run_sync(restartable_redis.stop)

            with pytest.raises(CoordinationUnavailableError, match="unavailable"):
                await coord.leases.acquire("other", "c", wait=False)
            with pytest.raises(CoordinationUnavailableError, match="unavailable"):
                await coord.budget.reserve("c", {"requests": 1})
            tg.start_soon(settle_through_outage)
            await anyio.sleep(0.1)  # lets the settle try (and fail) against the dead server
            assert not settled.is_set()

            await anyio.to_thread.run_sync(restartable_redis.start)
            with anyio.fail_after(120):
                await settled.wait()
            # The lease survived the restart: nobody else can take it.
            with pytest.raises(ResourceBusyError):
                await coord.leases.acquire("repo", "c", wait=False)
            tg.cancel_scope.cancel()

        await coord.budget.settle("b", {"requests": 1})  # a repeat after the outage
        state = await coord.budget.state()
        assert (state.used.requests, state.reserved.requests, state.remaining.requests) == (1, 3, 6)
        await coord.release_and_settle(lease, {"requests": 2})
        state = await coord.budget.state()
        assert (state.used.requests, state.reserved.requests, state.remaining.requests) == (3, 0, 7)
        if lost:  # only if the restart outlasted the lease TTL on a very loaded machine
            assert lost == [LostReason.UNREACHABLE]


async def test_restart_without_persistence_loses_state_safely(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, persistent=False)
    server.start()
    try:
        ttl = 1.5
        async with RedisCoordinator(
            server.url,
            budget_name="b",
            limits={"requests": 10},
            lease_ttl=ttl,
            reserve_ttl=ttl,
            timeout=1.0,
            retry_for=0.2,
        ) as coord:
            lease, _ = await coord.acquire_and_reserve("repo", "a", {"requests": 3}, wait=False)
            lost: list[str] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(coord.hold, lease, lost.append)
                await anyio.to_thread.run_sync(server.stop)
                # The holder is told before another holder could be granted the key.
                with anyio.fail_after(60):
                    while not lost:
                        await anyio.sleep(0.02)
                assert lost == [LostReason.UNREACHABLE]
            # Release and settle give up after retry_for with the typed error.
            with pytest.raises(CoordinationUnavailableError):
                await coord.release_and_settle(lease, {"requests": 1})
            await anyio.to_thread.run_sync(server.start)
            # The data is gone: fencing still moves forward, the ledger refuses to restart
            # from a full budget on its own.
            new = await coord.leases.acquire("repo", "b", wait=False)
            assert new.token > lease.token
            with pytest.raises(BudgetLedgerError, match="does not exist"):
                await coord.budget.reserve("c", {"requests": 1})
            await coord.leases.release(new)
    finally:
        server.stop()
