"""The budget ledger seam: a budget shared by several leads or processes.

Every lead run keeps its budget in its own in-process :class:`Meter`; the meter is the
default and does not implement this protocol. A shared ledger (for example on Redis)
implements it so that several leads draw on one budget: a delegation (and each of the
lead's own requests) reserves what it may use, holds the reservation while it runs, and
settles what it used exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from ._leases import Lease

__all__ = ["BudgetLedger", "LeaseLedger"]


@runtime_checkable
class BudgetLedger(Protocol):
    """A budget kept outside the process, reserved and settled per delegation.

    Keys of the amounts: ``requests``, ``tool_calls``, ``input_tokens``,
    ``output_tokens``, ``cost_usd``.
    """

    async def reserve(
        self, holder: str, want: Mapping[str, int | float | None], *, parties: int = 1
    ) -> Mapping[str, int | float | None]:
        """Atomically take up to ``want`` (``None``: no limit asked) and at most
        ``ceil(remaining / parties)`` of each limited field; return what was granted.

        ``parties`` counts the reservations being made together (this one included):
        made one after another with ``parties`` counting down, they split what remains.
        """
        ...

    async def hold(
        self, holder: str, on_lost: Callable[[str], None], *, renewed_at: float | None = None
    ) -> None:
        """Renew the reservation's expiry until cancelled; ``on_lost(reason)`` if it cannot.

        ``renewed_at`` (``anyio.current_time()`` just before the reservation was sent)
        lets a recent grant count as the first renewal.
        """
        ...

    async def settle(self, holder: str, used: Mapping[str, int | float]) -> None:
        """Count ``used`` against the ledger and return the unused rest; exactly once."""
        ...


@runtime_checkable
class LeaseLedger(Protocol):
    """A lease backend and a budget ledger in one store, taken and given back together.

    A ledger offers one through ``combined_with(backend)`` (returning ``None`` when it
    cannot pair with that lease backend); then an exclusive delegation takes its lease
    and its reservation in one step and gives both back in one step.
    """

    async def acquire_and_reserve(
        self,
        key: str,
        holder: str,
        want: Mapping[str, int | float | None],
        *,
        wait: bool,
        parties: int = 1,
    ) -> tuple[Lease, Mapping[str, int | float | None]]:
        """Take the lease on ``key`` and reserve ``want`` for ``holder`` atomically
        (``parties`` as for :meth:`BudgetLedger.reserve`)."""
        ...

    async def hold(
        self, lease: Lease, on_lost: Callable[[str], None], *, renewed_at: float | None = None
    ) -> None:
        """Renew both until cancelled (first renewal due from ``renewed_at``, if given)."""
        ...

    async def release_and_settle(self, lease: Lease, used: Mapping[str, int | float]) -> None:
        """Release the lease and settle ``used``; exactly once."""
        ...
