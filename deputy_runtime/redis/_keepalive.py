"""The renewal loop behind ``hold()`` of leases and reservations."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable

import anyio

from ..errors import CoordinationUnavailableError

__all__ = ["LostReason", "keep_alive"]


class LostReason(enum.StrEnum):
    """Why ``hold()`` gave up a lease or a reservation (passed to ``on_lost``)."""

    #: The lease key expired before it was renewed (or the server lost its data).
    LEASE_EXPIRED = "lease_expired"
    #: Another holder holds the key now: this holder's lease had expired and was re-granted.
    LEASE_TAKEN_OVER = "lease_taken_over"
    #: The reservation expired and its grant went back to the ledger.
    RESERVATION_EXPIRED = "reservation_expired"
    #: Redis could not be reached before the lease or reservation would expire.
    UNREACHABLE = "redis_unreachable"


async def keep_alive(
    renew: Callable[[], Awaitable[LostReason | None]],
    ttl: float,
    on_lost: Callable[[str], None],
    *,
    renewed_at: float | None = None,
) -> None:
    """Renew every ``ttl / 3`` seconds until cancelled; on loss call ``on_lost`` once.

    ``renew`` returns ``None`` when renewed, or the reason the thing is gone. The first
    renewal runs at once, so validity is measured from a known renewal: after one that
    was *sent* at ``t``, the server keeps the lease until at least ``t + ttl``. When the
    server cannot be reached until then, ``on_lost(LostReason.UNREACHABLE)`` fires at that
    moment, not later, so the holder stops no later than another holder can be granted.

    ``renewed_at`` (``anyio.current_time()`` at or before the grant was sent) makes the
    grant count as the first renewal when it is less than ``ttl / 3`` old: the next one
    is due ``ttl / 3`` after it, so a holder that finishes sooner costs no renewal round
    trip. An older one (a grant that was waited for) is ignored: renewal starts at once.
    """
    interval = ttl / 3
    valid_until = anyio.current_time() + ttl
    if renewed_at is not None and anyio.current_time() - renewed_at < interval:
        valid_until = renewed_at + ttl
        await anyio.sleep(max(renewed_at + interval - anyio.current_time(), 0.0))
    retry_delay = min(0.05, interval)
    while True:
        sent = anyio.current_time()
        reason: LostReason | None = LostReason.UNREACHABLE
        renewed = False
        with anyio.move_on_after(max(valid_until - sent, 0.0)):
            try:
                reason = await renew()
                renewed = True
            except CoordinationUnavailableError:
                pass
        if renewed and reason is None:
            valid_until = sent + ttl
            await anyio.sleep(interval)
            continue
        if renewed or anyio.current_time() >= valid_until:
            on_lost(reason or LostReason.UNREACHABLE)
            return
        await anyio.sleep(min(retry_delay, max(valid_until - anyio.current_time(), 0.0)))
        retry_delay = min(retry_delay * 2, interval)
