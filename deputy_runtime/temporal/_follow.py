"""Following a lead run from a client: its events, the delegations' live, as they happen.

The lead's ``events`` query returns its own log, into which a delegation's events are
copied when the delegation settles. :func:`follow_run` polls that log and, for every
delegation started (a ``DelegationStart`` in the log) and not yet ended, the ``events``
query of its child workflow (``<lead workflow id>/<delegation id>``), so a delegation's
events are yielded while it runs. When they later arrive in the lead's log, the ones
already yielded are skipped (counted per delegation: the copy is the child's log in
order), so every event is yielded once, each agent's in its own order. A child that
settled between two polls loses nothing: the rest of its events are read from the lead's
log.

Every query goes to the workflow id without a run id, so the follower moves on to the
next run when the lead continues as new (the ``events`` offsets count from the start of
the chain).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from ..runtime import DelegationEnd, DelegationStart, Event, decode_event
from ._workflows import EVENTS_QUERY

__all__ = ["DEFAULT_POLL_SECONDS", "follow_run"]

#: Seconds between two polls of the run's event logs.
DEFAULT_POLL_SECONDS = 0.25
#: Seconds the lead's query may keep failing with a server-side error that can pass (no
#: worker polling for a moment, a busy server) before the follower gives up.
QUERY_PATIENCE_SECONDS = 60.0


def _transient(exc: Exception) -> bool:
    """An RPC error that can pass; not a query the workflow refused (a bad offset) nor a
    workflow the server does not know."""
    if not isinstance(exc, RPCError):
        return False
    return exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)


async def follow_run(
    client: Client,
    workflow_id: str,
    *,
    poll_interval: float = DEFAULT_POLL_SECONDS,
    offset: int = 0,
) -> AsyncIterator[Event]:
    """Yield a lead run's events as they happen, its running delegations' included.

    Each event is yielded exactly once, each agent's in order. The iteration ends after
    the lead's ``StopEvent`` once the workflow has closed (the last run of a
    continue-as-new chain).

    Args:
        client: A client built with :data:`data_converter`.
        workflow_id: The lead workflow's id (no run id: the chain is followed).
        poll_interval: Seconds between two polls.
        offset: Events of the lead's log already seen (from the start of the chain); a
            delegation started before it is followed from its next settled event on.

    Returns:
        An async iterator of the run's events, decoded.

    Raises:
        ValueError: ``poll_interval`` is not a positive number or ``offset`` is negative.
        temporalio.client.WorkflowFailureError: The run failed, was cancelled (cause
            ``temporalio.exceptions.CancelledError``), terminated or timed out; raised
            after every event that could still be read was yielded.
        temporalio.client.WorkflowQueryFailedError: The lead refused the query (an
            offset before the events its current run keeps).
        temporalio.service.RPCError: The server does not know ``workflow_id``, or the
            lead's query kept failing for :data:`QUERY_PATIENCE_SECONDS`.
    """
    if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)):
        raise ValueError(f"poll_interval must be a number of seconds, got {poll_interval!r}")
    if not poll_interval > 0:
        raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a whole number >= 0, got {offset!r}")
    lead = client.get_workflow_handle(workflow_id)
    result: asyncio.Task[Any] = asyncio.ensure_future(lead.result())
    live: dict[str, int] = {}  # running delegation id -> its events yielded so far
    copied: dict[str, int] = {}  # delegation id -> its events seen in the lead's log
    loop = asyncio.get_running_loop()
    patience = loop.time() + QUERY_PATIENCE_SECONDS
    try:
        while True:
            closed = result.done()
            try:
                texts: list[str] = await lead.query(EVENTS_QUERY, offset)
            except (WorkflowQueryFailedError, RPCError) as exc:
                if closed and result.exception() is not None:
                    break  # the run's own failure says more than a query of its remains
                if closed or not _transient(exc) or loop.time() > patience:
                    raise
                await asyncio.wait({result}, timeout=poll_interval)
                continue  # read again at the next poll
            patience = loop.time() + QUERY_PATIENCE_SECONDS
            for text in texts:
                offset += 1
                event = decode_event(text)
                delegation = event.delegation_id
                if isinstance(event, DelegationStart) and delegation is not None:
                    live.setdefault(delegation, 0)
                elif isinstance(event, DelegationEnd) and delegation is not None:
                    live.pop(delegation, None)
                elif delegation is not None:  # a settled child's event, copied in order
                    index = copied.get(delegation, 0)
                    copied[delegation] = index + 1
                    if index < live.get(delegation, 0):
                        continue  # already yielded while the child ran
                    if delegation in live:
                        live[delegation] += 1
                yield event
            for delegation in tuple(live):
                for event in await _child_events(client, workflow_id, delegation, live):
                    yield event
            if closed:
                break
            await asyncio.wait({result}, timeout=poll_interval)
        result.result()  # a failed, cancelled or terminated run raises here
    finally:
        if not result.done():
            result.cancel()


async def _child_events(
    client: Client, workflow_id: str, delegation: str, live: dict[str, int]
) -> list[Event]:
    """The running child's events not yielded yet; none when it cannot be queried now
    (not started on the server yet, or no worker answers): its log is read again at the
    next poll, or from the lead's log once it settles."""
    handle = client.get_workflow_handle(f"{workflow_id}/{delegation}")
    try:
        texts = await handle.query(EVENTS_QUERY, live[delegation])
    except (WorkflowQueryFailedError, RPCError):
        return []
    live[delegation] += len(texts)
    return [decode_event(t) for t in texts]
