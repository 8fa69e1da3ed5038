"""The typed states of the runtime: why a run stopped and where a delegation stands.

Both are :class:`enum.StrEnum`, so every member *is* its string value: results, records
and events encode to the same JSON as plain strings, and ``reason == "complete"`` holds.
A leaf module: everything else in the runtime may import it, it imports nothing of them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["STOP_REASONS", "DelegationStatus", "StopReason", "delegation_status"]


class StopReason(StrEnum):
    """Why a run, a delegation or a ``parallel_delegate`` batch ended.

    The first eleven end an agent's own run; so does ``time_limit`` (its ``max_seconds``
    ran out). ``setup_error`` and ``not_started`` end a delegation that never ran its
    subagent (building it failed; it was queued and did not start). ``lease_lost`` ends a
    delegation whose exclusive lease could not be kept; ``delegation_limit`` one refused
    because its agent's ``max_delegations`` for the lead's run were spent.
    ``delegation_error`` and ``delegation_stopped`` end a ``parallel_delegate`` batch in
    which a responder failed or did not complete. ``invalid_output`` ends a run whose
    final answer never matched its output schema, retries included. ``context_window``
    ends a run whose next request would not fit its model's context window, even after
    compaction (a request over the window is never sent).
    """

    COMPLETE = "complete"
    REQUEST_LIMIT = "request_limit"
    TOOL_CALL_LIMIT = "tool_call_limit"
    INPUT_TOKEN_LIMIT = "input_token_limit"
    OUTPUT_TOKEN_LIMIT = "output_token_limit"
    TOTAL_TOKEN_LIMIT = "total_token_limit"
    COST_LIMIT = "cost_limit"
    HOOK_REQUESTED_STOP = "hook_requested_stop"
    INTERRUPTED = "interrupted"
    PROVIDER_ERROR = "provider_error"
    ERROR = "error"
    SETUP_ERROR = "setup_error"
    NOT_STARTED = "not_started"
    LEASE_LOST = "lease_lost"
    DELEGATION_ERROR = "delegation_error"
    DELEGATION_STOPPED = "delegation_stopped"
    TIME_LIMIT = "time_limit"
    DELEGATION_LIMIT = "delegation_limit"
    INVALID_OUTPUT = "invalid_output"
    CONTEXT_WINDOW = "context_window"


#: Every stop reason the runtime produces, as plain strings, in declaration order.
STOP_REASONS: tuple[str, ...] = tuple(reason.value for reason in StopReason)


class DelegationStatus(StrEnum):
    """Where one delegation stands (``SubagentRecord.status``).

    ``queued`` and ``running`` while it is live; once settled, the status follows from
    its stop reason (:func:`delegation_status`).
    """

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"
    NOT_STARTED = "not_started"


_FAILED = frozenset(
    {
        StopReason.ERROR,
        StopReason.PROVIDER_ERROR,
        StopReason.SETUP_ERROR,
        StopReason.INVALID_OUTPUT,
    }
)
_NEVER_STARTED = frozenset({StopReason.NOT_STARTED, StopReason.DELEGATION_LIMIT})


def delegation_status(reason: str) -> DelegationStatus:
    """The settled status that a stop reason means.

    Args:
        reason: A stop reason (a :class:`StopReason` or its string value).

    Returns:
        ``completed`` for ``complete``; ``failed`` for ``error``, ``provider_error``,
        ``setup_error`` and ``invalid_output``; ``not_started`` for ``not_started`` and
        ``delegation_limit``; ``stopped`` for every other reason (a limit, an interrupt, a
        hook, a lost lease).
    """
    if reason == StopReason.COMPLETE:
        return DelegationStatus.COMPLETED
    if reason in _FAILED:
        return DelegationStatus.FAILED
    if reason in _NEVER_STARTED:
        return DelegationStatus.NOT_STARTED
    return DelegationStatus.STOPPED
