"""A run's budget inside workflow code: counting, limit checks, child reservations.

Pure and synchronous (no I/O, no clock), so it runs in a workflow and gives the same
answers on every replay. The rules are the in-process runtime's: request and tool-call
limits are checked before each request or call; token and cost limits after each
response; a child's limits are its fair share of ``limit - used - reserved`` per field
(``fair_share``: the lead keeps its next request, the turn's delegations split the
rest; requests further capped by the definition's ``max_requests``), carved and reserved
in one synchronous step, so delegations started concurrently never together get more
than the lead has left. A durable child's share is not topped up while it runs. The
limit checks and the tool-call slots look at what is used, not at what is reserved, as
in-process: the loop takes a turn's slots before its delegations start and sends the
next request only after they all settle, so no reservation is live when the lead itself
spends.
"""

from __future__ import annotations

from typing import Any

from ..chat import Usage
from ..runtime import (
    LIMIT_STOP_REASONS,
    AgentUsage,
    StopReason,
    UsageLimits,
    fair_share,
    shortfall_text,
)

__all__ = ["LIMIT_FIELDS", "Budget", "exhausted"]

#: (UsageLimits field, stop reason), in the order limits are reported.
LIMIT_FIELDS = LIMIT_STOP_REASONS


class Budget:
    """Usage of one run plus what its running delegations hold."""

    __slots__ = ("cost_reported", "expected", "limits", "reservations", "used")

    def __init__(self, limits: UsageLimits) -> None:
        self.limits = limits
        self.used: dict[str, float] = {
            "requests": 0,
            "tool_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cached_input_tokens": 0,
            "cost_usd": 0.0,
        }
        self.cost_reported = False
        # delegation id -> the limits reserved for it, until it settles
        self.reservations: dict[str, UsageLimits] = {}
        # Delegations the current turn asked for that have not reserved yet.
        self.expected = 0

    def expect(self, delegations: int) -> None:
        """Say how many delegations the current turn asked for (before any reserves).

        Args:
            delegations: The turn's delegation calls.
        """
        self.expected = delegations

    def unexpect(self) -> None:
        """One expected delegation will not reserve (it was refused before it could)."""
        if self.expected > 0:
            self.expected -= 1

    # -- counting -----------------------------------------------------------------------

    def start_request(self) -> None:
        """Count a request when it is sent: a failed request is not free."""
        self.used["requests"] += 1

    def add_response(self, usage: Usage) -> None:
        """Add a response's tokens and cost (extra upstream requests it reports too).

        Args:
            usage: The response's usage as the provider reported it.
        """
        if usage.requests > 1:
            self.used["requests"] += usage.requests - 1
        self._add_tokens(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        self._add_cost(usage.cost_usd)

    def add_external(self, usage: AgentUsage) -> None:
        """Add a settled delegation's actual usage.

        Args:
            usage: What the delegation's run used.
        """
        self.used["requests"] += usage.requests
        self.used["tool_calls"] += usage.tool_calls
        self._add_tokens(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        self._add_cost(usage.cost_usd)

    def _add_tokens(self, input_tokens: int, output_tokens: int, cached: int) -> None:
        self.used["input_tokens"] += input_tokens
        self.used["output_tokens"] += output_tokens
        self.used["cached_input_tokens"] += cached

    def _add_cost(self, cost: float | None) -> None:
        if cost is not None:
            self.cost_reported = True
            self.used["cost_usd"] += cost

    def take_tool_call(self) -> bool:
        """Count one tool call if the limit allows it.

        Returns:
            ``True`` when the call was counted, ``False`` when the limit refuses it.
        """
        limit = self.limits.max_tool_calls
        if limit is not None and self.used["tool_calls"] >= limit:
            return False
        self.used["tool_calls"] += 1
        return True

    def snapshot(self) -> AgentUsage:
        """The usage so far as the public value type.

        Returns:
            An immutable snapshot (``cost_usd`` is ``None`` until a cost is reported).
        """
        u = self.used
        return AgentUsage(
            int(u["requests"]),
            int(u["tool_calls"]),
            int(u["input_tokens"]),
            int(u["output_tokens"]),
            int(u["cached_input_tokens"]),
            u["cost_usd"] if self.cost_reported else None,
        )

    # -- limits -------------------------------------------------------------------------

    def _used(self, field: str) -> float:
        u = self.used
        if field == "max_total_tokens":
            return u["input_tokens"] + u["output_tokens"]
        return u[field.removeprefix("max_")]

    def exceeded(self, *, reaching: bool) -> StopReason | None:
        """The stop reason of the first limit passed.

        Args:
            reaching: Count a limit exactly reached as passed too (before a request or a
                delegation); the tool-call limit only ever stops the next call.

        Returns:
            The stop reason (``request_limit``...), or ``None`` when no limit is passed.
        """
        for field, reason in LIMIT_FIELDS:
            limit = getattr(self.limits, field)
            if limit is None:
                continue
            used = self._used(field)
            if field == "max_tool_calls":
                if used > limit:
                    return reason
            elif used > limit or (reaching and used >= limit):
                return reason
        return None

    def _remaining(self, field: str) -> float | None:
        limit = getattr(self.limits, field)
        if limit is None:
            return None
        held = sum(getattr(r, field) or 0 for r in self.reservations.values())
        remaining: float = max(0, limit - self._used(field) - held)
        return round(remaining, 12) if field == "max_cost_usd" else remaining

    def shortfall(self, reason: StopReason) -> str:
        """Why a delegation stopped by ``reason`` could not start, worded as in-process.

        Args:
            reason: The limit's stop reason.

        Returns:
            The text for the delegation's ``error``.
        """

        def held(field: str) -> float:
            return sum(getattr(r, field) or 0 for r in self.reservations.values())

        return shortfall_text(reason, self.limits, self._used, held)

    def reserve(self, key: str, max_requests: int | None) -> UsageLimits:
        """Carve a child's fair share out of what is left and hold it under ``key``.

        Args:
            key: The delegation's id; it must not hold a reservation already.
            max_requests: The definition's ``max_requests`` (``None``: no cap of its own).

        Returns:
            The child's limits (``on_exceed="stop"``), now held until :meth:`release`.

        Raises:
            ValueError: ``key`` already holds a reservation.
        """
        if key in self.reservations:
            raise ValueError(f"budget reservation {key!r} is already held")
        values: dict[str, Any] = {}
        parties = max(1, self.expected)
        self.unexpect()
        for field, _ in LIMIT_FIELDS:
            remaining = self._remaining(field)
            if remaining is not None:
                values[field] = fair_share(field, remaining, parties)
        values["max_requests"] = _tighter(values.get("max_requests"), max_requests)
        limits = UsageLimits(**values, on_exceed="stop")
        self.reservations[key] = limits
        return limits

    def release(self, key: str) -> None:
        """Release ``key``'s reservation; releasing twice does nothing.

        Args:
            key: The delegation's id.
        """
        self.reservations.pop(key, None)


def _tighter(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def exhausted(limits: UsageLimits) -> StopReason | None:
    """The stop reason a run under ``limits`` would stop with before its first request.

    A delegation granted nothing to run on is settled ``not_started`` with this reason,
    before its child workflow starts, as in-process (a zero tool-call limit still allows
    an answer without tools).

    Args:
        limits: The limits the run would start with.

    Returns:
        The first zero limit's stop reason, or ``None`` when a first request is allowed.
    """
    for field, reason in LIMIT_FIELDS:
        if field != "max_tool_calls" and getattr(limits, field) == 0:
            return reason
    return None
