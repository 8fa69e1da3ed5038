"""A lead's shared budget: each delegation's reservation on a :class:`BudgetLedger`.

A lead given ``shared_budget=`` reserves every delegation's share from the ledger as
well as from its own meter, and the tighter of the two grants wins. The ledger splits
what it has left between the delegations sharing it at that moment
(:meth:`Meter.ledger_parties`), so none takes everything because it has no cap. The ledger
reservation is a binding like a lease: registered on the delegation once granted, held
(renewed) while the subagent runs, a renewal that fails interrupts it (``lease_lost``),
and it is settled exactly once with the delegation's actual usage, shielded, when the
delegation settles. When the policy's exclusive lease backend pairs with the ledger
(``ledger.combined_with(backend)`` returns a :class:`LeaseLedger`), the lease and the
reservation are taken in one step and given back in one step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import msgspec

from ..errors import DelegationBindingError
from ._leases import Lease, LeaseBackend
from ._ledger import BudgetLedger, LeaseLedger
from ._records import Delegation, error_text
from ._states import StopReason
from ._usage import AgentUsage, UsageLimits, exhausted, tighter

__all__ = [
    "check_ledger",
    "combined_ledger",
    "ledger_used",
    "ledger_want",
    "reserve_combined",
    "take_shared",
]

# UsageLimits field -> ledger field.
_FIELDS = (
    ("max_requests", "requests"),
    ("max_tool_calls", "tool_calls"),
    ("max_input_tokens", "input_tokens"),
    ("max_output_tokens", "output_tokens"),
    ("max_cost_usd", "cost_usd"),
)


def check_ledger(ledger: object) -> BudgetLedger | None:
    """``ledger`` if it is ``None`` or a BudgetLedger.

    Raises:
        TypeError: It is neither (the message names ``shared_budget``).
    """
    if ledger is not None and not isinstance(ledger, BudgetLedger):
        raise TypeError(
            "shared_budget must implement BudgetLedger (reserve, hold, settle), got "
            f"{type(ledger).__name__}"
        )
    return ledger


def ledger_want(limits: UsageLimits) -> dict[str, int | float | None]:
    """What a delegation asks of the ledger: its limits (``None``: no limit asked)."""
    return {name: getattr(limits, field) for field, name in _FIELDS}


def ledger_used(usage: AgentUsage) -> dict[str, int | float]:
    """A delegation's usage as ledger amounts (an unreported cost counts as 0)."""
    return {
        "requests": usage.requests,
        "tool_calls": usage.tool_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd or 0.0,
    }


def combined_ledger(ledger: BudgetLedger | None, backend: LeaseBackend) -> LeaseLedger | None:
    """The combined store of ``ledger`` and ``backend``, when the ledger offers one."""
    if ledger is None:
        return None
    combine = getattr(ledger, "combined_with", None)
    if combine is None:
        return None
    combined = combine(backend)
    return combined if isinstance(combined, LeaseLedger) else None


def _apply_grant(d: Delegation, grant: Mapping[str, int | float | None]) -> None:
    """Tighten the delegation's limits by the ledger's grant (the tighter wins)."""
    reservation = d.reservation
    assert reservation is not None  # the meter's reservation comes first
    limits = reservation.limits
    values: dict[str, Any] = {}
    for field, name in _FIELDS:
        granted = grant.get(name)
        if granted is not None:
            values[field] = tighter(getattr(limits, field), granted)
    if values:
        reservation.limits = msgspec.structs.replace(limits, **values)


class _LedgerBinding:
    __slots__ = ("d", "granted_at", "ledger")

    holds = True

    def __init__(self, ledger: BudgetLedger, d: Delegation, granted_at: float) -> None:
        self.ledger = ledger
        self.d = d
        self.granted_at = granted_at

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        await self.ledger.hold(self.d.delegation_id, on_lost, renewed_at=self.granted_at)

    async def release(self) -> str | None:
        try:
            with anyio.CancelScope(shield=True):
                await self.ledger.settle(self.d.delegation_id, ledger_used(self.d.usage))
        except Exception as exc:
            return f"shared budget settlement failed: {error_text(exc)}"
        return None


class _CombinedBinding:
    __slots__ = ("d", "granted_at", "lease", "store")

    holds = True

    def __init__(self, store: LeaseLedger, lease: Lease, d: Delegation, granted_at: float):
        self.store = store
        self.lease = lease
        self.d = d
        self.granted_at = granted_at

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        await self.store.hold(self.lease, on_lost, renewed_at=self.granted_at)

    async def release(self) -> str | None:
        try:
            with anyio.CancelScope(shield=True):
                await self.store.release_and_settle(self.lease, ledger_used(self.d.usage))
        except Exception as exc:
            return f"lease release and shared budget settlement failed: {error_text(exc)}"
        return None


async def take_shared(d: Delegation) -> bool:
    """Reserve ``d``'s share on the lead's ledger unless already taken; may it run?

    The reservation is registered on ``d`` as soon as it is granted, so it is settled
    exactly once whatever happens next. A grant that leaves nothing to run on sets the
    limit's stop reason on ``d`` and returns ``False`` (the delegation ends
    ``not_started``; its reservation is settled with zero usage).

    Raises:
        Exception: What the ledger raised (Redis unreachable, a refused reservation);
            ``d`` is marked a setup failure and nothing is held for it.
    """
    ledger = d.ledger
    assert ledger is not None
    assert d.reservation is not None
    if not d.ledger_held:
        granted_at = anyio.current_time()
        try:
            grant = await ledger.reserve(
                d.delegation_id,
                ledger_want(d.reservation.limits),
                parties=_parties(d),
            )
        except BaseException:
            d.stop_reason = StopReason.SETUP_ERROR
            raise
        d.ledger_held = True
        _keep(d, _LedgerBinding(ledger, d, granted_at))
        _apply_grant(d, grant)
    empty = exhausted(d.reservation.limits)
    if empty is not None:
        d.stop_reason = empty
        return False
    return True


async def reserve_combined(d: Delegation, store: LeaseLedger, key: str, *, wait: bool) -> Lease:
    """Take ``d``'s lease on ``key`` and its share of the budget in one step.

    Raises:
        ResourceBusyError: The key is busy and ``wait`` is false (nothing was reserved).
        Exception: What the store raised otherwise.
    """
    if d.reservation is None or d.ledger_held:
        raise DelegationBindingError(
            "A shared budget with a combined lease backend needs the delegation's "
            "reservation before its lease."
        )
    granted_at = anyio.current_time()
    lease, grant = await store.acquire_and_reserve(
        key,
        d.delegation_id,
        ledger_want(d.reservation.limits),
        wait=wait,
        parties=_parties(d),
    )
    d.ledger_held = True
    _keep(d, _CombinedBinding(store, lease, d, granted_at))
    d.lease = lease
    _apply_grant(d, grant)
    return lease


def _parties(d: Delegation) -> int:
    """The parties ``d`` shares the ledger with, counted as it takes its share."""
    reservation = d.reservation
    assert reservation is not None
    assert reservation.meter is not None
    parties = reservation.meter.ledger_parties()
    reservation.on_ledger = True
    return parties


def _keep(d: Delegation, binding: _LedgerBinding | _CombinedBinding) -> None:
    if d.bindings is None:
        d.bindings = []
    d.bindings.append(binding)
