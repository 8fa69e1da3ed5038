"""A lead's own spend on its shared budget.

A lead given ``shared_budget=`` draws its delegations from the ledger (see ``_shared``)
and, through :class:`LeadSpend`, its own model requests and tool calls as well, so the
ledger counts everything the run makes:

* **Model requests.** Before each of the lead's requests one request (and the least
  amount of every limited token and cost field, so an exhausted field is seen before the
  request is sent) is reserved under the holder ``RUN_ID.rN``; the reservation is held
  (renewed) while it is outstanding and settled, shielded, with the response's usage. A
  request that failed or was cancelled settles one request and no tokens. A grant of
  nothing stops the run with that field's limit (``request_limit``,
  ``input_token_limit``, ``output_token_limit``, ``cost_limit``).
* **The lead keeps its next request.** When the lead's model asks for tool calls, the
  next request is reserved before the calls run, so the turn's delegations share what is
  left after it. Other processes draw on the same budget between two of the lead's
  reservations, so before its first request the lead reserves a spare one (holder
  ``RUN_ID.spare``, when the budget limits requests): a next request the budget can no
  longer grant is sent on the spare, once. A run whose spare or first request the budget
  cannot grant stops with ``request_limit`` before sending anything, so a lead run that
  made its first request can always conclude after its delegations, on a shared budget
  too.
* **Tool calls.** The same reservation asks for the turn's tool calls; the calls take
  their slots from its grant in request order before any of them runs, and a call with
  no slot is refused like one past the run's own tool-call limit. The slots taken are
  settled with the next request: one reservation and one settlement per turn.
* Tokens and cost keep the documented one-response overrun: a response is settled with
  what it used even when that is more than the least amount reserved.

Every reservation is settled exactly once: :meth:`LeadSpend.close` settles what is still
outstanding with zero usage (a next request the run never made) and stops the renewals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Protocol

import anyio
import anyio.abc

from ..chat import Usage
from ._ledger import BudgetLedger
from ._states import StopReason

__all__ = ["LeadSpend", "RunSpend"]

# The least of each field a request needs left to be sent; tokens and cost are settled
# with what the response used.
_REQUEST_WANT: Mapping[str, int | float | None] = {
    "requests": 1,
    "tool_calls": 0,
    "input_tokens": 1,
    "output_tokens": 1,
    "cost_usd": 1e-6,
}
# The spare request: the request alone (its tokens are checked by the reservation it
# stands in for).
_SPARE_WANT: Mapping[str, int | float | None] = {
    "requests": 1,
    "tool_calls": 0,
    "input_tokens": 0,
    "output_tokens": 0,
    "cost_usd": 0.0,
}
# Requests last: a refused request may still be sent on the spare, tokens and cost not.
_REQUEST_STOPS = (
    ("input_tokens", StopReason.INPUT_TOKEN_LIMIT),
    ("output_tokens", StopReason.OUTPUT_TOKEN_LIMIT),
    ("cost_usd", StopReason.COST_LIMIT),
    ("requests", StopReason.REQUEST_LIMIT),
)


class RunSpend(Protocol):
    """A run's spend on a shared budget, as the agent loop calls it: a lead's own
    (:class:`LeadSpend`) or a delegation's top-ups (``_shared.DelegationSpend``)."""

    async def before_request(self) -> StopReason | None:
        """The limit that stops the next request, if any (called when the meter allows it)."""
        ...

    async def after_request(self, usage: Usage | None) -> None:
        """The request just made ended with ``usage`` (``None``: failed or cut off)."""
        ...

    async def reserve_next(self, tool_calls: int = 0) -> None:
        """A turn asked for ``tool_calls``: reserve what they and the next request need."""
        ...

    def tool_slots(self, calls: int, take: Callable[[], bool]) -> list[bool]:
        """One slot flag per call, ``take`` taking the run's own tool-call slot."""
        ...


class _Hold:
    """One outstanding reservation of the lead and the scope of its renewal."""

    __slots__ = ("grant", "holder", "scope", "tool_calls")

    def __init__(self, holder: str, grant: Mapping[str, int | float | None]) -> None:
        self.holder = holder
        self.grant = grant
        self.scope = anyio.CancelScope()
        self.tool_calls = 0  # the slots the turn's calls took from this grant


class LeadSpend:
    """The lead run's own requests and tool calls on its shared budget.

    An async context manager owned by the lead's run: it owns the task group that renews
    outstanding reservations, and leaving it settles whatever is still outstanding.

    Args:
        ledger: The lead's shared budget.
        run_id: The run's id; holder ids are ``RUN_ID.rN``.
        on_lost: Called with the reason when a reservation could not be renewed.
    """

    __slots__ = ("_group", "_next", "_on_lost", "_seq", "_spare", "ledger", "run_id")

    def __init__(self, ledger: BudgetLedger, run_id: str, on_lost: Callable[[str], None]):
        self.ledger = ledger
        self.run_id = run_id
        self._on_lost = on_lost
        self._group: anyio.abc.TaskGroup | None = None
        self._next: _Hold | None = None  # the next request's reservation, once made
        self._spare: _Hold | None = None  # one request kept for a refused next request
        self._seq = 0

    async def __aenter__(self) -> LeadSpend:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group = self._group
        assert group is not None
        try:
            with anyio.CancelScope(shield=True):
                await self.close()
        finally:
            group.cancel_scope.cancel()
            self._group = None
            if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
                # The run's own error propagates as it is, not inside an exception group.
                await group.__aexit__(None, None, None)
                suppressed = None
            else:
                # The run's body ran inside the group: exit it as `async with` would.
                suppressed = await group.__aexit__(exc_type, exc, tb)
        return suppressed

    async def close(self) -> None:
        """Settle the reservation of a next request the run did not make (its turn's tool
        calls only)."""
        pending, self._next = self._next, None
        spare, self._spare = self._spare, None
        try:
            if pending is not None:
                await self._settle(pending, {"tool_calls": pending.tool_calls})
        finally:
            if spare is not None:
                await self._settle(spare, {})

    # -- model requests --------------------------------------------------------------------

    async def reserve_next(self, tool_calls: int = 0) -> None:
        """Reserve the lead's next model request and ``tool_calls`` slots now (before the
        turn's delegations reserve theirs)."""
        if self._next is None:
            want = {**_REQUEST_WANT, "tool_calls": tool_calls}
            self._next = await self._reserve(want)

    async def before_request(self) -> StopReason | None:
        """Reserve this request (unless already reserved); the limit it hit, if any.

        A grant of nothing is settled at once (with the turn's tool calls) and its
        field's limit is returned: the request must not be sent.
        """
        first = self._seq == 0
        if first:
            # The spare first: a run starts only when the budget still has the request it
            # would conclude with, whatever other processes reserve meanwhile.
            kept = await self._reserve(_SPARE_WANT, holder=f"{self.run_id}.spare")
            granted = kept.grant.get("requests")
            if granted is not None and granted >= 1:
                self._spare = kept
            else:
                await self._settle(kept, {})  # unlimited, or nothing left to keep
                if granted is not None:
                    return StopReason.REQUEST_LIMIT
        await self.reserve_next()
        pending = self._next
        assert pending is not None
        for name, reason in _REQUEST_STOPS:
            granted = pending.grant.get(name)
            if granted is not None and granted < (_REQUEST_WANT[name] or 0):
                spare = self._spare
                self._next = None
                await self._settle(pending, {"tool_calls": pending.tool_calls})
                if name != "requests" or spare is None or first:
                    # The first request is never sent on the spare: the run would then
                    # have nothing left to conclude with.
                    return reason
                # The budget has no request left for this one: it is sent on the spare.
                self._spare = None
                self._next = pending = spare
                break
        return None

    async def after_request(self, usage: Usage | None) -> None:
        """Settle the request just made with ``usage`` (``None``: it failed or was cut off,
        one request and no tokens)."""
        pending, self._next = self._next, None
        if pending is None:
            return
        used: dict[str, int | float] = {"requests": 1, "tool_calls": pending.tool_calls}
        if usage is not None:
            used["requests"] = max(1, usage.requests)
            used["input_tokens"] = usage.input_tokens
            used["output_tokens"] = usage.output_tokens
            used["cost_usd"] = usage.cost_usd or 0.0
        await self._settle(pending, used)

    # -- tool calls ----------------------------------------------------------------------------

    def tool_slots(self, calls: int, take: Callable[[], bool]) -> list[bool]:
        """The turn's tool-call slots: the ledger's grant first, then the run's own.

        Args:
            calls: The turn's tool calls.
            take: Takes one slot of the run's own tool-call limit (the meter's).

        Returns:
            One flag per call, in request order.
        """
        pending = self._next
        granted = None if pending is None else pending.grant.get("tool_calls")
        allowed = calls if granted is None else min(calls, math.floor(granted))
        slots = [i < allowed and take() for i in range(calls)]
        if pending is not None:
            pending.tool_calls += sum(slots)
        return slots

    # -- the ledger ----------------------------------------------------------------------------

    async def _reserve(
        self, want: Mapping[str, int | float | None], *, holder: str | None = None
    ) -> _Hold:
        if holder is None:
            self._seq += 1
            holder = f"{self.run_id}.r{self._seq}"
        sent = anyio.current_time()
        # Shielded: a reservation granted while the caller is cancelled is still
        # recorded here, so it is settled instead of waiting for its expiry.
        with anyio.CancelScope(shield=True):
            grant = await self.ledger.reserve(holder, want)
        hold = _Hold(holder, grant)
        assert self._group is not None, "LeadSpend is used outside its context"
        self._group.start_soon(self._renew, hold, sent)
        return hold

    async def _renew(self, hold: _Hold, sent: float) -> None:
        with hold.scope:
            await self.ledger.hold(hold.holder, self._on_lost, renewed_at=sent)

    async def _settle(self, hold: _Hold, used: Mapping[str, int | float]) -> None:
        hold.scope.cancel()
        with anyio.CancelScope(shield=True):
            await self.ledger.settle(hold.holder, used)
