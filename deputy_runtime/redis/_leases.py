"""Cross-process exclusive leases with fencing tokens, on Redis."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

import anyio

from ..errors import ResourceBusyError
from ..runtime import Lease
from ..tracing import inject_traceparent
from . import _scripts
from ._connection import RedisConnection, enter_connection
from ._keepalive import LostReason, keep_alive
from ._validate import check_name, check_seconds

__all__ = ["Lease", "LeaseLike", "RedisLeases", "current_traceparent"]


class LeaseLike(Protocol):
    """Anything with a lease's fields (the runtime's own Lease type qualifies)."""

    @property
    def key(self) -> str: ...
    @property
    def holder(self) -> str: ...
    @property
    def token(self) -> int: ...


class RedisLeases:
    """Exclusive leases shared by every process that uses the same Redis and namespace.

    Implements the runtime's lease backend protocol (``acquire``/``hold``/``release``).
    ``url`` is a Redis URL (this object then owns its connection: open it with
    ``async with``) or a :class:`RedisConnection` shared with a
    :class:`~deputy_runtime.redis.RedisBudget` (whoever created it opens it).
    ``ttl`` (seconds) is how long a lease outlives its holder's last renewal; ``hold()``
    renews every ``ttl / 3``.
    """

    def __init__(
        self,
        url: str | RedisConnection,
        *,
        namespace: str = "deputy",
        ttl: float = 10.0,
        max_poll_interval: float = 0.1,
    ) -> None:
        self._owns = not isinstance(url, RedisConnection)
        self.connection = url if isinstance(url, RedisConnection) else RedisConnection(url)
        self.namespace = check_name("namespace", namespace, colon=False)
        self.ttl = check_seconds("ttl", ttl)
        if self.ttl < 0.01:
            raise ValueError(f"ttl must be at least 0.01 seconds, got {ttl!r}")
        self.max_poll_interval = check_seconds("max_poll_interval", max_poll_interval)
        self.ttl_ms = max(int(self.ttl * 1000), 10)

    async def __aenter__(self) -> Self:
        await enter_connection(self.connection, owns=self._owns, user="RedisLeases")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owns:
            await self.connection.__aexit__(exc_type, exc, tb)

    def lease_keys(self, key: str) -> list[str]:
        """The Redis keys of ``key``'s lease and fencing counter.

        Args:
            key: The exclusive resource key.

        Returns:
            ``<namespace>:lease:<key>`` and ``<namespace>:fence:<key>``.
        """
        return [f"{self.namespace}:lease:{key}", f"{self.namespace}:fence:{key}"]

    async def acquire(self, key: str, holder: str, *, wait: bool) -> Lease:
        """Grant ``key`` to ``holder``; busy: raise ResourceBusyError, or wait if ``wait``.

        Waiting polls with capped, jittered exponential backoff (cancellable). Acquiring
        again for a holder that already holds the key returns its lease (same token).
        With tracing on, the current span's ``traceparent`` is stored with the lease, in
        the same script call.

        Args:
            key: The exclusive resource key.
            holder: The holder id asking for it.
            wait: Whether to wait while another holder holds ``key`` instead of failing.

        Returns:
            The granted lease, with its fencing token and the ``traceparent`` stored with
            it (as :meth:`current` returns it).

        Raises:
            ResourceBusyError: Another holder holds ``key`` and ``wait`` is false.
            ValueError: ``key`` or ``holder`` is not a valid name.
            CoordinationUnavailableError: Redis cannot be reached.
        """
        check_name("key", key)
        check_name("holder", holder)
        keys = self.lease_keys(key)
        trace = current_traceparent()
        delay = 0.002
        while True:
            status, value = await self.connection.run(
                _scripts.ACQUIRE, keys, [holder, self.ttl_ms, trace]
            )
            if status == 1:
                return Lease(key=key, holder=holder, token=int(value), traceparent=trace or None)
            if not wait:
                raise busy_error(key)
            # Never sleep past the current holder's expiry: it may have crashed.
            pttl = int(value) / 1000 if int(value) > 0 else delay
            await anyio.sleep(min(delay, pttl) * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.max_poll_interval)

    async def hold(self, lease: LeaseLike, on_lost: Callable[[str], None]) -> None:
        """Renew the lease until cancelled; on loss call ``on_lost(reason)`` once and return.

        The reason is a :class:`LostReason`: ``lease_taken_over``, ``lease_expired`` or
        ``redis_unreachable`` (no renewal succeeded before the lease would expire).

        Args:
            lease: The lease to keep, from :meth:`acquire`.
            on_lost: Called once with the reason when the lease is lost.
        """
        keys = self.lease_keys(lease.key)[:1]
        args: list[str | int] = [f"{lease.token}:{lease.holder}", self.ttl_ms]

        async def renew() -> LostReason | None:
            result = await self.connection.run(_scripts.RENEW_LEASE, keys, args)
            if result == 1:
                return None
            return LostReason.LEASE_TAKEN_OVER if result == -1 else LostReason.LEASE_EXPIRED

        await keep_alive(renew, self.ttl, on_lost)

    async def release(self, lease: LeaseLike) -> None:
        """Release if still held by this holder with this token (compare-and-delete).

        Never frees another holder's lease; idempotent. Retries while Redis is unreachable
        for the connection's ``retry_for`` seconds, shielded from cancellation.

        Args:
            lease: The lease to release, from :meth:`acquire`.

        Raises:
            CoordinationUnavailableError: Redis stayed unreachable for ``retry_for``; the
                lease then expires after its TTL.
        """
        keys = self.lease_keys(lease.key)[:1]
        with anyio.CancelScope(shield=True):
            await self.connection.run_retrying(
                _scripts.RELEASE, keys, [f"{lease.token}:{lease.holder}"]
            )

    async def current(self, key: str) -> Lease | None:
        """The lease currently granted on ``key``, or ``None`` (for operators and tests).

        Args:
            key: The exclusive resource key.

        Returns:
            The current holder's lease, or ``None`` when ``key`` is free; its
            ``traceparent`` is the holder's when one was recorded.
        """
        value = await self.connection.run(
            "return redis.call('GET', KEYS[1])", self.lease_keys(key)[:1], []
        )
        if value is None:
            return None
        owner, _, trace = str(value).partition("\n")
        token, _, holder = owner.partition(":")
        return Lease(key=key, holder=holder, token=int(token), traceparent=trace or None)


def current_traceparent() -> str:
    """The W3C ``traceparent`` of the current span ("" when tracing is off or none is)."""
    return inject_traceparent().get("traceparent", "")


def busy_error(key: str) -> ResourceBusyError:
    return ResourceBusyError(
        f"The exclusive delegation resource {key!r} is busy: another delegation (possibly "
        "in another process) holds it. Retry after it settles, or use a different "
        "resource_key."
    )
