"""Continue-as-new for the lead: the loop's state carried from one run of the chain to
the next.

A lead's history grows with every model request (each carries the whole conversation),
so at a turn boundary (every tool call and delegation of the turn settled, before the
next request; never with a child running) the lead continues as new when Temporal
suggests it or when its history passes ``LeadInput.continue_as_new_after`` events. The
next run of the chain gets the same ``LeadInput`` and a :class:`LeadCheckpoint`: the
conversation, the request count, the budget counters, the current permissions, a
pending interrupt, the settled delegations' records and results, and the tail of the
event log.

The event log is the one thing not carried whole: a run's input must stay under
Temporal's 2 MB payload limit, and the conversation and the delegations' results already
take their share. The checkpoint keeps the newest events that fit in
:data:`EVENTS_CARRIED_BYTES` (encoded) and the number of events before them,
``events_base``; offsets of the ``events`` query count from the start of the chain, so a
follower polling every fraction of a second never notices, and a query for an offset
below ``events_base`` fails naming both.
"""

from __future__ import annotations

from temporalio import workflow

from ..chat import Turn
from ..runtime import AgentResult, Event, SubagentRecord, decode_event, encode_event
from ._loop import AgentLoop
from ._values import LeadCheckpoint

__all__ = ["EVENTS_CARRIED_BYTES", "LeadCheckpoint", "continue_due", "lead_checkpoint", "resume"]

#: Encoded bytes of the event log's tail a continue-as-new carries into the next run.
EVENTS_CARRIED_BYTES = 256 * 1024


def continue_due(threshold: int, loop: AgentLoop) -> bool:
    """Whether the lead should continue as new at this boundary.

    Not when an interrupt is pending: the run stops at its next step anyway.

    Args:
        threshold: ``LeadInput.continue_as_new_after`` (history events).
        loop: The lead's loop.

    Returns:
        ``True`` when Temporal suggests it or the history has reached ``threshold``.
    """
    if loop.interrupt_reason is not None:
        return False
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() >= threshold


def lead_checkpoint(
    loop: AgentLoop,
    turns: list[Turn],
    requests: int,
    *,
    subagents: tuple[SubagentRecord, ...],
    subagent_results: tuple[AgentResult | None, ...],
    events: list[Event],
    events_base: int,
    runs: int,
) -> LeadCheckpoint:
    """The checkpoint of ``loop`` at a turn boundary.

    Args:
        loop: The lead's loop (ids, budget, permissions, interrupt).
        turns: The conversation so far.
        requests: The requests the loop has sent.
        subagents: Every settled delegation's record, in admission order.
        subagent_results: Their results, in the same order.
        events: The event log this run holds.
        events_base: How many events of the chain come before ``events``.
        runs: How many runs the chain has had, this one included.

    Returns:
        The checkpoint to pass to ``workflow.continue_as_new``.
    """
    encoded = [encode_event(e).decode() for e in events]
    keep, size = len(encoded), 0
    while keep > 0 and size + len(encoded[keep - 1]) <= EVENTS_CARRIED_BYTES:
        keep -= 1
        size += len(encoded[keep])
    budget = loop.budget
    return LeadCheckpoint(
        agent_id=loop.ids.agent_id,
        run_id=loop.ids.run_id,
        turns=tuple(turns),
        requests=requests,
        used=dict(budget.used),
        cost_reported=budget.cost_reported,
        permissions=loop.permissions,
        interrupt=loop.interrupt_reason,
        subagents=subagents,
        subagent_results=subagent_results,
        events=tuple(encoded[keep:]),
        events_base=events_base + keep,
        runs=runs,
    )


def resume(checkpoint: LeadCheckpoint, loop: AgentLoop, events: list[Event]) -> list[Turn]:
    """Put a checkpoint's state back into a new run's loop and event log.

    Args:
        checkpoint: The previous run's checkpoint.
        loop: The new run's loop, built with the checkpoint's ids.
        events: The new run's (empty) event log; the carried tail is appended.

    Returns:
        The conversation to resume the loop with.
    """
    loop.budget.used.update(checkpoint.used)
    loop.budget.cost_reported = checkpoint.cost_reported
    loop.permissions = checkpoint.permissions
    if checkpoint.interrupt is not None:
        loop.interrupt(checkpoint.interrupt)
    events.extend(decode_event(e) for e in checkpoint.events)
    return list(checkpoint.turns)
