"""A named budget shared by any number of leads in any number of processes, on Redis."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Self

import anyio

from ..errors import BudgetLedgerError
from . import _scripts
from ._amounts import (
    FIELDS,
    Amounts,
    LedgerState,
    decode,
    encode_limits,
    encode_used,
    encode_want,
)
from ._connection import RedisConnection, enter_connection
from ._keepalive import LostReason, keep_alive
from ._leases import current_traceparent
from ._validate import check_name, check_seconds

if TYPE_CHECKING:
    from ._coordinator import RedisCoordinator

__all__ = ["RedisBudget", "grant_from", "ledger_error"]


def grant_from(raw: list[int]) -> dict[str, int | float | None]:
    """The five stored grant values as the API's mapping (None = field not limited)."""
    return decode(raw).as_dict()


def ledger_error(name: str, holder: str, status: int) -> BudgetLedgerError:
    """The error for a refused reserve (status -1: ledger missing, -2: holder ended)."""
    if status == -1:
        return BudgetLedgerError(
            f"The shared budget {name!r} does not exist in Redis (never created, deleted, "
            "or the server lost its data). Create it with: deputy-runtime budget create "
            f"{name} --redis URL --max-requests N (or open a RedisBudget with limits); "
            "spending recorded before is lost."
        )
    return BudgetLedgerError(
        f"The holder id {holder!r} was already used on budget {name!r} (settled, or its "
        "reservation expired): every reservation needs a fresh holder id."
    )


class RedisBudget:
    """A shared budget ledger: reserve, hold, settle (the runtime's ledger protocol).

    ``limits`` maps ledger fields (``requests``, ``tool_calls``, ``input_tokens``,
    ``output_tokens``, ``cost_usd``) to a limit; a missing field or ``None`` is unlimited
    (its usage is still counted). Opening the budget (``async with``) creates the ledger
    when it does not exist yet and otherwise checks that the stored limits are these
    (BudgetLedgerError when not). ``limits=None`` opens a budget that was created before
    (``deputy-runtime budget create``, or a process that gave limits) with its stored
    limits, and refuses one that does not exist: a budget with a size of its own, which
    every process and run uses as it is. ``ttl`` (seconds) is how long a reservation outlives
    its holder's last renewal: then its grant returns to the ledger, exactly once.
    ``keep_ended`` (seconds) is how long settled/expired holder ids are remembered, which
    is how long a repeated or late settle is recognised.
    """

    def __init__(
        self,
        url: str | RedisConnection,
        name: str,
        limits: Mapping[str, int | float | None] | None,
        *,
        namespace: str = "deputy",
        ttl: float = 30.0,
        keep_ended: float = 86_400.0,
    ) -> None:
        self._owns = not isinstance(url, RedisConnection)
        self.connection = url if isinstance(url, RedisConnection) else RedisConnection(url)
        self.name = check_name("name", name, colon=False)
        self.namespace = check_name("namespace", namespace, colon=False)
        self._limits: list[int] | None = None if limits is None else encode_limits(limits)
        #: The ledger's limits: the given ones, or (``limits=None``) the stored ones once
        #: the budget is opened; ``None`` until then.
        self.limits: Amounts | None = None if self._limits is None else decode(self._limits)
        self.ttl = check_seconds("ttl", ttl)
        if self.ttl < 0.01:
            raise ValueError(f"ttl must be at least 0.01 seconds, got {ttl!r}")
        keep = check_seconds("keep_ended", keep_ended)
        if keep < self.ttl:
            raise ValueError(f"keep_ended must be at least ttl ({self.ttl}), got {keep_ended!r}")
        self._ttl_ms = max(int(self.ttl * 1000), 10)
        self._keep_ms = math.ceil(keep * 1000)
        base = f"{self.namespace}:budget:{self.name}"
        self._keys = [base, f"{base}:holds", f"{base}:exp", f"{base}:ended", f"{base}:endat"]

    def combined_with(self, backend: object) -> RedisCoordinator | None:
        """The combined store of this budget and a lease backend, when they can pair.

        The runtime asks this of a lead's shared budget for its exclusive lease backend:
        a :class:`~deputy_runtime.redis.RedisLeases` on this budget's connection and
        namespace (for example both of one :class:`RedisCoordinator`) pairs, and a
        delegation then takes its lease and reservation in one round trip and gives
        both back in one.

        Args:
            backend: The exclusive mode's lease backend.

        Returns:
            A :class:`RedisCoordinator` over both, or ``None`` when they do not pair.
        """
        from ._coordinator import RedisCoordinator  # the coordinator builds on this module
        from ._leases import RedisLeases

        if (
            isinstance(backend, RedisLeases)
            and backend.connection is self.connection
            and backend.namespace == self.namespace
        ):
            return RedisCoordinator.of(backend, self)
        return None

    @property
    def keys(self) -> list[str]:
        """The Redis keys of this ledger: budget, holds, exp, ended, endat."""
        return list(self._keys)

    @property
    def reserve_ttl_ms(self) -> int:
        """``ttl`` in whole milliseconds (at least 10), as the scripts take it."""
        return self._ttl_ms

    @property
    def keep_ended_ms(self) -> int:
        """``keep_ended`` in milliseconds, rounded up, as the scripts take it."""
        return self._keep_ms

    async def __aenter__(self) -> Self:
        await enter_connection(self.connection, owns=self._owns, user="RedisBudget")
        try:
            await self.ensure()
        except BaseException:
            if self._owns:
                await self.connection.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owns:
            await self.connection.__aexit__(exc_type, exc, tb)

    async def ensure(self) -> bool:
        """Create the ledger if missing, else check the stored limits match (idempotent).

        With ``limits=None``: read the stored limits; the ledger must exist.

        Returns:
            Whether this call created the ledger.

        Raises:
            BudgetLedgerError: The stored limits differ, or (``limits=None``) there is no
                such budget.
        """
        if self._limits is None:
            self.limits = (await self.state()).limit
            return False
        result = await self.connection.run(_scripts.INIT_BUDGET, self._keys[:1], [*self._limits])
        if int(result[0]) == -1:
            stored = decode([int(v) for v in result[1:]])
            given = decode(self._limits).as_dict()
            raise BudgetLedgerError(
                f"The shared budget {self.name!r} already exists with limits "
                f"{stored.as_dict()}, not {given}: use the same limits in "
                "every process, or a different budget name."
            )
        return int(result[0]) == 1

    async def reset(self) -> None:
        """Give the whole budget back: nothing used, nothing reserved, the same limits.

        Raises:
            BudgetLedgerError: There is no such budget, or reservations are held now (a
                run is using it: its settle would count against the fresh budget).
        """
        await self._reset("reset")

    async def delete(self) -> None:
        """Remove the budget from Redis (its limits, usage and holder records).

        Raises:
            BudgetLedgerError: There is no such budget, or reservations are held now.
        """
        await self._reset("delete")

    async def _reset(self, action: str) -> None:
        raw = await self.connection.run(_scripts.RESET_BUDGET, self._keys, [self._keep_ms, action])
        status = int(raw[0])
        if status == 0:
            raise ledger_error(self.name, "", -1)
        if status == -1:
            raise BudgetLedgerError(
                f"The shared budget {self.name!r} has {int(raw[1])} reservation(s) held now; "
                f"{action} it once the runs using it have ended (or their reservations "
                "expired)."
            )

    def reserve_args(
        self, holder: str, want: Mapping[str, int | float | None], parties: int = 1
    ) -> list[str | int]:
        """The script arguments of a reservation (validated; shared with the coordinator).

        Args:
            holder: The reservation's holder id.
            want: The amount wanted per ledger field, as for :meth:`reserve`.
            parties: The reservations made together, as for :meth:`reserve`.

        Returns:
            ``holder``, the reservation TTL and ``keep_ended`` in milliseconds, the five
            encoded wanted amounts (-1 where no limit is asked), the current span's
            ``traceparent`` ("" with tracing off), then ``parties``.

        Raises:
            ValueError: ``holder`` is not a valid id, ``want`` has an unknown field or a
                value out of range, or ``parties`` is below 1.
            TypeError: ``want`` is not a mapping or holds a value of the wrong type, or
                ``parties`` is not an int.
        """
        check_name("holder", holder)
        if not isinstance(parties, int) or isinstance(parties, bool):
            raise TypeError(f"parties must be an int, got {type(parties).__name__}")
        if parties < 1:
            raise ValueError(f"parties must be at least 1, got {parties}")
        return [
            holder,
            self._ttl_ms,
            self._keep_ms,
            *encode_want(want),
            current_traceparent(),
            parties,
        ]

    def settle_args(self, holder: str, used: Mapping[str, int | float]) -> list[str | int]:
        """The script arguments of a settlement (validated; shared with the coordinator).

        Args:
            holder: The reservation's holder id.
            used: The usage per ledger field, as for :meth:`settle`.

        Returns:
            ``holder``, ``keep_ended`` in milliseconds, then the five encoded used amounts
            (cost in micro-dollars, rounded up).

        Raises:
            ValueError: ``holder`` is not a valid id, or ``used`` has an unknown field or
                a value out of range.
            TypeError: ``used`` is not a mapping or holds a value of the wrong type.
        """
        check_name("holder", holder)
        return [holder, self._keep_ms, *encode_used(used)]

    async def reserve(
        self, holder: str, want: Mapping[str, int | float | None], *, parties: int = 1
    ) -> Mapping[str, int | float | None]:
        """Atomically take ``min(want, share)`` per limited field; return the grant.

        The share is ``ceil(remaining / parties)``: reservations made one after another
        with ``parties`` counting down (3, 2, 1) split what remains between them, so none
        takes everything because it asked no limit. A field missing from ``want`` or
        ``None`` asks no limit: it takes its whole share. Unlimited fields are granted
        ``None``. Reserving again for a holder that already has a reservation returns
        that grant (a retry after a lost reply takes nothing twice). Expired
        reservations are returned to the ledger first.

        Args:
            holder: A fresh holder id for this reservation.
            want: The amount wanted per ledger field.
            parties: The reservations being made together, this one included.

        Returns:
            The grant per ledger field; ``None`` for an unlimited field.

        Raises:
            BudgetLedgerError: The ledger does not exist in Redis, or ``holder`` was
                already settled or expired.
            CoordinationUnavailableError: Redis cannot be reached.
        """
        result = await self.connection.run(
            _scripts.RESERVE, self._keys, self.reserve_args(holder, want, parties)
        )
        status = int(result[0])
        if status < 0:
            raise ledger_error(self.name, holder, status)
        return grant_from([int(v) for v in result[1:]])

    async def hold(
        self, holder: str, on_lost: Callable[[str], None], *, renewed_at: float | None = None
    ) -> None:
        """Renew the reservation's expiry every ``ttl / 3`` until cancelled.

        Calls ``on_lost(reason)`` once and returns when the reservation expired
        (``reservation_expired``) or Redis stayed unreachable until it would
        (``redis_unreachable``).

        Args:
            holder: The holder id the reservation was made for.
            on_lost: Called once with the :class:`LostReason` when the reservation is lost.
            renewed_at: ``anyio.current_time()`` just before the reservation was sent: a
                recent one counts as the first renewal, so a holder that settles within
                ``ttl / 3`` costs no renewal round trip.
        """
        keys = self._keys[1:3]
        args: list[str | int] = [holder, self._ttl_ms]

        async def renew() -> LostReason | None:
            result = await self.connection.run(_scripts.RENEW_RESERVATION, keys, args)
            return None if int(result) == 1 else LostReason.RESERVATION_EXPIRED

        await keep_alive(renew, self.ttl, on_lost, renewed_at=renewed_at)

    async def settle(self, holder: str, used: Mapping[str, int | float]) -> None:
        """Count ``used`` and return the rest of the grant; exactly once per holder.

        Settling again is a no-op. Settling a reservation that already expired counts the
        usage only (its grant went back on expiry). Retries while Redis is unreachable for
        the connection's ``retry_for`` seconds, shielded from cancellation.

        Args:
            holder: The holder id the reservation was made for.
            used: The usage per ledger field; a missing field used nothing.

        Raises:
            BudgetLedgerError: ``holder`` has no reservation (never reserved, or ended
                longer ago than ``keep_ended``).
            CoordinationUnavailableError: Redis stayed unreachable for ``retry_for``.
        """
        args = self.settle_args(holder, used)
        with anyio.CancelScope(shield=True):
            status = await self.connection.run_retrying(_scripts.SETTLE, self._keys, args)
        if int(status) == -1:
            raise BudgetLedgerError(
                f"Cannot settle holder {holder!r} on budget {self.name!r}: it has no "
                "reservation (never reserved, or ended longer ago than keep_ended)."
            )

    async def state(self) -> LedgerState:
        """Remaining, reserved and used per field (expired reservations returned first).

        Returns:
            A snapshot of the ledger, its number of holders and the ``traceparent`` each
            current reservation recorded.

        Raises:
            BudgetLedgerError: The ledger does not exist in Redis.
            CoordinationUnavailableError: Redis cannot be reached.
        """
        raw = await self.connection.run(_scripts.STATE, self._keys, [self._keep_ms])
        if int(raw[0]) == 0:
            raise ledger_error(self.name, "", -1)
        width = 4 * len(FIELDS)
        values = [int(v) for v in raw[2 : 2 + width]]
        traced = [str(v) for v in raw[2 + width :]]
        limit, remaining, reserved, used = (
            [values[4 * i + offset] for i in range(len(FIELDS))] for offset in range(4)
        )
        limited = [v >= 0 for v in limit]
        return LedgerState(
            name=self.name,
            holders=int(raw[1]),
            limit=decode(limit, limited),
            remaining=decode(remaining, limited),
            reserved=decode(reserved, limited),
            used=decode(used, [True] * len(FIELDS)),
            traceparents=dict(zip(traced[::2], traced[1::2], strict=True)),
        )
