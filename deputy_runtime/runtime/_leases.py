"""Leases on exclusive delegation resources, behind the :class:`LeaseBackend` protocol.

A delegation in exclusive mode holds a lease on its resource key for as long as it runs.
The default backend, :class:`InProcessLeases`, is a per-process lock table; a backend
shared between processes (for example on Redis) implements the same three methods and is
passed as ``DelegationPolicy(..., lease_backend=...)`` or ``ExclusiveResource(...,
backend=...)``; no delegation code changes.

Rules every backend keeps: a busy key raises :class:`~deputy_runtime.ResourceBusyError`
at once unless the caller waits; every grant of a key carries a fencing token larger than
any earlier grant of that key; a release only frees the lease it names (same holder and
token) and may be repeated.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import anyio
import msgspec

from ..errors import ResourceBusyError

__all__ = ["IN_PROCESS_LEASES", "InProcessLeases", "Lease", "LeaseBackend"]


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """A granted lease.

    Attributes:
        key: The resource key (a backend may namespace it internally).
        holder: The unique id of the holder (the delegation id).
        token: The fencing token: strictly increasing with every grant of this key, so a
            resource can refuse writes from a holder whose lease was since granted again.
        traceparent: The W3C ``traceparent`` of the span current where the lease was
            taken, when the backend records it (``None``: tracing was off there, or the
            backend keeps none), so an operator can find the run holding a stuck lease.
    """

    key: str
    holder: str
    token: int
    traceparent: str | None = None


@runtime_checkable
class LeaseBackend(Protocol):
    """Where exclusive leases are kept."""

    async def acquire(self, key: str, holder: str, *, wait: bool) -> Lease:
        """Grant the lease on ``key`` to ``holder``.

        Busy and ``wait=False``: raise ResourceBusyError at once. Busy and ``wait=True``:
        wait (cancellable) until granted.
        """
        ...

    async def hold(self, lease: Lease, on_lost: Callable[[str], None]) -> None:
        """Keep the lease alive until this call is cancelled.

        Backends with expiry renew it here; if the lease cannot be kept, call
        ``on_lost(reason)`` once and return.
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Release if still held by ``lease.holder`` with ``lease.token``; idempotent.

        Never frees another holder's lease.
        """
        ...


class InProcessLeases:
    """The default backend: a lock table shared by every lead of this process.

    A ``threading.Lock`` guards check-and-take, so a key is exclusive across every event
    loop thread of the process; nothing awaits while holding it. A waiter waits on an
    anyio event per key, set at every release, then tries again (waiting is cancellable
    and works on asyncio and trio; waiters must share one event loop, since the event
    belongs to the loop that created it). Leases never expire, so :meth:`hold` only waits
    to be cancelled.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Lease] = {}
        self._tokens: dict[str, int] = {}
        self._released: dict[str, anyio.Event] = {}

    async def acquire(self, key: str, holder: str, *, wait: bool) -> Lease:
        """Grant the lease on ``key`` to ``holder``; see :class:`LeaseBackend`.

        Args:
            key: The resource key.
            holder: The delegation id taking the lease.
            wait: Wait for a busy key instead of failing.

        Returns:
            The granted lease.

        Raises:
            ResourceBusyError: The key is held and ``wait`` is false.
        """
        while True:
            with self._lock:
                if key not in self._held or not wait:
                    return self._take(key, holder)
                released = self._released.get(key)
                if released is None:
                    released = self._released[key] = anyio.Event()
            await released.wait()

    def acquire_now(self, key: str, holder: str) -> Lease:
        """Take the lease on ``key`` for ``holder`` without waiting (no await).

        Raises:
            ResourceBusyError: The key is held.
        """
        with self._lock:
            return self._take(key, holder)

    def _take(self, key: str, holder: str) -> Lease:
        # Called with the lock held.
        if key in self._held:
            raise ResourceBusyError(
                f"The exclusive delegation resource {key!r} is busy: another "
                "delegation holds it. Retry after it settles, use a different "
                "resource key, or let delegations wait for it "
                "(ExclusiveResource(key, wait=True))."
            )
        token = self._tokens.get(key, 0) + 1
        self._tokens[key] = token
        lease = Lease(key=key, holder=holder, token=token)
        self._held[key] = lease
        return lease

    async def hold(self, lease: Lease, on_lost: Callable[[str], None]) -> None:
        """In-process leases cannot be lost: wait until cancelled."""
        await anyio.sleep_forever()

    async def release(self, lease: Lease) -> None:
        """Release ``lease`` if it is still the one held; see :class:`LeaseBackend`."""
        self.release_now(lease)

    def release_now(self, lease: Lease) -> bool:
        """Release synchronously (no await: safe in a cancelled scope).

        Returns:
            ``True`` if the lease was held and is now free.
        """
        with self._lock:
            if self._held.get(lease.key) != lease:
                return False
            del self._held[lease.key]
            released = self._released.pop(lease.key, None)
        if released is not None:
            released.set()
        return True

    def holder(self, key: str) -> str | None:
        """The holder of ``key``'s lease, or ``None`` (for diagnostics and tests)."""
        with self._lock:
            lease = self._held.get(key)
        return lease.holder if lease is not None else None

    def held(self) -> dict[str, Lease]:
        """A copy of every lease held now."""
        with self._lock:
            return dict(self._held)


#: The process-wide default backend of exclusive mode.
IN_PROCESS_LEASES = InProcessLeases()
