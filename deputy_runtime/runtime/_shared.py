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

A delegation that reaches its share draws more from its lead (``Meter.top_up``), and on
a shared ledger the ledger must grant it too: :class:`DelegationSpend`, the
subagent's run spend, reserves what its limits grew by on the ledger (holders
``DELEGATION_ID.tN``, split with the parties sharing the ledger as a first share is)
before the request or the turn's tool calls that need it; what the ledger does not
grant is given back to the lead and the delegation's limit lowered to what the ledger
holds for it. These extensions are renewed while the delegation runs and settled with
zero usage right after its own reservation is settled with everything it used, so
nothing it used is ever unheld on the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import msgspec

from ..errors import DelegationBindingError
from ._leases import Lease, LeaseBackend
from ._ledger import BudgetLedger, LeaseLedger
from ._records import Delegation, error_text
from ._states import StopReason
from ._usage import AgentUsage, Meter, Reservation, UsageLimits, exhausted, tighter

__all__ = [
    "DelegationSpend",
    "check_ledger",
    "combined_ledger",
    "ledger_used",
    "ledger_want",
    "reserve_combined",
    "shared_spend",
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


# The fields a delegation's top-ups are covered for before a request, and before a turn's
# tool calls.
_REQUEST_FIELDS = tuple(f for f in _FIELDS if f[0] != "max_tool_calls")
_TOOL_CALL_FIELDS = (("max_tool_calls", "tool_calls"),)


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


class _Extensions:
    """What a delegation holds on the ledger beyond its first share (see the module
    docstring): ``cover`` per ledger field (``None``: the ledger does not limit it), the
    extension holders, and the group that renews them while the delegation runs."""

    __slots__ = ("cover", "group", "holders", "ledger", "on_lost", "prefix")

    def __init__(self, ledger: BudgetLedger, prefix: str) -> None:
        self.ledger = ledger
        self.prefix = prefix
        self.cover: dict[str, float | None] = {}
        self.holders: list[str] = []
        self.group: anyio.abc.TaskGroup | None = None
        self.on_lost: Callable[[str], None] | None = None

    def granted(self, grant: Mapping[str, int | float | None]) -> None:
        self.cover = {name: grant.get(name) for _, name in _FIELDS}

    async def renew(self, hold: Callable[[], Any], on_lost: Callable[[str], None]) -> None:
        """Renew the first share (``hold``) and every extension until cancelled."""
        self.on_lost = on_lost
        try:
            async with anyio.create_task_group() as group:
                self.group = group
                for holder in self.holders:  # reserved before the renewals began
                    group.start_soon(self._hold, holder, on_lost, anyio.current_time())
                await hold()
        finally:
            self.group = None

    async def extend(self, want: Mapping[str, int | float], parties: int) -> dict[str, float]:
        """Reserve ``want`` more on the ledger; what was granted per field."""
        holder = f"{self.prefix}.t{len(self.holders) + 1}"
        sent = anyio.current_time()
        ask = {name: want.get(name, 0) for _, name in _FIELDS}
        # Shielded: a grant made while the caller is cancelled is still settled.
        with anyio.CancelScope(shield=True):
            grant = await self.ledger.reserve(holder, ask, parties=parties)
        self.holders.append(holder)
        if self.group is not None and self.on_lost is not None:
            self.group.start_soon(self._hold, holder, self.on_lost, sent)
        got: dict[str, float] = {}
        for name, amount in want.items():
            granted = grant.get(name)
            got[name] = amount if granted is None else min(amount, granted)
            if self.cover.get(name) is not None:
                self.cover[name] = (self.cover[name] or 0) + got[name]
        return got

    async def _hold(self, holder: str, on_lost: Callable[[str], None], sent: float) -> None:
        await self.ledger.hold(holder, on_lost, renewed_at=sent)

    async def settle(self) -> str | None:
        """Settle every extension with zero usage (after the first share was settled with
        everything the delegation used)."""
        failed: str | None = None
        for holder in self.holders:
            try:
                with anyio.CancelScope(shield=True):
                    await self.ledger.settle(holder, {})
            except Exception as exc:
                failed = failed or f"shared budget settlement failed: {error_text(exc)}"
        self.holders.clear()
        return failed


class _LedgerBinding:
    __slots__ = ("d", "extensions", "granted_at", "ledger")

    holds = True

    def __init__(self, ledger: BudgetLedger, d: Delegation, granted_at: float) -> None:
        self.ledger = ledger
        self.d = d
        self.granted_at = granted_at
        self.extensions = _Extensions(ledger, d.delegation_id)

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        async def first() -> None:
            await self.ledger.hold(self.d.delegation_id, on_lost, renewed_at=self.granted_at)

        await self.extensions.renew(first, on_lost)

    async def release(self) -> str | None:
        try:
            with anyio.CancelScope(shield=True):
                await self.ledger.settle(self.d.delegation_id, ledger_used(self.d.usage))
        except Exception as exc:
            return f"shared budget settlement failed: {error_text(exc)}"
        finally:
            extended = await self.extensions.settle()
        return extended


class _CombinedBinding:
    __slots__ = ("d", "extensions", "granted_at", "lease", "store")

    holds = True

    def __init__(
        self,
        store: LeaseLedger,
        lease: Lease,
        d: Delegation,
        granted_at: float,
        ledger: BudgetLedger,
    ):
        self.store = store
        self.lease = lease
        self.d = d
        self.granted_at = granted_at
        self.extensions = _Extensions(ledger, d.delegation_id)

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        async def first() -> None:
            await self.store.hold(self.lease, on_lost, renewed_at=self.granted_at)

        await self.extensions.renew(first, on_lost)

    async def release(self) -> str | None:
        try:
            with anyio.CancelScope(shield=True):
                await self.store.release_and_settle(self.lease, ledger_used(self.d.usage))
        except Exception as exc:
            return f"lease release and shared budget settlement failed: {error_text(exc)}"
        finally:
            extended = await self.extensions.settle()
        return extended


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
        binding = _LedgerBinding(ledger, d, granted_at)
        binding.extensions.granted(grant)
        _keep(d, binding)
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
    assert d.ledger is not None
    combined = _CombinedBinding(store, lease, d, granted_at, d.ledger)
    combined.extensions.granted(grant)
    _keep(d, combined)
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


class DelegationSpend:
    """A subagent's run spend on its lead's shared budget: the ledger covers every top-up.

    Used by the subagent's run as a lead's own :class:`~._ownspend.LeadSpend` is (the
    same four calls), for a delegation that holds a share of the ledger. Its meter may
    draw more from the lead's meter (``Meter.top_up``); before a request, and before a
    turn's tool calls run, what its limits grew by beyond what the ledger holds for it is
    reserved on the ledger, and what the ledger cannot grant is given back to the lead.
    """

    __slots__ = ("_extensions", "_lead", "_meter", "_reservation")

    def __init__(self, extensions: _Extensions, reservation: Reservation, meter: Meter) -> None:
        self._extensions = extensions
        self._reservation = reservation
        self._lead = reservation.meter
        self._meter = meter

    def _parties(self) -> int:
        return self._lead.ledger_parties() if self._lead is not None else 1

    async def _cover(self, fields: tuple[tuple[str, str], ...], need: Mapping[str, float]) -> None:
        """Reserve on the ledger what ``need`` asks beyond the cover; take back the rest."""
        cover = self._extensions.cover
        want = {}
        for _, name in fields:
            held = cover.get(name)
            if held is not None and need[name] > held:
                want[name] = need[name] - held
        if not want:
            return
        got = await self._extensions.extend(want, self._parties())
        for field, name in fields:
            if name in want and got[name] < want[name]:
                # The ledger holds less than the lead's top-up: the run may use only that.
                limit = cover[name]
                assert limit is not None
                if self._lead is not None:
                    self._lead.give_back(self._reservation, field, limit)
                self._meter.set_limit(field, limit)

    async def before_request(self) -> StopReason | None:
        """Cover the request, token and cost limits the run reached by topping up."""
        limits = self._meter.limits
        need = {name: getattr(limits, field) or 0 for field, name in _REQUEST_FIELDS}
        await self._cover(_REQUEST_FIELDS, need)
        return self._meter.exceeded(reaching=True)

    async def after_request(self, usage: Any) -> None:
        """Nothing: the delegation's usage is settled with its first share."""

    async def reserve_next(self, tool_calls: int = 0) -> None:
        """Cover the turn's ``tool_calls`` on the ledger before they take their slots."""
        need = {"tool_calls": self._meter.tool_calls + tool_calls}
        await self._cover(_TOOL_CALL_FIELDS, need)

    def tool_slots(self, calls: int, take: Callable[[], bool]) -> list[bool]:
        """The turn's tool-call slots: as many as the ledger covers, then the meter's."""
        cover = self._extensions.cover.get("tool_calls")
        room = calls if cover is None else max(0, math.floor(cover) - self._meter.tool_calls)
        return [i < room and take() for i in range(calls)]


def shared_spend(d: Delegation) -> Callable[[Meter], DelegationSpend] | None:
    """The spend of ``d``'s subagent run when ``d`` holds a share of a shared ledger.

    Args:
        d: The delegation, its ledger share taken.

    Returns:
        A factory given the subagent's meter, or ``None`` without a ledger share.
    """
    binding = next(
        (b for b in d.bindings or () if isinstance(b, _LedgerBinding | _CombinedBinding)), None
    )
    reservation = d.reservation
    if binding is None or reservation is None:
        return None
    extensions = binding.extensions
    return lambda meter: DelegationSpend(extensions, reservation, meter)
