"""Usage limits, per-run accounting and budget reservations.

A run's :class:`Meter` counts what the run used (its own requests and tool calls plus the
settled usage of its delegations) and what running delegations have *reserved*. A child's
limits are carved out of ``limit - used - reserved`` and reserved in the same synchronous
step, so parallel delegations can never together be granted more than the lead has.

The rule that keeps this fair (:func:`fair_share`): the lead keeps one model request for
itself, so a lead run can always conclude; the delegations its model asked for in one
turn split the rest evenly (the lead counts as one more party for tool calls, tokens and
cost); and a delegation that used up its share draws more from its lead, atomically, while
the lead has some left (:meth:`Meter.top_up`), so the whole budget is usable by whoever
needs it and the total never passes a limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from ..chat import Usage, UsageCounts
from ._states import StopReason

__all__ = [
    "LIMIT_FIELDS",
    "LIMIT_STOP_REASONS",
    "AgentUsage",
    "Meter",
    "Reservation",
    "UsageLimits",
    "exhausted",
    "fair_share",
    "refill_field",
    "shortfall_text",
    "tighter",
]

_INT_MAX = 2**31 - 1

#: The limit fields of UsageLimits, in the order limits are checked and reported.
LIMIT_FIELDS: tuple[str, ...] = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost_usd",
)
#: Each limit field with the stop reason of a run that reaches it.
LIMIT_STOP_REASONS: tuple[tuple[str, StopReason], ...] = (
    ("max_requests", StopReason.REQUEST_LIMIT),
    ("max_tool_calls", StopReason.TOOL_CALL_LIMIT),
    ("max_input_tokens", StopReason.INPUT_TOKEN_LIMIT),
    ("max_output_tokens", StopReason.OUTPUT_TOKEN_LIMIT),
    ("max_total_tokens", StopReason.TOTAL_TOKEN_LIMIT),
    ("max_cost_usd", StopReason.COST_LIMIT),
)
_REASON_FIELDS = {reason: field for field, reason in LIMIT_STOP_REASONS}
# The usage counters of a Meter, by attribute name.
_COUNTERS = (
    "requests",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cost_usd",
)
_COUNT_FIELDS = LIMIT_FIELDS[:-1]  # every field but max_cost_usd is a count
# The fields checked after a response, which a run can pass by one response.
_AFTER_FIELDS = frozenset(LIMIT_FIELDS[2:])


def _check_count(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"UsageLimits.{name} must be an int or None, got {value!r}")
    if not 0 <= value <= _INT_MAX:
        raise ValueError(f"UsageLimits.{name} must be between 0 and {_INT_MAX}, got {value}")


class UsageLimits(msgspec.Struct, frozen=True, gc=False):
    """Per-run limits. ``None`` means unlimited; every run of an agent starts from zero.

    Request and tool-call limits are exact: they are checked before the request or call.
    Token and cost limits are checked after each response, so a run can exceed them by
    at most one response. ``max_seconds`` is wall-clock time: when it runs out the run is
    cancelled at once, wherever it is (a model request or a tool call that hangs
    included); calls cut off are answered as such and the run ends ``time_limit``. A
    lead's subagents get at most the time the lead has left. ``on_exceed="stop"`` ends the
    run with a typed stop reason; ``"error"`` raises
    :class:`~deputy_runtime.RequestLimitExceeded` (requests) or
    :class:`~deputy_runtime.BudgetExceeded` (everything else) after the final usage event.
    """

    max_requests: int | None = 25
    max_tool_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    on_exceed: Literal["stop", "error"] = "stop"
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in _COUNT_FIELDS:
            value = getattr(self, name)
            # Fast path for the common valid values; anything else gets the full check
            # (and its message). type() is int rejects bools, as the check does.
            if value is not None and (type(value) is not int or not 0 <= value <= _INT_MAX):
                _check_count(name, value)
        cost = self.max_cost_usd
        if cost is not None:
            if isinstance(cost, bool) or not isinstance(cost, int | float):
                raise TypeError(f"UsageLimits.max_cost_usd must be a number or None, got {cost!r}")
            if not math.isfinite(cost) or cost < 0:
                raise ValueError(f"UsageLimits.max_cost_usd must be finite and >= 0, got {cost!r}")
        if self.on_exceed not in ("stop", "error"):
            raise ValueError(
                f"UsageLimits.on_exceed must be 'stop' or 'error', got {self.on_exceed!r}"
            )
        seconds = self.max_seconds
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise TypeError(
                    f"UsageLimits.max_seconds must be a number or None, got {seconds!r}"
                )
            if not math.isfinite(seconds) or seconds < 0:
                raise ValueError(
                    f"UsageLimits.max_seconds must be finite and >= 0, got {seconds!r}"
                )


class AgentUsage(UsageCounts, frozen=True, gc=False):
    """What a run used: its own requests and tool calls plus settled delegations.

    Adding two values adds every field (see :class:`~deputy_runtime.chat.UsageCounts`).
    """

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens; cached input tokens are part of input, not added."""
        return self.input_tokens + self.output_tokens


class Reservation:
    """Budget held by one running delegation; released exactly once.

    Attributes:
        limits: The delegation's limits (raised by every top-up).
        held: The ``(field, amount)`` pairs held on the lead's meter.
        released: Whether it was released.
        cap: The definition's ``max_requests`` a top-up never passes (``None``: none).
        fair: Whether it was a fair share, which may be topped up; a reservation under
            host-given limits (a ``parallel_delegate`` share) is never topped up.
        meter: The meter it is held on.
        on_ledger: Whether its share of the lead's shared budget was reserved (or is
            being reserved) there.
    """

    __slots__ = ("cap", "fair", "held", "limits", "meter", "on_ledger", "released")

    def __init__(self, limits: UsageLimits) -> None:
        self.limits = limits
        self.released = False
        self.held: tuple[tuple[str, float], ...] = ()  # the (field, amount) pairs held
        self.cap: int | None = None
        self.fair = False
        self.meter: Meter | None = None
        self.on_ledger = False


class Meter:
    """Mutable usage counters of one run plus the reservations of its running delegations.

    Only the run's own task group touches a meter, and every method is synchronous, so a
    check followed by a reservation can never interleave with another delegation's.
    """

    __slots__ = (
        "cached_input_tokens",
        "cost_reported",
        "cost_usd",
        "expected",
        "input_tokens",
        "limited",
        "limits",
        "output_tokens",
        "requests",
        "reservations",
        "reserved",
        "source",
        "tool_calls",
    )

    def __init__(self, limits: UsageLimits) -> None:
        self.limits = limits
        self.limited: tuple[str, ...] | None = None  # fields the limits set, on first use
        self.requests = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_input_tokens = 0
        self.cost_usd = 0.0
        self.cost_reported = False
        # Live reservations and their sums per field; created by the first reservation
        # (most runs, every subagent's, never reserve).
        self.reservations: set[Reservation] | None = None
        self.reserved: dict[str, float] | None = None
        # Delegations the current turn asked for that have not reserved yet: the parties
        # the rest of the budget is split between.
        self.expected = 0
        # The lead's meter and this run's reservation on it, when this run is a fair-share
        # delegation: where a top-up comes from.
        self.source: tuple[Meter, Reservation] | None = None

    # -- accounting ---------------------------------------------------------------------

    def start_request(self) -> None:
        """Count a request when it is sent, so a failed request is not free."""
        self.requests += 1

    def add_response(self, usage: Usage) -> None:
        """Add one response's tokens and cost (its request was counted when sent).

        A response reporting ``usage.requests > 1`` (a provider that made several
        upstream calls for it) adds the extra ones.
        """
        if usage.requests > 1:
            self.requests += usage.requests - 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        if usage.cost_usd is not None:
            self.cost_reported = True
            self.cost_usd += usage.cost_usd

    def add_external(self, usage: AgentUsage) -> None:
        """Add a settled delegation's actual usage to this run."""
        self.requests += usage.requests
        self.tool_calls += usage.tool_calls
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        if usage.cost_usd is not None:
            self.cost_reported = True
            self.cost_usd += usage.cost_usd

    def counters(self) -> dict[str, float]:
        """The usage counters by name (what a run carried elsewhere restores).

        Returns:
            ``requests``, ``tool_calls``, the token counts and ``cost_usd``.
        """
        return {name: getattr(self, name) for name in _COUNTERS}

    def restore(self, counters: Mapping[str, float], cost_reported: bool) -> None:
        """Set the usage counters from :meth:`counters` (a missing one is 0).

        Args:
            counters: The counters by name.
            cost_reported: Whether any response reported a cost.
        """
        for name in _COUNTERS:
            value = counters.get(name, 0)
            setattr(self, name, float(value) if name == "cost_usd" else int(value))
        self.cost_reported = cost_reported

    def snapshot(self) -> AgentUsage:
        """The usage so far as an immutable value."""
        return AgentUsage(
            self.requests,
            self.tool_calls,
            self.input_tokens,
            self.output_tokens,
            self.cached_input_tokens,
            self.cost_usd if self.cost_reported else None,
        )

    # -- limit checks ---------------------------------------------------------------------

    def _used(self, field: str) -> float:
        if field == "max_requests":
            return self.requests
        if field == "max_tool_calls":
            return self.tool_calls
        if field == "max_input_tokens":
            return self.input_tokens
        if field == "max_output_tokens":
            return self.output_tokens
        if field == "max_total_tokens":
            return self.input_tokens + self.output_tokens
        return self.cost_usd

    def exceeded(self, *, reaching: bool) -> StopReason | None:
        """The stop reason of the first limit passed, or ``None``.

        With ``reaching=True`` (before a request, before a tool call, after delegated
        usage is added) a limit that is exactly reached counts as well, except the
        tool-call limit, which only stops the next call.
        """
        # Spelled out field by field: this runs before every request and delegation.
        lim = self.limits
        if lim.max_requests is not None and _over(self.requests, lim.max_requests, reaching):
            return StopReason.REQUEST_LIMIT
        if lim.max_tool_calls is not None and self.tool_calls > lim.max_tool_calls:
            return StopReason.TOOL_CALL_LIMIT
        if lim.max_input_tokens is not None and _over(
            self.input_tokens, lim.max_input_tokens, reaching
        ):
            return StopReason.INPUT_TOKEN_LIMIT
        if lim.max_output_tokens is not None and _over(
            self.output_tokens, lim.max_output_tokens, reaching
        ):
            return StopReason.OUTPUT_TOKEN_LIMIT
        if lim.max_total_tokens is not None and _over(
            self.input_tokens + self.output_tokens, lim.max_total_tokens, reaching
        ):
            return StopReason.TOTAL_TOKEN_LIMIT
        if lim.max_cost_usd is not None and _over(self.cost_usd, lim.max_cost_usd, reaching):
            return StopReason.COST_LIMIT
        return None

    def before_request(self) -> StopReason | None:
        """The stop reason if another model request is not allowed.

        A delegation that reached its share first draws more from its lead (as often as
        it needs to and the lead has some left); only then does a limit stop it.
        """
        return self.limit_reached(reaching=True)

    def limit_reached(self, *, reaching: bool) -> StopReason | None:
        """:meth:`exceeded`, after a delegation at its share drew more from its lead.

        Args:
            reaching: As for :meth:`exceeded`.

        Returns:
            The stop reason of the first limit still passed once no top-up helps.
        """
        reason = self.exceeded(reaching=reaching)
        while reason is not None and self.source is not None:
            field = refill_field(reason)
            if field is None or not self._refill(field):
                break
            reason = self.exceeded(reaching=reaching)
        return reason

    def take_tool_call(self) -> bool:
        """Count one tool call if the tool-call limit allows it; ``False`` if it does not."""
        limit = self.limits.max_tool_calls
        if (
            limit is not None
            and self.tool_calls >= limit
            and (self.source is None or not self._refill("max_tool_calls"))
        ):
            return False
        self.tool_calls += 1
        return True

    def _refill(self, field: str) -> bool:
        """Raise this run's limit ``field`` by a top-up from its lead; ``False``: none."""
        assert self.source is not None
        lead, reservation = self.source
        excess, need = self.refill_terms(field)
        grant = lead.top_up(reservation, field, excess=excess, need=need)
        if grant <= 0:
            return False
        self.limits = reservation.limits
        return True

    def refill_terms(self, field: str) -> tuple[float, float]:
        """What a top-up of ``field`` must cover: ``(excess, need)`` for :meth:`top_up`.

        Tokens and cost are checked after a response, so a run may be past its share:
        the top-up covers that excess first. It is worth having only if what it adds
        beyond covers an average response of this run (the need); else the run stops
        and the rest stays with the lead. A lead in another process (a durable child's
        lead workflow) is asked with these same terms.

        Args:
            field: The limit field this run reached.

        Returns:
            The excess past this run's limit and the least share worth granting.
        """
        used = self._used(field)
        limit: float = getattr(self.limits, field)
        need = used / self.requests if field in _AFTER_FIELDS and self.requests else 0
        return max(0, used - limit), need

    def set_limit(self, field: str, limit: float) -> None:
        """Set this run's limit ``field`` to ``limit``: a top-up its lead granted in
        another process, or a top-up a shared budget could not cover taken back.

        Args:
            field: A field this run limits.
            limit: The new limit.
        """
        self.limits = msgspec.structs.replace(self.limits, **{field: _limit_value(field, limit)})

    # -- reservations ----------------------------------------------------------------------

    def remaining(self, field: str) -> float | None:
        """What is left of the limit ``field`` after usage and live reservations.

        Args:
            field: One of :data:`LIMIT_FIELDS`.

        Returns:
            ``None`` when the field is unlimited, else the amount left (never negative).
        """
        limit: float | None = getattr(self.limits, field)
        if limit is None:
            return None
        held = self.reserved.get(field, 0.0) if self.reserved is not None else 0.0
        remaining: float = max(0, limit - self._used(field) - held)
        # Costs are floats: round away representation noise so 0.3 - 0.1 - 0.2 is 0.
        return round(remaining, 12) if field == "max_cost_usd" else remaining

    def shortfall(self, reason: StopReason) -> str:
        """Why a delegation stopped by ``reason`` could not start (see :func:`shortfall_text`).

        Args:
            reason: The limit's stop reason.

        Returns:
            The text for the delegation's ``error``.
        """

        def held(field: str) -> float:
            return self.reserved.get(field, 0.0) if self.reserved is not None else 0.0

        return shortfall_text(reason, self.limits, self._used, held)

    def expect(self, delegations: int) -> None:
        """Say how many delegations the current turn asked for (before any reserves).

        Each of them reserves a fair share of what is left (:func:`fair_share`); a
        reservation made with nothing expected is shared as if it were the only one.

        Args:
            delegations: The turn's delegation calls.
        """
        self.expected = delegations

    def unexpect(self) -> None:
        """One expected delegation will not reserve (it was refused before it could)."""
        if self.expected > 0:
            self.expected -= 1

    def reserve_child(
        self, max_requests: int | None, overrides: UsageLimits | None = None
    ) -> Reservation:
        """Carve a child's limits out of what is left and reserve them, atomically.

        Without ``overrides`` each field the run limits is the child's fair share of
        what is left (:func:`fair_share`, shared with the delegations still expected this
        turn), and the reservation may be topped up later. With ``overrides``
        (host-given limits, which can only tighten) each field is ``limit - used -
        reserved`` tightened by them, and is never topped up; their ``max_seconds`` is
        the child's time limit. ``max_requests`` is further capped by the definition's
        value either way.

        Args:
            max_requests: The definition's ``max_requests`` (``None``: no cap of its own).
            overrides: Host-given limits for the child, if any.

        Returns:
            The reservation, held on this meter until :meth:`release`.
        """
        values: dict[str, Any] = {"max_requests": None}
        fair = overrides is None
        parties = max(1, self.expected)
        if fair:
            self.unexpect()
        # Only fields the run limits (or the overrides) set can be set for the child.
        fields = LIMIT_FIELDS if overrides is not None else self._limited_fields()
        for field in fields:
            remaining = self.remaining(field)
            if remaining is not None:
                if fair:
                    remaining = fair_share(field, remaining, parties)
                elif field != "max_cost_usd":
                    remaining = int(remaining)
            if overrides is not None:
                remaining = tighter(remaining, getattr(overrides, field))
            if remaining is not None:
                values[field] = remaining
        if max_requests is not None:
            values["max_requests"] = tighter(values["max_requests"], max_requests)
        # A child that uses up its share stops (status "stopped"); only the lead's own
        # limits raise, so the lead's model can still see what the child did.
        # Time is not a budget that is used up and handed back: it is passed on, not held.
        seconds = overrides.max_seconds if overrides is not None else None
        reservation = Reservation(UsageLimits(**values, on_exceed="stop", max_seconds=seconds))
        held = tuple(values.items())
        if values["max_requests"] is None:
            held = held[1:]  # "max_requests" is first: unset, so nothing is held for it
        reservation.held = held
        reservation.cap = max_requests
        reservation.fair = fair
        reservation.meter = self
        self._hold(held, 1)
        if self.reservations is None:
            self.reservations = set()
        self.reservations.add(reservation)
        return reservation

    def top_up(
        self, reservation: Reservation, field: str, *, excess: float = 0, need: float = 0
    ) -> float:
        """Grant a live fair-share reservation more of ``field``, atomically.

        The grant is what the delegation already used past its share (``excess``) plus
        a fair share of what is left after that (the lead keeps its request; the
        delegations still expected this turn keep theirs); when nothing is left here and
        this run is itself a delegation, this run first draws from its own lead, so a
        top-up reaches as far up the tree as there is budget. A reservation under
        host-given limits, a released one, a field this run does not limit, the
        definition's own ``max_requests`` and a share smaller than ``need`` are never
        granted.

        Args:
            reservation: A reservation on this meter.
            field: The limit field the delegation reached.
            excess: How far the delegation's usage is already past its limit.
            need: The least share worth granting beyond the excess.

        Returns:
            The amount granted (``0`` when nothing could be).
        """
        if reservation.released or not reservation.fair:
            return 0
        current = getattr(reservation.limits, field)
        if current is None or getattr(self.limits, field) is None:
            return 0
        headroom: float | None = None
        if field == "max_requests" and reservation.cap is not None:
            headroom = reservation.cap - current
            if headroom <= 0:
                return 0
        share = self._grantable(field, excess)
        if share <= max(0, need - 1e-12) and self.source is not None and self._refill(field):
            share = self._grantable(field, excess)
        if share <= 0 or share < need:
            return 0
        grant = _limit_value(
            field, excess + share if headroom is None else min(excess + share, headroom)
        )
        self._change(reservation, field, grant)
        return grant

    def give_back(self, reservation: Reservation, field: str, limit: float) -> None:
        """Lower a live reservation's limit ``field`` to ``limit`` and hold that much less.

        For a top-up granted here that a shared budget could not cover: the delegation
        cannot use it, so its lead's other delegations may.

        Args:
            reservation: A reservation on this meter.
            field: The limit field.
            limit: The new limit; not below what the reservation held before (a larger
                value, or a released reservation, changes nothing).
        """
        current = getattr(reservation.limits, field)
        if reservation.released or current is None or limit >= current:
            return
        self._change(reservation, field, _limit_value(field, limit) - current)

    def _change(self, reservation: Reservation, field: str, by: float) -> None:
        """Move a live reservation's limit ``field`` and what it holds by ``by``."""
        current = getattr(reservation.limits, field)
        reservation.limits = msgspec.structs.replace(reservation.limits, **{field: current + by})
        held = dict(reservation.held)
        held[field] = held.get(field, 0) + by
        reservation.held = tuple(held.items())
        self._hold(((field, by),), 1)

    def _grantable(self, field: str, excess: float) -> float:
        remaining = self.remaining(field)
        if remaining is None or remaining <= excess:
            return 0
        return fair_share(field, remaining - excess, self.expected + 1)

    def _limited_fields(self) -> tuple[str, ...]:
        limited = self.limited
        if limited is None:
            limits = self.limits
            limited = self.limited = tuple(
                f for f in LIMIT_FIELDS if getattr(limits, f) is not None
            )
        return limited

    def ledger_parties(self) -> int:
        """How many delegations share what a shared budget has left right now.

        Those the current turn still expects, plus every live reservation whose share
        of the shared budget is not taken yet (the one about to take it included); a
        shared budget grants each ``ceil(remaining / parties)``, so they split it.
        """
        pending = sum(1 for r in self.reservations or () if not r.on_ledger)
        return max(1, self.expected + pending)

    def release(self, reservation: Reservation) -> None:
        """Release a reservation; a second release does nothing."""
        if not reservation.released:
            reservation.released = True
            if self.reservations is not None:
                self.reservations.discard(reservation)
            self._hold(reservation.held, -1)

    def _hold(self, held: tuple[tuple[str, float], ...], sign: int) -> None:
        # Running sums keep a reservation O(1) however many delegations are in flight.
        reserved = self.reserved
        if reserved is None:
            reserved = self.reserved = dict.fromkeys(LIMIT_FIELDS, 0.0)
        for field, value in held:
            reserved[field] += sign * value


def _limit_value(field: str, value: float) -> float:
    """``value`` as the limit field holds it: counts are ints (a float crossed a wire or
    was summed with one), cost stays a float."""
    return value if field == "max_cost_usd" else int(value)


def refill_field(reason: StopReason) -> str | None:
    """The limit field a top-up could lift for a run stopped by ``reason``, if any.

    The tool-call limit is not among them: a run is stopped by it only once past it
    (:meth:`Meter.take_tool_call` draws more for each call instead).

    Args:
        reason: A stop reason from :meth:`Meter.exceeded`.

    Returns:
        The field, or ``None`` when a top-up cannot help.
    """
    field = _REASON_FIELDS.get(reason)
    return None if field == "max_tool_calls" else field


def fair_share(field: str, remaining: float, parties: int) -> float:
    """One delegation's share of what a lead has left of ``field``.

    The lead keeps one model request for its own next request (so it can always
    conclude) and ``parties`` delegations split the rest of the requests evenly; of tool
    calls, tokens and cost the lead keeps a share like a delegation's. Shares of requests
    and tool calls round up, so when there is at least one request for each of them,
    every delegation started together gets one (token shares round down, the rest
    staying with the lead); each share is taken from what is left after the ones before
    it, so together they never pass the limit.

    Worked example: ``max_requests=12``, the lead has made 1 request and its model asks
    for three delegations in one turn. 11 are left; the lead keeps 1; the three reserve
    ``ceil(10/3) = 4``, ``ceil(6/2) = 3`` and ``ceil(3/1) = 3``. One that runs out draws
    more from what the others hand back when they settle.

    Args:
        field: One of :data:`LIMIT_FIELDS`.
        remaining: What is left of it after usage and live reservations.
        parties: The delegations sharing it (this one included), at least 1.

    Returns:
        The share (an integer for counts).
    """
    parties = max(1, parties)
    if field == "max_requests":
        return math.ceil(max(0, remaining - 1) / parties)
    if field == "max_cost_usd":
        return round(remaining / (parties + 1), 12)
    if field == "max_tool_calls":
        return math.ceil(int(remaining) / (parties + 1))
    # Tokens round down: what is left over stays with the lead, whose next request is
    # refused once none is left.
    return int(remaining) // (parties + 1)


def exhausted(limits: UsageLimits) -> StopReason | None:
    """The stop reason a run under ``limits`` would stop with before its first request.

    A limit of zero on requests, tokens, cost or time leaves a run nothing to do (a zero
    tool-call limit still allows an answer without tools).

    Args:
        limits: The limits a run would start with.

    Returns:
        The reason of the first such limit, or ``None`` when a first request is allowed.
    """
    if limits.max_requests == 0:
        return StopReason.REQUEST_LIMIT
    if limits.max_input_tokens == 0:
        return StopReason.INPUT_TOKEN_LIMIT
    if limits.max_output_tokens == 0:
        return StopReason.OUTPUT_TOKEN_LIMIT
    if limits.max_total_tokens == 0:
        return StopReason.TOTAL_TOKEN_LIMIT
    if limits.max_cost_usd == 0:
        return StopReason.COST_LIMIT
    if limits.max_seconds is not None and limits.max_seconds <= 0:
        return StopReason.TIME_LIMIT
    return None


_FIELD_WORDS = {
    "max_requests": "model requests",
    "max_tool_calls": "tool calls",
    "max_input_tokens": "input tokens",
    "max_output_tokens": "output tokens",
    "max_total_tokens": "tokens",
    "max_cost_usd": "USD",
}


def shortfall_text(
    reason: StopReason,
    limits: UsageLimits,
    used: Callable[[str], float],
    held: Callable[[str], float],
) -> str:
    """Why a delegation stopped by ``reason`` could not start, in the model's words.

    Names the limit and what was left of it: what the run used, what running
    delegations hold and the request the lead keeps for itself, so the lead's model can
    tell a spent budget from a busy one. Every path that settles a delegation
    ``not_started`` for a limit (in-process and durable) words it with this one function.

    Args:
        reason: The limit's stop reason.
        limits: The run's limits.
        used: The run's usage of a limit field (``"max_requests"``...).
        held: What running delegations hold of a limit field.

    Returns:
        The text for the delegation's ``error``.
    """
    field = _REASON_FIELDS.get(reason)
    limit: float | None = getattr(limits, field) if field is not None else None
    if field is None or limit is None:
        return f"Not started: {reason.value}."
    spent, holding = used(field), held(field)
    left = max(0.0, limit - spent - holding)
    kept = ""
    if field == "max_requests" and left >= 1:
        left -= 1  # the lead's own next request (fair_share)
        kept = ", 1 kept for the lead's own next request"
    return (
        f"Not started: the run's {field} of {_number(limit)} leaves {_number(left)} "
        f"{_FIELD_WORDS[field]} for this delegation ({_number(spent)} used, "
        f"{_number(holding)} held by running delegations{kept}). Do the rest without it, "
        "or delegate again once running delegations have finished."
    )


def _number(value: float) -> str:
    """A count as an integer, a cost with up to six decimals."""
    value = round(value, 12)  # costs are floats: 0.3 - 0.1 - 0.2 is 0
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0")


def _over(used: float, limit: float, reaching: bool) -> bool:
    return used > limit or (reaching and used >= limit)


def tighter(a: float | int | None, b: float | int | None) -> float | int | None:
    """The tighter of two limits, where ``None`` (unlimited) loses to any number."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
