"""The delegation policy's limits as durable data, and ``on_exceed="error"`` on the client.

A :class:`~deputy_runtime.DelegationPolicy` holds callables, so it never crosses the
durable boundary itself; its two limits do, as :class:`DelegationLimits` in the lead's
(or a batch's) input: ``max_seconds``, each delegation's own time limit (tightened by the
time its lead has left), and ``max_delegations``, how many delegations the model may
start per agent in one lead run. :class:`DelegationCounts` keeps the per-agent counts in
workflow state; it is rebuilt from the carried records after a continue-as-new, so it
needs no field of its own in the checkpoint.

A workflow never raises for a limit: a run with ``on_exceed="error"`` still returns its
output (its result's ``limits.on_exceed`` says ``"error"``), and :func:`raise_on_exceed`
raises from it on the client exactly what the in-process run raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated

import msgspec

from ..runtime import (
    AgentResult,
    DelegationPolicy,
    StopReason,
    SubagentRecord,
    UsageLimits,
    delegation_cap_text,
    raise_for_limit,
)

__all__ = [
    "DelegationCounts",
    "DelegationLimits",
    "child_seconds",
    "delegation_limits",
    "out_of_time",
    "raise_on_exceed",
    "spent_message",
]

_Count = Annotated[int, msgspec.Meta(ge=0)]


class DelegationLimits(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The limits of a :class:`~deputy_runtime.DelegationPolicy` a durable run keeps.

    Attributes:
        max_seconds: Each delegation's own time limit in seconds (``None``: only the
            lead's remaining time, if it has a limit).
        max_delegations: Delegations per agent in one lead run: one number for every
            agent, a mapping of lowercased agent name to number (agents not named are
            unlimited), or ``None``.
    """

    max_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = None
    max_delegations: _Count | dict[str, _Count] | None = None

    def cap(self, agent_name: str) -> int | None:
        """How many delegations to ``agent_name`` one lead run may start.

        Args:
            agent_name: The agent's (lowercased) name.

        Returns:
            Its cap, ``None`` when it has none.
        """
        caps = self.max_delegations
        if caps is None or isinstance(caps, int):
            return caps
        return caps.get(agent_name)


def delegation_limits(policy: DelegationPolicy | None) -> DelegationLimits:
    """``policy``'s limits as data (``DelegationLimits()`` without a policy).

    Args:
        policy: The delegation policy, already validated by its own constructor.

    Returns:
        Its ``max_seconds`` and ``max_delegations`` (a mapping copied to a dict).
    """
    if policy is None:
        return DelegationLimits()
    caps = policy.max_delegations
    return DelegationLimits(
        max_seconds=None if policy.max_seconds is None else float(policy.max_seconds),
        max_delegations=dict(caps) if isinstance(caps, Mapping) else caps,
    )


def spent_message(agent_name: str, cap: int) -> str:
    """The error a delegation refused by its agent's cap carries (the in-process text)."""
    return delegation_cap_text(agent_name, cap)


class DelegationCounts:
    """Delegations started per agent in one lead run, against ``max_delegations``.

    As in-process, a delegation to a known agent counts when its call passes the cap
    check, whatever happens to it later (queued and dropped, failed, stopped); one
    refused by the cap does not count, and calls naming an unknown agent never do.

    Args:
        limits: The run's delegation limits.
        carried: The records of the earlier runs of a continue-as-new chain.
        known: The names of the lead's definitions.
    """

    __slots__ = ("counts", "limits")

    def __init__(
        self, limits: DelegationLimits, carried: Iterable[SubagentRecord], known: Iterable[str]
    ) -> None:
        self.limits = limits
        names = set(known)
        self.counts: dict[str, int] = {}
        for record in carried:
            if record.agent_name in names and record.stop_reason != StopReason.DELEGATION_LIMIT:
                self.counts[record.agent_name] = self.counts.get(record.agent_name, 0) + 1

    def take(self, agent_name: str) -> str | None:
        """Count one delegation to the known agent ``agent_name``.

        Returns:
            ``None`` when it may go on, else the error of a spent agent budget (then it
            is not counted).
        """
        cap = self.limits.cap(agent_name)
        if cap is None:
            return None
        used = self.counts.get(agent_name, 0)
        if used >= cap:
            return spent_message(agent_name, cap)
        self.counts[agent_name] = used + 1
        return None


def child_seconds(own: float | None, left: float | None) -> float | None:
    """A delegation's time limit: the tighter of its own and the time its lead has left.

    Args:
        own: ``DelegationLimits.max_seconds``.
        left: The seconds the lead (or batch) has left, ``None`` without a time limit.

    Returns:
        The limit, ``None`` when neither is set.
    """
    if own is None:
        return left
    if left is None:
        return own
    return min(own, left)


def out_of_time(limits: UsageLimits) -> StopReason | None:
    """``time_limit`` when ``limits`` leave a run no time at all (as in-process, a
    delegation granted none is settled ``not_started`` before anything starts)."""
    if limits.max_seconds is not None and limits.max_seconds <= 0:
        return StopReason.TIME_LIMIT
    return None


def raise_on_exceed(result: AgentResult) -> AgentResult:
    """Raise what an in-process run raises when it stops at a limit with
    ``on_exceed="error"``; otherwise return ``result``.

    A durable run (a lead's ``LeadOutput.result``, a batch's ``ParallelOutput.run``)
    always returns its output, recording the limits it ran under; call this on the
    result to get the in-process behaviour.

    Args:
        result: A finished run's result.

    Returns:
        ``result`` when its limits say ``on_exceed="stop"`` or it did not stop at a limit.

    Raises:
        RequestLimitExceeded: It stopped at its request limit.
        BudgetExceeded: It stopped at another limit (tool calls, tokens, cost, time).
    """
    if result.limits.on_exceed == "error":
        raise_for_limit(result)
    return result
