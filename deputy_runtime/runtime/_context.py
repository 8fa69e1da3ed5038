"""The run context: everything one agent run needs, handed to the loop and the gate.

An agent builds one :class:`RunContext` per run. The loop (``_agent``), the tool-call
gate (``_gate``) and settlement (:func:`finish_run`) read and change the run only through
it: its meter, event sink, ids, turns and stop reason, and (through the
:class:`RunOwner` it was built for) the agent's live tools, permissions and hooks. The
owner's settings are read live, not copied, so narrowing an agent's permission mode or
interrupting it takes effect at the running call's next boundary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio

from ..chat import (
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    StreamDelta,
    Turn,
    user_turn_after,
)
from ..tools import Tool
from ._events import EventSink, StopEvent, TextDelta, UsageEvent, WarningEvent
from ._hooks import HookDecision, HookEvent, HookInput, Hooks
from ._ownspend import RunSpend
from ._permissions import Permissions
from ._result import AgentResult, ProviderFailure
from ._states import StopReason
from ._texts import CUT_OFF_TEXT, NOT_RUN_TEXT
from ._usage import Meter, UsageLimits

__all__ = [
    "RUNNING",
    "Governance",
    "RunContext",
    "RunOwner",
    "add_task",
    "finish_run",
    "hook_input",
    "hook_warning",
    "preview",
]

_PREVIEW_CHARS = 200


class RunOwner(Protocol):
    """What a run reads from the agent that runs it (``Agent`` implements it)."""

    agent_id: str
    name: str | None
    working_dir: Path
    hooks: Hooks
    chat: Chat
    governance: Governance | None

    @property
    def permissions(self) -> Permissions:
        """The agent's current permissions (they may narrow during a run)."""

    @property
    def interrupt_reason(self) -> str | None:
        """The reason of a pending interrupt of the active run, or ``None``."""

    def tool(self, name: str) -> Tool | None:
        """The agent's tool called ``name``, or ``None``."""

    def tool_names(self) -> tuple[str, ...]:
        """The names of the agent's tools, in order."""


class Governance:
    """What binds a subagent to its lead: ids, and the lead itself.

    The lead's ``permissions`` and ``hooks`` are read from it at every tool call, so
    narrowing the lead narrows its running subagents and hooks added later apply.
    ``forwarded`` are the hook events the lead's hooks run for; ``hook_errors`` collects
    errors of those forwarded hooks. ``human_input`` asks the person behind the lead
    (its policy's ``human_input``, bound to the delegation's context), ``None`` without
    one.
    """

    __slots__ = (
        "delegation_id",
        "forwarded",
        "hook_errors",
        "human_input",
        "lead",
        "parent_agent_id",
        "parent_run_id",
    )

    def __init__(
        self,
        *,
        delegation_id: str,
        parent_run_id: str | None,
        lead: RunOwner,
        forwarded: frozenset[HookEvent],
        human_input: Callable[[list[dict[str, Any]]], Any] | None = None,
    ) -> None:
        self.delegation_id = delegation_id
        self.human_input = human_input
        self.parent_agent_id = lead.agent_id
        self.parent_run_id = parent_run_id
        self.lead = lead
        self.forwarded = forwarded
        self.hook_errors: list[str] = []


def hook_input(
    owner: RunOwner,
    event: HookEvent,
    run_id: str | None,
    *,
    call: ContentToolRequest | None = None,
    call_id: str | None = None,
    **fields: Any,
) -> HookInput:
    """The input of one hook event of ``owner`` (``run_id`` is ``None`` outside a run)."""
    gov = owner.governance
    return HookInput(
        event=event,
        agent_id=owner.agent_id,
        agent_name=owner.name,
        run_id=run_id,
        working_dir=str(owner.working_dir),
        delegation_id=gov.delegation_id if gov else None,
        parent_agent_id=gov.parent_agent_id if gov else None,
        parent_run_id=gov.parent_run_id if gov else None,
        tool_call_id=call_id,
        tool_name=call.name if call is not None else None,
        tool_input=call.arguments if call is not None else None,
        permission_mode=owner.permissions.mode,
        **fields,
    )


def hook_warning(error: str) -> str:
    """The text of the warning event announcing a hook error (``"EVENT: message"``)."""
    return f"hook failed: {error}"


def wants(owner: RunOwner, event: HookEvent) -> bool:
    """Whether any hook (the owner's own or its lead's forwarded ones) listens to ``event``."""
    gov = owner.governance
    return owner.hooks.has(event) or (
        gov is not None and event in gov.forwarded and gov.lead.hooks.has(event)
    )


#: A call that passed its gate and is running: if the run ends now, its result is unknown.
RUNNING = ContentToolResult("", error=CUT_OFF_TEXT)


class RunContext:
    """Mutable state of one run, owned by the run's task.

    Attributes:
        owner: The agent running (its tools, permissions and hooks are read live).
        run_id: This run's id.
        limits: The limits the run runs under.
        meter: The run's usage counters and delegation reservations.
        emit: The event sink, or ``None`` when nobody listens.
        turns: The conversation as it grows.
        hook_errors: ``"EVENT: message"`` lines of the owner's hooks that raised.
        requests: Model requests sent so far.
        stop_reason: Set when the run must stop (by a tool call, hook or limit); the
            loop stops after the current turn's tool calls are answered.
        deadline: When the run's ``max_seconds`` runs out (``anyio.current_time()``).
        spend: A lead's own requests and tool calls on its shared budget, if it has one.
        output: The decoded final answer, once it matched the owner's output contract.
        output_attempts: Final answers the output contract rejected so far.
        output_error: Why the last one was rejected, once the retries are spent.
        boundary: Awaited at every turn boundary (before each model request, every
            tool call of the previous turn answered): where a lead saves its checkpoint.
        resumed: The run continues a checkpoint: its task is already in ``turns``.
        stop_error: What the stop reason alone does not say (a request too big for the
            context window: its size); the result's error.
    """

    __slots__ = (
        "boundary",
        "cost_warned",
        "deadline",
        "emit",
        "hook_errors",
        "ids",
        "limits",
        "meter",
        "output",
        "output_attempts",
        "output_error",
        "owner",
        "requests",
        "resumed",
        "run_id",
        "sampling",
        "spend",
        "stop_error",
        "stop_reason",
        "turn_results",
        "turns",
    )

    def __init__(
        self, owner: RunOwner, run_id: str, limits: UsageLimits, emit: EventSink | None
    ) -> None:
        self.owner = owner
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
        # turn is answered; empty until the first tool turn.
        self.turn_results: Sequence[ContentToolResult | None] = ()
        self.ids: dict[str, Any] | None = None  # event id fields, built on first use
        self.stop_reason: StopReason | None = None
        # When max_seconds runs out, on the backend's clock (anyio.current_time()).
        self.deadline: float | None = None
        # A lead's own requests and tool calls on its shared budget, when it has one, or
        # a delegation's top-ups on it.
        self.spend: RunSpend | None = None
        self.output: Any = None
        self.output_attempts = 0
        self.output_error: str | None = None
        # Serialises the model requests its tools make (CallerRun.sample), created by the
        # first: each is checked and counted before the next is checked.
        self.sampling: anyio.Lock | None = None
        self.boundary: Callable[[RunContext], Awaitable[None]] | None = None
        self.resumed = False
        self.stop_error: str | None = None

    # -- what the owner offers, read live ------------------------------------------------

    @property
    def permissions(self) -> Permissions:
        """The owner's current permissions."""
        return self.owner.permissions

    def seconds_left(self) -> float | None:
        """The wall-clock seconds this run has left, ``None`` without a time limit."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - anyio.current_time())

    def stop(self, reason: StopReason) -> None:
        """Stop the run after the current turn, keeping an earlier reason if one is set."""
        if self.stop_reason is None:
            self.stop_reason = reason

    # -- events ----------------------------------------------------------------------------

    def event_ids(self) -> dict[str, Any]:
        """The id fields every event of this run carries (built once per run)."""
        ids = self.ids
        if ids is None:
            owner = self.owner
            gov = owner.governance
            ids = {"agent_id": owner.agent_id, "agent_name": owner.name, "run_id": self.run_id}
            if gov is not None:
                ids["delegation_id"] = gov.delegation_id
                ids["parent_agent_id"] = gov.parent_agent_id
                ids["parent_run_id"] = gov.parent_run_id
            self.ids = ids
        return ids

    def text_delta(self, delta: StreamDelta) -> None:
        """Emit a streamed piece of text (the delta sink of a streaming request)."""
        if delta.text and self.emit is not None:
            self.emit(TextDelta(**self.event_ids(), text=delta.text))

    def warn(self, messages: Sequence[str]) -> None:
        """Announce hook failures that did not stop the run (they are also in the result)."""
        if messages and self.emit is not None:
            for message in messages:
                self.emit(WarningEvent(**self.event_ids(), message=hook_warning(message)))

    # -- hooks -----------------------------------------------------------------------------

    def wants(self, event: HookEvent) -> bool:
        """Whether any hook (own or a lead's forwarded one) listens to ``event``."""
        owner = self.owner
        gov = owner.governance
        return owner.hooks.has(event) or (
            gov is not None and event in gov.forwarded and gov.lead.hooks.has(event)
        )

    def hook_input(
        self,
        event: HookEvent,
        *,
        call: ContentToolRequest | None = None,
        call_id: str | None = None,
        **fields: Any,
    ) -> HookInput:
        """The input of one hook event of this run."""
        return hook_input(self.owner, event, self.run_id, call=call, call_id=call_id, **fields)

    async def fire(self, hook_input: HookInput) -> HookDecision | None:
        """Run a subagent's forwarded lead hooks first, then the owner's own hooks.

        The lead's hooks always see a subagent's forwarded events, and a deny or stop
        from them cannot be overridden by the subagent's own hooks.
        """
        lead_decision: HookDecision | None = None
        owner = self.owner
        gov = owner.governance
        if gov is not None and hook_input.event in gov.forwarded:
            seen = len(gov.hook_errors)
            lead_decision = await gov.lead.hooks.dispatch(hook_input, gov.hook_errors)
            self.warn(gov.hook_errors[seen:])
            if lead_decision is not None and lead_decision.decision != "allow":
                return lead_decision
        if owner.hooks.has(hook_input.event):
            seen = len(self.hook_errors)
            own = await owner.hooks.dispatch(hook_input, self.hook_errors)
            self.warn(self.hook_errors[seen:])
            if own is not None:
                return own
        return lead_decision


# -- the conversation ------------------------------------------------------------------


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


def answer_open_calls(turns: list[Turn], results: Sequence[ContentToolResult | None]) -> None:
    """Answer the last turn's tool requests if the run ended before they all finished.

    A call that finished keeps its real result (its effects happened: the model must not
    be told otherwise and run it again); one cut off while running, or never started,
    gets an error result saying so. ``results`` is :attr:`RunContext.turn_results`.
    """
    if not turns or turns[-1].role != "assistant":
        return
    open_calls = turns[-1].tool_requests
    if open_calls:
        answers = []
        for i, c in enumerate(open_calls):
            result = results[i] if i < len(results) else None
            if result is None:
                answers.append(ContentToolResult(c.id, error=NOT_RUN_TEXT))
            elif result is RUNNING:
                answers.append(ContentToolResult(c.id, error=CUT_OFF_TEXT))
            else:
                answers.append(result)
        turns.append(Turn("user", tuple(answers)))


def last_text(turns: Sequence[Turn]) -> str:
    """The text of the last assistant turn that has text, or ``""``."""
    for turn in reversed(turns):
        if turn.role == "assistant":
            text = turn.text
            if text:
                return text
    return ""


def preview(value: Any) -> str:
    """A tool result as at most 200 characters of text, for events."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "…"


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the backend's cancellation (or a group of nothing else)."""
    return isinstance(exc, anyio.get_cancelled_exc_class()) or (
        isinstance(exc, BaseExceptionGroup) and all(is_cancellation(e) for e in exc.exceptions)
    )


# -- settling a run --------------------------------------------------------------------


def finish_run(ctx: RunContext, error: BaseException | None) -> AgentResult:
    """Close open tool calls, store turns, emit usage and stop; never awaits.

    Args:
        ctx: The run that ended.
        error: What ended it, if it did not end normally.

    Returns:
        The run's result.
    """
    owner = ctx.owner
    answer_open_calls(ctx.turns, ctx.turn_results)
    owner.chat.set_turns(ctx.turns)
    message: str | None = None
    if isinstance(error, ProviderFailure):
        message = str(error)
    elif error is not None:
        cancelled = is_cancellation(error)
        ctx.stop_reason = StopReason.INTERRUPTED if cancelled else StopReason.ERROR
        message = None if cancelled else f"{type(error).__name__}: {error}"
    reason = ctx.stop_reason or StopReason.ERROR
    if reason == StopReason.INVALID_OUTPUT and message is None:
        message = ctx.output_error
    if reason == StopReason.CONTEXT_WINDOW and message is None:
        message = ctx.stop_error
    usage = ctx.meter.snapshot()
    if ctx.emit is not None:
        ids = ctx.event_ids()
        ctx.emit(UsageEvent(**ids, usage=usage, limits=ctx.limits))
        ctx.emit(StopEvent(**ids, stop_reason=reason, usage=usage, error=message))
    gov = owner.governance
    return AgentResult(
        response=last_text(ctx.turns),
        turns=tuple(ctx.turns),
        usage=usage,
        stop_reason=reason,
        agent_id=owner.agent_id,
        run_id=ctx.run_id,
        agent_name=owner.name,
        delegation_id=gov.delegation_id if gov else None,
        parent_agent_id=gov.parent_agent_id if gov else None,
        parent_run_id=gov.parent_run_id if gov else None,
        limits=ctx.limits,
        error=message,
        hook_errors=tuple(ctx.hook_errors),
        output=ctx.output if reason == StopReason.COMPLETE else None,
    )
