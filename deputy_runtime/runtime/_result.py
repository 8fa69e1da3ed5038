"""What a run returns (:class:`AgentResult`) and the errors a run turns into results.

A leaf of the run side: the loop, the gate, the delegation code and ``parallel_delegate``
all build or read results, so the value type lives below all of them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..chat import Turn
from ..errors import BudgetExceeded, ContextWindowExceeded, RequestLimitExceeded
from ._states import StopReason
from ._usage import AgentUsage, UsageLimits

__all__ = ["AgentResult", "ProviderFailure", "ToolRejection", "raise_for_limit"]


class AgentResult(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The outcome of one run.

    Attributes:
        response: The model's last text.
        turns: The conversation after the run.
        usage: What this run used (including settled delegations for a lead).
        stop_reason: Why the run ended.
        agent_id: The agent that ran.
        run_id: This run's id.
        agent_name: The agent's name, if it has one.
        delegation_id: Set when the run was a delegation, with the parent ids.
        parent_agent_id: The lead's agent id, for a delegation.
        parent_run_id: The lead's run id, for a delegation.
        limits: The limits the run ran under.
        error: The message when the run failed.
        hook_errors: The ``"EVENT: message"`` lines of hooks that raised.
        output: The decoded final answer of an agent with an output schema (an instance
            of a type schema, else the JSON value); ``None`` unless the run completed.
    """

    response: str
    turns: tuple[Turn, ...]
    usage: AgentUsage
    stop_reason: StopReason
    agent_id: str
    run_id: str
    agent_name: str | None = None
    delegation_id: str | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    limits: UsageLimits = UsageLimits()
    error: str | None = None
    hook_errors: tuple[str, ...] = ()
    output: Any = None


class ToolRejection(Exception):
    """A tool call refused with a message the model sees exactly as written."""


class ProviderFailure(Exception):
    """The provider failed; the run ends with the stop reason ``provider_error``."""


def raise_for_limit(result: AgentResult) -> None:
    """Raise the typed error for a run that stopped at a limit (``on_exceed='error'``).

    Args:
        result: A finished run's result; nothing happens unless it stopped at a limit.

    Raises:
        RequestLimitExceeded: The run reached its request limit.
        BudgetExceeded: The run reached any other limit (tool calls, tokens, cost).
        ContextWindowExceeded: The run's next request would not fit its context window.
    """
    reason = result.stop_reason
    if reason == StopReason.CONTEXT_WINDOW:
        raise ContextWindowExceeded(
            f"Run stopped: {result.error or 'the context window is full'}",
            stop_reason=reason,
            result=result,
        )
    if reason == StopReason.REQUEST_LIMIT:
        raise RequestLimitExceeded(
            "Run stopped: request limit reached", stop_reason=reason, result=result
        )
    if reason.endswith("_limit"):
        raise BudgetExceeded(
            f"Run stopped: {reason.replace('_', ' ')} reached",
            stop_reason=reason,
            result=result,
        )
