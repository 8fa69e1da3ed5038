"""RedisBudget against a real redis-server: reserve, settle, expiry, state, validation."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import pytest

from deputy_runtime.errors import BudgetLedgerError
from deputy_runtime.redis import LedgerState, LostReason, RedisBudget

pytestmark = pytest.mark.anyio

LIMITS: Mapping[str, int | float | None] = {
    "requests": 10,
    "tool_calls": 5,
    "cost_usd": 1.0,
}


def assert_adds_up(state: LedgerState) -> None:
    for field, limit in state.limit.as_dict().items():
        if limit is None:
            assert state.remaining.as_dict()[field] is None
            continue
        total = (
            state.remaining.as_dict()[field]  # type: ignore[operator]
            + state.reserved.as_dict()[field]
            + state.used.as_dict()[field]
        )
        assert total == pytest.approx(limit, abs=1e-9), (field, state)


async def test_reserve_takes_min_of_want_and_remaining(redis_url: str, namespace: str) -> None:
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace) as budget:
        grant = await budget.reserve("h1", {"requests": 4, "tool_calls": None, "cost_usd": 0.3})
        assert grant == {
            "requests": 4,
            "tool_calls": 5,  # None asks no limit: everything that remains
            "input_tokens": None,  # not limited by the ledger
            "output_tokens": None,
            "cost_usd": 0.3,
        }
        second = await budget.reserve("h2", {"requests": 100, "cost_usd": 0.0})
        assert second["requests"] == 6
        assert second["tool_calls"] == 0
        assert second["cost_usd"] == 0.0
        state = await budget.state()
        assert state.remaining.requests == 0
        assert state.reserved.requests == 10
        assert state.holders == 2
        assert_adds_up(state)


async def test_settle_counts_usage_returns_the_rest_exactly_once(
    redis_url: str, namespace: str
) -> None:
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace) as budget:
        await budget.reserve("h1", {"requests": 4, "tool_calls": 2, "cost_usd": 0.5})
        used = {"requests": 1, "tool_calls": 2, "input_tokens": 700, "cost_usd": 0.1}
        await budget.settle("h1", used)
        await budget.settle("h1", used)  # exactly once: the repeat is a no-op
        state = await budget.state()
        assert state.used.requests == 1
        assert state.used.input_tokens == 700  # counted though the field is unlimited
        assert state.used.cost_usd == 0.1
        assert state.remaining.requests == 9
        assert state.remaining.cost_usd == 0.9
        assert state.reserved.requests == 0
        assert state.holders == 0
        assert_adds_up(state)


async def test_cost_is_exact_in_micro_dollars(redis_url: str, namespace: str) -> None:
    async with RedisBudget(redis_url, "b", {"cost_usd": 1.0}, namespace=namespace) as budget:
        for i in range(3):
            await budget.reserve(f"h{i}", {"cost_usd": 0.1})
            await budget.settle(f"h{i}", {"cost_usd": 0.1})
        state = await budget.state()
        assert state.used.cost_usd == 0.3  # 300000 micro-dollars, no float drift
        assert state.remaining.cost_usd == 0.7
        # Usage is rounded up to the next micro-dollar, never down.
        await budget.reserve("tiny", {"cost_usd": 0.0})
        await budget.settle("tiny", {"cost_usd": 1e-9})
        assert (await budget.state()).used.cost_usd == 0.300001


async def test_reserve_is_idempotent_per_holder_and_a_holder_id_is_single_use(
    redis_url: str, namespace: str
) -> None:
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace) as budget:
        first = await budget.reserve("h", {"requests": 3})
        assert await budget.reserve("h", {"requests": 5}) == first
        assert (await budget.state()).reserved.requests == 3
        await budget.settle("h", {"requests": 1})
        with pytest.raises(BudgetLedgerError, match="already used"):
            await budget.reserve("h", {"requests": 1})
        with pytest.raises(BudgetLedgerError, match="no reservation"):
            await budget.settle("never", {"requests": 1})


async def test_an_expired_reservation_returns_once_and_a_late_settle_counts_usage_only(
    redis_url: str, namespace: str
) -> None:
    async with (
        RedisBudget(redis_url, "b", LIMITS, namespace=namespace, ttl=0.1) as budget,
        RedisBudget(redis_url, "b", LIMITS, namespace=namespace, ttl=600) as lasting,
    ):
        await budget.reserve("crashed", {"requests": 4})

        async def returned() -> bool:
            return (await budget.state()).reserved.requests == 0

        with anyio.fail_after(60):
            while not await returned():
                await anyio.sleep(0.02)
        for _ in range(3):  # reclaim runs on every read and reserve: never a second time
            state = await budget.state()
            assert state.remaining.requests == 10
            assert_adds_up(state)
        await lasting.reserve("other", {"requests": 2})  # same ledger, a long TTL
        assert (await budget.state()).remaining.requests == 8
        # The crashed holder comes back and settles: its usage counts, its grant does not
        # come back a second time, and a repeat changes nothing.
        await budget.settle("crashed", {"requests": 3})
        await budget.settle("crashed", {"requests": 3})
        state = await budget.state()
        assert state.used.requests == 3
        assert state.remaining.requests == 5
        assert_adds_up(state)


async def test_hold_keeps_a_reservation_past_its_ttl(redis_url: str, namespace: str) -> None:
    # A TTL well above a loaded machine's scheduling stalls: renewals must keep up.
    ttl = 1.0
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace, ttl=ttl) as budget:
        await budget.reserve("h", {"requests": 4})
        lost: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(budget.hold, "h", lost.append)
            until = anyio.current_time() + 3 * ttl
            while anyio.current_time() < until:
                assert (await budget.state()).reserved.requests == 4
                await anyio.sleep(ttl / 4)
            tg.cancel_scope.cancel()
        assert lost == []
        await budget.settle("h", {"requests": 1})
        await budget.hold("h", lost.append)  # the reservation is gone: reported at once
        assert lost == [LostReason.RESERVATION_EXPIRED]


async def test_limits_must_match_the_stored_ledger(redis_url: str, namespace: str) -> None:
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace):
        pass
    other = RedisBudget(redis_url, "b", {"requests": 11}, namespace=namespace)
    with pytest.raises(BudgetLedgerError, match="already exists with limits"):
        await other.__aenter__()
    assert not other.connection.is_open
    async with RedisBudget(redis_url, "b", dict(LIMITS), namespace=namespace) as same:
        assert (await same.state()).limit.requests == 10


async def test_a_lost_ledger_is_a_typed_error_not_a_fresh_budget(
    redis_url: str, namespace: str
) -> None:
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace) as budget:
        await budget.reserve("h", {"requests": 1})
        await budget.connection.run(
            "for _, k in ipairs(KEYS) do redis.call('DEL', k) end", budget.keys, []
        )
        with pytest.raises(BudgetLedgerError, match="does not exist in Redis"):
            await budget.reserve("h2", {"requests": 1})
        with pytest.raises(BudgetLedgerError, match="does not exist in Redis"):
            await budget.state()


@pytest.mark.parametrize(
    ("want", "error", "match"),
    [
        ({"request": 1}, ValueError, "unknown field.*request"),
        ({"requests": -1}, ValueError, r"want\['requests'\] must be between"),
        ({"requests": True}, TypeError, r"want\['requests'\] must be an int"),
        ({"requests": 1.5}, TypeError, r"want\['requests'\] must be an int"),
        ({"cost_usd": float("inf")}, ValueError, r"want\['cost_usd'\] must be finite"),
        ({"cost_usd": "1"}, TypeError, r"want\['cost_usd'\] must be a number"),
    ],
)
async def test_bad_amounts_name_the_field(
    redis_url: str, namespace: str, want: dict[str, object], error: type[Exception], match: str
) -> None:
    async with RedisBudget(redis_url, "b", LIMITS, namespace=namespace) as budget:
        with pytest.raises(error, match=match):
            await budget.reserve("h", want)  # type: ignore[arg-type]
        assert (await budget.state()).holders == 0  # nothing half-applied


def test_bad_limits_and_settings_name_the_argument(redis_url: str) -> None:
    with pytest.raises(ValueError, match=r"limits has unknown field\(s\) tokens"):
        RedisBudget(redis_url, "b", {"tokens": 1})
    with pytest.raises(ValueError, match="keep_ended must be at least ttl"):
        RedisBudget(redis_url, "b", {}, ttl=10, keep_ended=5)
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        RedisBudget(redis_url, "", {})
