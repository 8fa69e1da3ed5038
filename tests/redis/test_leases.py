"""RedisLeases against a real redis-server: grant, fencing, waiting, renewal, release."""

from __future__ import annotations

import anyio
import pytest

from deputy_runtime.errors import (
    CoordinationError,
    CoordinationUnavailableError,
    ResourceBusyError,
)
from deputy_runtime.redis import Lease, LostReason, RedisLeases
from tests.redis.redis_support import RedisServer

pytestmark = pytest.mark.anyio


async def wait_until(predicate: object, *, limit: float = 60.0) -> None:
    """Poll an async predicate until true; the limit only guards against a hang."""
    with anyio.fail_after(limit):
        while not await predicate():  # type: ignore[operator]
            await anyio.sleep(0.01)


async def test_grant_busy_release_and_increasing_tokens(redis_url: str, namespace: str) -> None:
    async with RedisLeases(redis_url, namespace=namespace, ttl=30) as leases:
        first = await leases.acquire("repo", "a", wait=False)
        assert first == Lease(key="repo", holder="a", token=first.token)
        with pytest.raises(ResourceBusyError, match="'repo' is busy"):
            await leases.acquire("repo", "b", wait=False)
        assert await leases.current("repo") == first
        # Another key is independent.
        other = await leases.acquire("docs", "b", wait=False)
        await leases.release(first)
        await leases.release(first)  # idempotent
        assert await leases.current("repo") is None
        tokens = [first.token]
        for holder in ("b", "c", "d"):
            lease = await leases.acquire("repo", holder, wait=False)
            tokens.append(lease.token)
            await leases.release(lease)
        assert tokens == sorted(set(tokens)), tokens
        await leases.release(other)


async def test_acquire_again_by_the_holder_returns_its_lease(
    redis_url: str, namespace: str
) -> None:
    async with RedisLeases(redis_url, namespace=namespace, ttl=30) as leases:
        lease = await leases.acquire("k", "a", wait=False)
        assert await leases.acquire("k", "a", wait=False) == lease
        await leases.release(lease)


async def test_a_stale_lease_never_frees_the_new_holders_lease(
    redis_url: str, namespace: str
) -> None:
    async with RedisLeases(redis_url, namespace=namespace, ttl=30) as leases:
        old = await leases.acquire("k", "a", wait=False)
        await leases.release(old)
        new = await leases.acquire("k", "b", wait=False)
        await leases.release(old)
        # Same holder name with an older token is also someone else's lease.
        await leases.release(Lease(key="k", holder="b", token=new.token - 1))
        assert await leases.current("k") == new
        await leases.release(new)


async def test_wait_is_granted_after_release(redis_url: str, namespace: str) -> None:
    async with RedisLeases(redis_url, namespace=namespace, ttl=30) as leases:
        first = await leases.acquire("k", "a", wait=False)
        granted: list[Lease] = []

        async def waiter() -> None:
            granted.append(await leases.acquire("k", "b", wait=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.05)  # gives the waiter a chance to poll a busy key
            assert granted == []
            await leases.release(first)
        assert granted[0].holder == "b"
        assert granted[0].token > first.token
        await leases.release(granted[0])


async def test_waiting_is_cancellable(redis_url: str, namespace: str) -> None:
    async with RedisLeases(redis_url, namespace=namespace, ttl=30) as leases:
        held = await leases.acquire("k", "a", wait=False)
        with anyio.move_on_after(0.1) as scope:
            await leases.acquire("k", "b", wait=True)
        assert scope.cancelled_caught
        assert await leases.current("k") == held
        await leases.release(held)


async def test_hold_keeps_the_lease_past_its_ttl_and_it_expires_after(
    redis_url: str, namespace: str
) -> None:
    # A TTL well above a loaded machine's scheduling stalls: renewals must keep up.
    ttl = 1.0
    async with RedisLeases(redis_url, namespace=namespace, ttl=ttl) as leases:
        lease = await leases.acquire("k", "a", wait=False)
        lost: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(leases.hold, lease, lost.append)
            until = anyio.current_time() + 3 * ttl
            while anyio.current_time() < until:
                assert await leases.current("k") == lease
                await anyio.sleep(ttl / 4)
            tg.cancel_scope.cancel()
        assert lost == []

        async def gone() -> bool:
            return await leases.current("k") is None

        await wait_until(gone)
        taken = await leases.acquire("k", "b", wait=False)
        assert taken.token > lease.token


async def test_hold_reports_takeover_and_expiry(redis_url: str, namespace: str) -> None:
    async with (
        RedisLeases(redis_url, namespace=namespace, ttl=0.2) as short,
        RedisLeases(redis_url, namespace=namespace, ttl=60) as long,
    ):
        old = await short.acquire("k", "a", wait=False)
        new = await long.acquire("k", "b", wait=True)  # granted once "a" expires
        assert new.token > old.token
        lost: list[str] = []
        await short.hold(old, lost.append)  # returns after on_lost
        assert lost == [LostReason.LEASE_TAKEN_OVER]
        await long.release(new)
        await long.hold(new, lost.append)
        assert lost[1:] == [LostReason.LEASE_EXPIRED]


async def test_fencing_tokens_keep_increasing_when_redis_loses_its_data(
    redis_url: str, namespace: str
) -> None:
    async with RedisLeases(redis_url, namespace=namespace, ttl=30) as leases:
        before = await leases.acquire("k", "a", wait=False)
        # Drop this namespace's keys, as a restart without persistence would.
        await leases.connection.run(
            "for _, k in ipairs(KEYS) do redis.call('DEL', k) end", leases.lease_keys("k"), []
        )
        after = await leases.acquire("k", "b", wait=False)
        assert after.token > before.token
        await leases.release(after)


async def test_bad_arguments_name_the_argument(redis_url: str) -> None:
    with pytest.raises(ValueError, match="url must be a Redis URL"):
        RedisLeases("http://localhost")
    with pytest.raises(ValueError, match="ttl must be finite"):
        RedisLeases(redis_url, ttl=float("nan"))
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        RedisLeases(redis_url, namespace="")
    async with RedisLeases(redis_url) as leases:
        with pytest.raises(ValueError, match="key must be"):
            await leases.acquire("bad\nkey", "a", wait=False)
        with pytest.raises(ValueError, match="holder must be"):
            await leases.acquire("k", "", wait=False)


async def test_setup_against_no_server_is_a_typed_error() -> None:
    leases = RedisLeases("redis://127.0.0.1:1/0", ttl=1)
    with pytest.raises(CoordinationUnavailableError, match="Cannot connect to Redis"):
        await leases.__aenter__()
    assert not leases.connection.is_open


async def test_a_refused_setup_is_a_typed_error_without_the_password(
    redis_server: RedisServer,
) -> None:
    port = redis_server.port
    # The test server has only the default user: AUTH as another user is refused.
    leases = RedisLeases(f"redis://nobody:s3cret@127.0.0.1:{port}/0")
    with pytest.raises(CoordinationError, match="refused the connection") as caught:
        await leases.__aenter__()
    assert "s3cret" not in str(caught.value)
    assert not isinstance(caught.value, CoordinationUnavailableError)
    assert not leases.connection.is_open


async def test_a_script_the_server_refuses_is_a_typed_error(redis_url: str) -> None:
    async with RedisLeases(redis_url) as leases:
        with pytest.raises(CoordinationError, match="refused a script"):
            await leases.connection.run("return redis.call('NO-SUCH-COMMAND')", [], [])
