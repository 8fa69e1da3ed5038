"""Run state and results: what one agent run carries and what it returns.

Kept apart from the loop in ``_agent`` so the loop reads top to bottom.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from ..chat._toolloop import user_turn_after
from ..chat._types import ContentText, ContentToolResult, StreamDelta, Turn
from ..errors import BudgetExceeded, RequestLimitExceeded
from ._events import EventSink, StopEvent, TextDelta, UsageEvent
from ._hooks import HookEvent
from ._usage import AgentUsage, Meter, UsageLimits

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = [
    "AgentResult",
    "Governance",
    "RunState",
    "ToolRejection",
    "finish_run",
    "raise_for_limit",
]

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


#: The turn results of a run before its first tool turn, and after each new reply:
#: shared, so it must never be mutated (a tool turn always starts a fresh list).
NO_RESULTS: list[ContentToolResult | None] = []


class RunState:
    """Mutable state of one run, owned by the run's task."""

    __slots__ = (
        "cost_warned",
        "emit",
        "hook_errors",
        "ids",
        "limits",
        "meter",
        "requests",
        "run_id",
        "stop_reason",
        "turn_results",
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
        self.cost_warned = False  # the "no cost reported" warning was given
        # The current turn's tool results in request order: None until a call runs,
        # RUNNING while it runs, then its result. Read only if the run ends before the
        # turn is answered. Shared empty list until the first tool turn (never mutated).
        self.turn_results: list[ContentToolResult | None] = NO_RESULTS
        self.ids: dict[str, Any] | None = None  # event id fields, built on first use
        # Set by a tool call (hook stop, tool-call limit, permission interrupt); the loop
        # stops after the current turn's tool calls are answered.
        self.stop_reason: str | None = None

    def text_delta(self, delta: StreamDelta) -> None:
        """Emit a streamed piece of text (the delta sink of a streaming request)."""
        if delta.text and self.emit is not None and self.ids is not None:
            self.emit(TextDelta(**self.ids, text=delta.text))


class ProviderFailure(Exception):
    """Internal: the provider failed; the run ends with stop reason provider_error."""


def is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, anyio.get_cancelled_exc_class()) or (
        isinstance(exc, BaseExceptionGroup) and all(is_cancellation(e) for e in exc.exceptions)
    )


_NOT_RUN = "The run stopped before this tool call ran."
_CUT_OFF = (
    "The run was cancelled while this tool call was running; it may have had effects, "
    "but its result is unknown."
)
#: The marker of a call that passed its gate and is running.
RUNNING = ContentToolResult("", error=_CUT_OFF)


def answer_open_calls(turns: list[Turn], results: list[ContentToolResult | None]) -> None:
    """Answer the last turn's tool requests if the run ended before they all finished.

    A call that finished keeps its real result (its effects happened: the model must not
    be told otherwise and run it again); one cut off while running, or never started,
    gets an error result saying so. ``results`` is :attr:`RunState.turn_results`.
    """
    if not turns or turns[-1].role != "assistant":
        return
    open_calls = turns[-1].tool_requests
    if open_calls:
        answers = []
        for i, c in enumerate(open_calls):
            result = results[i] if i < len(results) else None
            if result is None:
                answers.append(ContentToolResult(c.id, error=_NOT_RUN))
            elif result is RUNNING:
                answers.append(ContentToolResult(c.id, error=_CUT_OFF))
            else:
                answers.append(result)
        turns.append(Turn("user", tuple(answers)))


def add_task(turns: list[Turn], task: str) -> None:
    """Append ``task`` as the user turn that starts a run, keeping the history valid.

    Tool requests left unanswered (a history the host set) get error results, and a
    trailing user turn (a run that ended before the model answered, or results of a
    cut-off turn) is merged with the task, as ``Chat`` does: two user turns in a row are
    rejected by servers whose chat templates require alternating roles.
    """
    if not turns:  # every subagent's run: nothing to repair or merge
        turns.append(Turn("user", (ContentText(task),)))
        return
    base, first = user_turn_after(turns, (ContentText(task),))
    turns[:] = [*base, first]


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


# -- settling a run --------------------------------------------------------------------


def finish_run(agent: Agent, run: RunState, error: BaseException | None) -> AgentResult:
    """Close open tool calls, store turns, emit usage and stop; never awaits."""
    answer_open_calls(run.turns, run.turn_results)
    agent.chat.set_turns(run.turns)
    message: str | None = None
    if isinstance(error, ProviderFailure):
        message = str(error)
    elif error is not None:
        run.stop_reason = "interrupted" if is_cancellation(error) else "error"
        message = None if is_cancellation(error) else f"{type(error).__name__}: {error}"
    reason = run.stop_reason or "error"
    usage = run.meter.snapshot()
    if run.emit is not None:
        ids = agent._ids(run)
        run.emit(UsageEvent(**ids, usage=usage, limits=run.limits))
        run.emit(StopEvent(**ids, stop_reason=reason, usage=usage, error=message))
    gov = agent.governance
    return AgentResult(
        response=last_text(run.turns),
        turns=tuple(run.turns),
        usage=usage,
        stop_reason=reason,
        agent_id=agent.agent_id,
        run_id=run.run_id,
        agent_name=agent.name,
        delegation_id=gov.delegation_id if gov else None,
        parent_agent_id=gov.parent_agent_id if gov else None,
        parent_run_id=gov.parent_run_id if gov else None,
        limits=run.limits,
        error=message,
        hook_errors=tuple(run.hook_errors),
    )


def raise_for_limit(result: AgentResult) -> None:
    """Raise the typed error for a run that stopped at a limit (``on_exceed='error'``)."""
    reason = result.stop_reason
    if reason == "request_limit":
        raise RequestLimitExceeded(
            "Run stopped: request limit reached", stop_reason=reason, result=result
        )
    if reason.endswith("_limit"):
        raise BudgetExceeded(
            f"Run stopped: {reason.replace('_', ' ')} reached",
            stop_reason=reason,
            result=result,
        )
