"""Run state and results: what one agent run carries and what it returns.

Kept apart from the loop in ``_agent`` so the loop reads top to bottom.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from ..chat._types import ContentToolResult, Turn
from ._events import EventSink
from ._hooks import HookEvent
from ._usage import AgentUsage, Meter, UsageLimits

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["AgentResult", "Governance", "RunState", "ToolRejection"]

_PREVIEW_CHARS = 200


class AgentResult(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The outcome of one run.

    ``response`` is the model's last text; ``turns`` the conversation after the run;
    ``usage`` what this run used (including settled delegations for a lead);
    ``stop_reason`` one of the typed stop reasons; ``error`` the message when the run
    failed; ``hook_errors`` the ``"EVENT: message"`` lines of hooks that raised.
    """

    response: str
    turns: tuple[Turn, ...]
    usage: AgentUsage
    stop_reason: str
    agent_id: str
    run_id: str
    agent_name: str | None = None
    delegation_id: str | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    limits: UsageLimits = UsageLimits()
    error: str | None = None
    hook_errors: tuple[str, ...] = ()


class ToolRejection(Exception):
    """A tool call refused with a message the model sees exactly as written."""


class Governance:
    """What binds a subagent to its lead: ids, and the lead itself.

    The lead's ``permissions`` and ``hooks`` are read from it at every tool call, so
    narrowing the lead narrows its running subagents and hooks added later apply.
    ``forwarded`` are the hook events the lead's hooks run for; ``hook_errors`` collects
    errors of those forwarded hooks.
    """

    __slots__ = (
        "delegation_id",
        "forwarded",
        "hook_errors",
        "lead",
        "parent_agent_id",
        "parent_run_id",
    )

    def __init__(
        self,
        *,
        delegation_id: str,
        parent_run_id: str | None,
        lead: Agent,
        forwarded: frozenset[HookEvent],
    ) -> None:
        self.delegation_id = delegation_id
        self.parent_agent_id = lead.agent_id
        self.parent_run_id = parent_run_id
        self.lead = lead
        self.forwarded = forwarded
        self.hook_errors: list[str] = []


class RunState:
    """Mutable state of one run, owned by the run's task."""

    __slots__ = (
        "emit",
        "hook_errors",
        "ids",
        "limits",
        "meter",
        "requests",
        "run_id",
        "stop_reason",
        "turns",
    )

    def __init__(self, run_id: str, limits: UsageLimits, emit: EventSink | None) -> None:
        self.run_id = run_id
        self.limits = limits
        self.meter = Meter(limits)
        self.emit = emit
        self.turns: list[Turn] = []
        self.hook_errors: list[str] = []
        self.requests = 0
        self.ids: dict[str, Any] | None = None  # event id fields, built on first use
        # Set by a tool call (hook stop, tool-call limit, permission interrupt); the loop
        # stops after the current turn's tool calls are answered.
        self.stop_reason: str | None = None


class ProviderFailure(Exception):
    """Internal: the provider failed; the run ends with stop reason provider_error."""


def is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, anyio.get_cancelled_exc_class()) or (
        isinstance(exc, BaseExceptionGroup) and all(is_cancellation(e) for e in exc.exceptions)
    )


def answer_open_calls(turns: list[Turn]) -> None:
    """Give every unanswered tool request an error result so the history stays valid."""
    if not turns or turns[-1].role != "assistant":
        return
    open_calls = turns[-1].tool_requests
    if open_calls:
        turns.append(
            Turn(
                "user",
                tuple(
                    ContentToolResult(c.id, error="The run stopped before this tool call ran.")
                    for c in open_calls
                ),
            )
        )


def last_text(turns: list[Turn]) -> str:
    for turn in reversed(turns):
        if turn.role == "assistant":
            text = turn.text
            if text:
                return text
    return ""


def preview(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "…"
