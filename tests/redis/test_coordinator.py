"""RedisCoordinator: lease + reservation in one script each way, on one connection."""

from __future__ import annotations

import anyio
import pytest

from deputy_runtime.errors import BudgetLedgerError, ResourceBusyError
from deputy_runtime.redis import LostReason, RedisCoordinator

pytestmark = pytest.mark.anyio


def coordinator(url: str, namespace: str, **kwargs: float) -> RedisCoordinator:
    return RedisCoordinator(
        url, budget_name="shared", limits={"requests": 5}, namespace=namespace, **kwargs
    )


async def test_acquire_and_reserve_then_release_and_settle(redis_url: str, namespace: str) -> None:
    async with coordinator(redis_url, namespace) as coord:
        lease, grant = await coord.acquire_and_reserve("repo", "d1", {"requests": 2}, wait=False)
        assert grant["requests"] == 2
        assert await coord.leases.current("repo") == lease
        # Busy: nothing is reserved for the second holder.
        with pytest.raises(ResourceBusyError):
            await coord.acquire_and_reserve("repo", "d2", {"requests": 2}, wait=False)
        assert (await coord.budget.state()).reserved.requests == 2
        await coord.release_and_settle(lease, {"requests": 1})
        await coord.release_and_settle(lease, {"requests": 1})  # idempotent
        state = await coord.budget.state()
        assert (state.used.requests, state.remaining.requests, state.reserved.requests) == (1, 4, 0)
        assert await coord.leases.current("repo") is None


async def test_a_refused_reservation_leaves_no_lease(redis_url: str, namespace: str) -> None:
    async with coordinator(redis_url, namespace) as coord:
        lease, _ = await coord.acquire_and_reserve("repo", "d1", {"requests": 1}, wait=False)
        await coord.release_and_settle(lease, {"requests": 1})
        with pytest.raises(BudgetLedgerError, match="already used"):
            await coord.acquire_and_reserve("repo", "d1", {"requests": 1}, wait=False)
        assert await coord.leases.current("repo") is None


async def test_waiting_acquire_and_reserve(redis_url: str, namespace: str) -> None:
    async with coordinator(redis_url, namespace) as coord:
        first, _ = await coord.acquire_and_reserve("repo", "d1", {"requests": 1}, wait=False)
        results: list[int] = []

        async def waiter() -> None:
            lease, grant = await coord.acquire_and_reserve("repo", "d2", {"requests": 1}, wait=True)
            results.append(lease.token)
            assert grant["requests"] == 1
            await coord.release_and_settle(lease, {"requests": 1})

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.05)  # gives the waiter a chance to poll a busy key
            assert results == []
            await coord.release_and_settle(first, {"requests": 0})
        assert results[0] > first.token
        assert (await coord.budget.state()).used.requests == 1


async def test_hold_keeps_both_and_reports_the_first_loss(redis_url: str, namespace: str) -> None:
    async with coordinator(redis_url, namespace, lease_ttl=1.0, reserve_ttl=1.0) as coord:
        lease, _ = await coord.acquire_and_reserve("repo", "d1", {"requests": 2}, wait=False)
        lost: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(coord.hold, lease, lost.append)
            until = anyio.current_time() + 3.0
            while anyio.current_time() < until:
                assert await coord.leases.current("repo") == lease
                assert (await coord.budget.state()).reserved.requests == 2
                await anyio.sleep(0.25)
            tg.cancel_scope.cancel()
        assert lost == []
        await coord.release_and_settle(lease, {"requests": 0})
        # Both are gone now: hold returns after reporting the first loss, once.
        await coord.hold(lease, lost.append)
        assert len(lost) == 1
        assert lost[0] in (LostReason.LEASE_EXPIRED, LostReason.RESERVATION_EXPIRED)


async def test_hold_names_which_one_was_lost(redis_url: str, namespace: str) -> None:
    async with coordinator(redis_url, namespace, lease_ttl=600, reserve_ttl=600) as coord:
        first, _ = await coord.acquire_and_reserve("repo", "d1", {"requests": 1}, wait=False)
        await coord.budget.settle("d1", {"requests": 1})  # the reservation is gone
        lost: list[str] = []
        await coord.hold(first, lost.append)
        assert lost == [LostReason.RESERVATION_EXPIRED]
        assert await coord.leases.current("repo") == first  # a lost holder renews nothing

        second, _ = await coord.acquire_and_reserve("docs", "d2", {"requests": 1}, wait=False)
        await coord.connection.run(
            "redis.call('DEL', KEYS[1])", coord.leases.lease_keys("docs")[:1], []
        )  # as if it had expired
        third = await coord.leases.acquire("docs", "d3", wait=False)
        await coord.hold(second, lost.append)
        assert lost[1:] == [LostReason.LEASE_TAKEN_OVER]
        await coord.release_and_settle(second, {"requests": 0})
        assert await coord.leases.current("docs") == third  # never freed by the stale one
        await coord.leases.release(first)
        await coord.leases.release(third)
