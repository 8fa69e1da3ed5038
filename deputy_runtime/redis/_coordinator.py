"""Lease and reservation together: one script to take both, one to give both back."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Self

import anyio

from ..errors import BudgetLedgerError
from . import _scripts
from ._budget import RedisBudget, grant_from, ledger_error
from ._connection import RedisConnection
from ._keepalive import LostReason, keep_alive
from ._leases import Lease, LeaseLike, RedisLeases, busy_error

__all__ = ["RedisCoordinator"]


class RedisCoordinator:
    """A :class:`RedisLeases` and a :class:`RedisBudget` on one connection.

    The hot path of a delegation that needs both is two round trips:
    :meth:`acquire_and_reserve` (one script: the lease, then the reservation; a refused
    reservation gives the lease back in the same step) and :meth:`release_and_settle`
    (one script). ``async with`` opens the shared connection and the ledger.
    """

    @classmethod
    def of(cls, leases: RedisLeases, budget: RedisBudget) -> RedisCoordinator:
        """A coordinator over a lease backend and a budget that share one connection.

        It opens and closes nothing: whoever opened ``leases`` and ``budget`` (or their
        shared connection) closes it.

        Args:
            leases: The lease backend.
            budget: The budget, on the same :class:`RedisConnection` and namespace.

        Returns:
            The coordinator of both.

        Raises:
            ValueError: They do not share a connection and a namespace.
        """
        if leases.connection is not budget.connection or leases.namespace != budget.namespace:
            raise ValueError(
                "RedisCoordinator.of needs leases and budget on one RedisConnection and namespace"
            )
        coordinator = cls.__new__(cls)
        coordinator.connection = leases.connection
        coordinator.leases = leases
        coordinator.budget = budget
        return coordinator

    def __init__(
        self,
        url: str,
        *,
        budget_name: str,
        limits: Mapping[str, int | float | None] | None,
        namespace: str = "deputy",
        lease_ttl: float = 10.0,
        reserve_ttl: float = 30.0,
        connect_timeout: float = 5.0,
        timeout: float = 5.0,
        retry_for: float = 30.0,
    ) -> None:
        self.connection = RedisConnection(
            url, connect_timeout=connect_timeout, timeout=timeout, retry_for=retry_for
        )
        self.leases = RedisLeases(self.connection, namespace=namespace, ttl=lease_ttl)
        self.budget = RedisBudget(
            self.connection, budget_name, limits, namespace=namespace, ttl=reserve_ttl
        )

    async def __aenter__(self) -> Self:
        await self.connection.__aenter__()
        try:
            await self.budget.__aenter__()
        except BaseException:
            await self.connection.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.connection.__aexit__(exc_type, exc, tb)

    async def acquire_and_reserve(
        self,
        key: str,
        holder: str,
        want: Mapping[str, int | float | None],
        *,
        wait: bool,
        parties: int = 1,
    ) -> tuple[Lease, Mapping[str, int | float | None]]:
        """Take the lease on ``key`` and reserve ``want`` for ``holder`` atomically.

        Nothing is reserved while the lease is busy; a refused reservation leaves no lease
        behind.

        Args:
            key: The exclusive resource key.
            holder: A fresh holder id, used for both the lease and the reservation.
            want: The amount wanted per ledger field, as for :meth:`RedisBudget.reserve`.
            wait: Whether to wait for a busy lease (polling, cancellable) instead of
                failing.
            parties: The reservations being made together, as for
                :meth:`RedisBudget.reserve`.

        Returns:
            The lease and the grant per ledger field (``None`` for an unlimited field).

        Raises:
            ResourceBusyError: The lease is held by another holder and ``wait`` is false.
            BudgetLedgerError: The ledger refused the reservation (missing ledger, or a
                holder id already used).
            CoordinationUnavailableError: Redis cannot be reached.
        """
        args = self.budget.reserve_args(holder, want, parties)
        keys = [*self.leases.lease_keys(key), *self.budget.keys]
        script_args: list[str | int] = [
            holder,
            self.leases.ttl_ms,
            self.budget.reserve_ttl_ms,
            self.budget.keep_ended_ms,
            *args[3:],
        ]
        delay = 0.002
        while True:
            result = await self.connection.run(_scripts.ACQUIRE_AND_RESERVE, keys, script_args)
            if int(result[0]) == 1:
                break
            if not wait:
                raise busy_error(key)
            pttl = int(result[1]) / 1000 if int(result[1]) > 0 else delay
            await anyio.sleep(min(delay, pttl) * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.leases.max_poll_interval)
        trace = str(args[-2]) or None
        lease = Lease(key=key, holder=holder, token=int(result[1]), traceparent=trace)
        status = int(result[2])
        if status < 0:
            raise ledger_error(self.budget.name, holder, status)
        return lease, grant_from([int(v) for v in result[3:]])

    async def hold(
        self,
        lease: LeaseLike,
        on_lost: Callable[[str], None],
        *,
        renewed_at: float | None = None,
    ) -> None:
        """Keep both the lease and the reservation of ``lease.holder`` until cancelled.

        One script renews both every ``min(lease ttl, reservation ttl) / 3``. The first
        loss (of either) calls ``on_lost(reason)`` once and returns.

        Args:
            lease: The lease from :meth:`acquire_and_reserve`.
            on_lost: Called once with the :class:`LostReason` of the first loss.
            renewed_at: ``anyio.current_time()`` taken before the granting
                :meth:`acquire_and_reserve` was sent: the grant counts as the first
                renewal (none is sent at once). ``None``: renew at once.
        """
        keys = [self.leases.lease_keys(lease.key)[0], *self.budget.keys[1:3]]
        args: list[str | int] = [
            f"{lease.token}:{lease.holder}",
            self.leases.ttl_ms,
            lease.holder,
            self.budget.reserve_ttl_ms,
        ]

        async def renew() -> LostReason | None:
            lease_status, reservation_status = await self.connection.run(
                _scripts.RENEW_BOTH, keys, args
            )
            if int(lease_status) == -1:
                return LostReason.LEASE_TAKEN_OVER
            if int(lease_status) == 0:
                return LostReason.LEASE_EXPIRED
            if int(reservation_status) == 0:
                return LostReason.RESERVATION_EXPIRED
            return None

        await keep_alive(
            renew, min(self.leases.ttl, self.budget.ttl), on_lost, renewed_at=renewed_at
        )

    async def release_and_settle(self, lease: LeaseLike, used: Mapping[str, int | float]) -> None:
        """Release the lease (compare-and-delete) and settle ``used`` in one script.

        Idempotent, shielded from cancellation, retried while Redis is unreachable (see
        :meth:`RedisBudget.settle`).

        Args:
            lease: The lease from :meth:`acquire_and_reserve`.
            used: The usage per ledger field; a missing field used nothing.

        Raises:
            BudgetLedgerError: ``lease.holder`` has no reservation (never reserved, or
                ended longer ago than ``keep_ended``).
            CoordinationUnavailableError: Redis stayed unreachable for ``retry_for``.
        """
        settle_args = self.budget.settle_args(lease.holder, used)
        keys = [self.leases.lease_keys(lease.key)[0], *self.budget.keys]
        args: list[str | int] = [f"{lease.token}:{lease.holder}", *settle_args]
        with anyio.CancelScope(shield=True):
            result = await self.connection.run_retrying(_scripts.RELEASE_AND_SETTLE, keys, args)
        if int(result[1]) == -1:
            raise BudgetLedgerError(
                f"Cannot settle holder {lease.holder!r} on budget {self.budget.name!r}: it "
                "has no reservation (never reserved, or ended longer ago than keep_ended)."
            )
