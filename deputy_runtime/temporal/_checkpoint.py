"""Continue-as-new: an agent loop's state carried from one run of a chain to the next.

A workflow's history grows with every model request (each carries the whole
conversation), so at a turn boundary (every tool call and delegation of the turn
settled, before the next request; never with a child running) the lead, and each
delegation's child workflow, continues as new when Temporal suggests it or when its
history has reached ``continue_as_new_after`` events (the lead's input sets it; its
children get the same). The next run gets the same input carrying a
``LoopCheckpoint``: the conversation, the request count, the budget counters, the
permissions (a child's lead permissions as last signalled too), the settled
delegations' records and results, and the event log.

A run's input must stay under Temporal's 2 MB payload limit. A child carries its whole
log: its output carries it anyway, and its lead copies it in full. A lead carries the
newest events that fit in :data:`EVENTS_CARRIED_BYTES` (encoded) and ``events_base``,
the number of events before them; offsets of the ``events`` query count from the start
of the chain, so a follower polling every fraction of a second never notices, and a query
for an offset below ``events_base`` fails naming both. What cannot be trimmed is the
conversation and the delegations' results: a run whose conversation alone passes the
limit fails to continue as new.
"""

from __future__ import annotations

import msgspec
from temporalio import workflow

from ..chat import Turn
from ..runtime import AgentResult, Event, SubagentRecord, decode_event, encode_event
from ._loop import AgentLoop
from ._values import LeadInput, LoopCheckpoint, SubagentInput

__all__ = [
    "EVENTS_CARRIED_BYTES",
    "checkpoint_of",
    "continue_as_new_if_due",
    "continue_due",
    "resume",
]

#: Encoded bytes of a lead's event log a continue-as-new carries into the next run.
EVENTS_CARRIED_BYTES = 256 * 1024


def continue_due(threshold: int, loop: AgentLoop) -> bool:
    """Whether the workflow should continue as new at this boundary.

    Not when an interrupt is pending: the run stops at its next step anyway.

    Args:
        threshold: ``continue_as_new_after`` of the run's input (history events).
        loop: The run's loop.

    Returns:
        ``True`` when Temporal suggests it or the history has reached ``threshold``.
    """
    if loop.interrupt_reason is not None:
        return False
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() >= threshold


def checkpoint_of(
    loop: AgentLoop,
    turns: list[Turn],
    requests: int,
    *,
    events: list[Event],
    previous: LoopCheckpoint | None,
    subagents: tuple[SubagentRecord, ...] = (),
    subagent_results: tuple[AgentResult | None, ...] = (),
    keep_bytes: int | None = None,
) -> LoopCheckpoint:
    """The checkpoint of ``loop`` at a turn boundary.

    Args:
        loop: The run's loop (ids, budget, permissions, interrupt).
        turns: The conversation so far.
        requests: The requests the loop has sent.
        events: The event log this run holds.
        previous: The checkpoint this run started from, if any.
        subagents: Every settled delegation's record, in admission order (a lead's).
        subagent_results: Their results, in the same order.
        keep_bytes: Carry only the newest events fitting in this many encoded bytes
            (``None``: the whole log).

    Returns:
        The checkpoint to carry into the next run.
    """
    encoded = [encode_event(e).decode() for e in events]
    keep = 0
    if keep_bytes is not None:
        keep, size = len(encoded), 0
        while keep > 0 and size + len(encoded[keep - 1]) <= keep_bytes:
            keep -= 1
            size += len(encoded[keep])
    meter = loop.meter  # no reservation is live at a boundary: the counters are all
    return LoopCheckpoint(
        agent_id=loop.ids.agent_id,
        run_id=loop.ids.run_id,
        turns=tuple(turns),
        requests=requests,
        used=meter.counters(),
        cost_reported=meter.cost_reported,
        permissions=loop.permissions,
        lead_permissions=loop.lead_permissions,
        interrupt=loop.interrupt_reason,
        subagents=subagents,
        subagent_results=subagent_results,
        events=tuple(encoded[keep:]),
        events_base=(previous.events_base if previous else 0) + keep,
        runs=(previous.runs if previous else 1) + 1,
        hook_errors=tuple(loop.hook_errors),
        deadline=loop.deadline.at,
        cost_warned=loop.cost_warned,
        output_rejected=loop.output_rejected,
    )


def resume(checkpoint: LoopCheckpoint, loop: AgentLoop, events: list[Event]) -> list[Turn]:
    """Put a checkpoint's state back into a new run's loop and event log.

    Args:
        checkpoint: The previous run's checkpoint.
        loop: The new run's loop, built with the checkpoint's ids.
        events: The new run's (empty) event log; the carried events are appended.

    Returns:
        The conversation to resume the loop with.
    """
    loop.meter.restore(checkpoint.used, checkpoint.cost_reported)
    loop.permissions = checkpoint.permissions
    if checkpoint.lead_permissions is not None:
        loop.lead_permissions = checkpoint.lead_permissions
    if checkpoint.interrupt is not None:
        loop.interrupt(checkpoint.interrupt)
    events.extend(decode_event(e) for e in checkpoint.events)
    loop.hook_errors.extend(checkpoint.hook_errors)
    loop.deadline.at = checkpoint.deadline
    loop.cost_warned = checkpoint.cost_warned
    loop.output_rejected = checkpoint.output_rejected
    return list(checkpoint.turns)


async def continue_as_new_if_due(
    request: LeadInput | SubagentInput,
    loop: AgentLoop,
    turns: list[Turn],
    requests: int,
    *,
    events: list[Event],
    previous: LoopCheckpoint | None,
    subagents: tuple[SubagentRecord, ...] = (),
    subagent_results: tuple[AgentResult | None, ...] = (),
    keep_bytes: int | None = None,
) -> None:
    """At a turn boundary: continue as new with the loop's checkpoint when it is due.

    Signal and update handlers still running finish first, so nothing they do is lost;
    then ``workflow.continue_as_new`` ends this run (it raises) with ``request``
    carrying the checkpoint. Arguments as for :func:`checkpoint_of`.

    Args:
        request: The run's input (its ``continue_as_new_after`` is the threshold).
        loop: The run's loop.
        turns: The conversation so far.
        requests: The requests the loop has sent.
        events: The event log this run holds.
        previous: The checkpoint this run started from, if any.
        subagents: A lead's settled delegations' records.
        subagent_results: Their results.
        keep_bytes: See :func:`checkpoint_of`.
    """
    if not continue_due(request.continue_as_new_after, loop):
        return
    await workflow.wait_condition(workflow.all_handlers_finished)
    checkpoint = checkpoint_of(
        loop,
        turns,
        requests,
        events=events,
        previous=previous,
        subagents=subagents,
        subagent_results=subagent_results,
        keep_bytes=keep_bytes,
    )
    # A delegation's limits may have been topped up by its lead: the next run starts
    # from the limits this one reached, not the ones first granted.
    workflow.continue_as_new(
        msgspec.structs.replace(request, checkpoint=checkpoint, limits=loop.meter.limits)
    )
