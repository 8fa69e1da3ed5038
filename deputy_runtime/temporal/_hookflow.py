"""The workflow side of hooks: what a hook reply does to the run, and the lead's events.

Workflow code (deterministic, no I/O): the hooks themselves run on the workers, in the
tool activity around each call and in the ``deputy_hook`` activity for the lead-side
events a run asks for (``LeadInput.hook_events``). Their decisions are applied here as
in-process: a PreToolUse stop, or a PostToolUse stop, ends the run at its next boundary
with ``hook_requested_stop``; a UserPromptSubmit deny or stop ends the run before its first
request; SubagentStart and SubagentStop decisions change nothing. Errors of the hooks are
announced as warning events and recorded: in the lead's result for its own calls and
events, in the delegation's record (``hook_error``) for a subagent's calls and the
SubagentStart and SubagentStop hooks, and in neither for the Stop hooks, which run after
the result is settled (as in-process). A ``deputy_hook`` activity's answer is in the
history, so a replay never runs a hook again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from ..chat import ContentToolRequest, ContentToolResult
    from ..runtime import (
        HookDecision,
        HookEvent,
        HookInput,
        PermissionEvent,
        StopReason,
        WarningEvent,
        hook_refusal,
        hook_warning,
        permission_denied_text,
    )
    from ..tools import ask_user
    from ._cancel import cancelling
    from ._gate_report import GatePassed, GateReport, GateStep, GateStepKind
    from ._hooks import HOOK_ACTIVITY, HookCall, HookReply
    from ._tool_gate import DELEGATE_GATE_ACTIVITY
    from ._values import PermissionSpec, ToolCall, ToolReply

if TYPE_CHECKING:
    from ._loop import AgentLoop, Ids

__all__ = [
    "HOOK_RETRY",
    "LeadHooks",
    "ToolStarts",
    "after_tool_reply",
    "ask_denied",
    "batch_hooks",
    "delegate_with_hooks",
    "expect_start",
    "log_denial",
    "observed_hooks",
    "run_hooks",
    "subagent_hooks",
    "tool_started",
]

#: A hook activity is retried only when the worker running it is lost.
HOOK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
HOOK_TIMEOUT = timedelta(minutes=30)
HOOK_HEARTBEAT_TIMEOUT = timedelta(seconds=20)


class ToolStarts:
    """An agent loop's tool calls in flight: each one's ``tool_start`` until its gate is
    logged, and for calls the worker's ``deputy_tool_started`` signal logged early, how
    many of their hook errors that log already announced."""

    __slots__ = ("logged", "waiting")

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[ContentToolRequest, Callable[[], None]]] = {}
        self.logged: dict[str, int] = {}


def expect_start(loop: AgentLoop, call: ContentToolRequest, start: Callable[[], None]) -> None:
    """Register a call about to go to its tool activity; ``start`` appends its
    ``tool_start``."""
    loop.starts.waiting[call.id] = (call, start)


def tool_started(loop: AgentLoop | None, passed: GatePassed) -> None:
    """The ``deputy_tool_started`` signal: log the call's gate and ``tool_start`` now,
    while the tool runs. A signal for a call not waiting (logged already, or from a
    retried attempt) changes nothing."""
    if loop is None:
        return
    waiting = loop.starts.waiting.pop(passed.tool_call_id, None)
    if waiting is None:
        return
    call, start = waiting
    loop.starts.logged[call.id] = _log_gate(loop, call, passed.report)
    start()


def after_tool_reply(
    loop: AgentLoop, call: ContentToolRequest, reply: ToolReply, start: Callable[[], None]
) -> bool:
    """Log what the worker's gate and hooks did around one tool call, in the in-process
    order, and apply it to the run; ``start`` appends the call's ``tool_start``.

    The gate's steps come first (hook warnings, the permission decision), then
    ``tool_start`` if the tool ran, then the warnings of its PostToolUse hooks (the
    caller appends ``tool_end``). A denied or refused call gets no ``tool_start``. A call
    whose gate the worker's signal logged already gets only the rest.

    Returns:
        Whether the tool ran (so its ``tool_end`` is due).
    """
    starts = loop.starts
    starts.waiting.pop(call.id, None)
    before = starts.logged.pop(call.id, None)
    started = before is not None  # its tool_start is in the log: its tool_end is due
    if before is None:
        gate = reply.gate
        before = 0 if gate is None else _log_gate(loop, call, gate)
        started = gate is None or gate.started
        if started:
            start()
    if started:
        warn(loop, reply.hook_errors[before:])
    loop.hook_errors.extend(reply.hook_errors)
    if reply.stop is not None:
        stop(loop)
    return started


def ask_denied(loop: AgentLoop, call: ContentToolRequest) -> bool:
    """Whether an ``ask_user`` call is denied by the agent's permissions or its lead's
    current ones (the static rules, as ``_human`` checks it before asking)."""
    specs = (loop.permissions, loop.lead_permissions)
    return any(
        spec.checkable().check_static(ask_user, call.arguments) is not None
        for spec in specs
        if spec is not None
    )


def log_denial(loop: AgentLoop, call: ContentToolRequest, reason: str) -> None:
    """Log a denial decided in workflow code (an ``ask_user`` call's)."""
    _log_gate(loop, call, GateReport(False, (GateStep(GateStepKind.DENY, reason),)))


def _log_gate(loop: AgentLoop, call: ContentToolRequest, gate: GateReport) -> int:
    """Append the gate's events; returns how many hook errors they announced."""
    fields = loop.ids.fields()
    errors = 0
    for step in gate.steps:
        if step.kind is GateStepKind.HOOK_ERROR:
            warn(loop, (step.text or "",))
            errors += 1
        else:
            loop.events.append(
                PermissionEvent(
                    **fields,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    decision=step.kind.value,
                    reason=step.text,
                )
            )
    if gate.interrupt:  # a denial that stops the run, as in-process
        halt(loop, StopReason.INTERRUPTED)
    return errors


def stop(loop: AgentLoop) -> None:
    """End the run at its next boundary with ``hook_requested_stop`` (an earlier reason
    to stop is kept)."""
    halt(loop, StopReason.HOOK_REQUESTED_STOP)


def halt(loop: AgentLoop, reason: StopReason) -> None:
    """End the run at its next boundary with ``reason`` (an earlier reason is kept)."""
    if loop.stop_reason is None:
        loop.stop_reason = reason


def warn(loop: AgentLoop, errors: tuple[str, ...]) -> None:
    """Announce hook errors as warning events of the run."""
    for error in errors:
        loop.events.append(WarningEvent(**loop.ids.fields(), message=hook_warning(error)))


async def delegate_with_hooks(
    loop: AgentLoop,
    call: ContentToolRequest,
    delegate: Callable[[ContentToolRequest], Awaitable[ContentToolResult]],
    start: Callable[[], None],
) -> tuple[ContentToolResult, bool]:
    """A ``delegate_to_agent`` call inside the lead's PreToolUse and PostToolUse hooks, as
    every call of the in-process lead is (when the run asks for those events).

    ``start`` appends the call's ``tool_start``: after the PreToolUse hooks, as
    in-process. Returns the result and whether the call ran (a refused one has no
    ``tool_start`` and no ``tool_end``).
    """
    if _gated(loop.permissions):
        refused = await _delegate_permission(loop, call)
        if refused is not None:
            return refused, False
    hooks = loop.lead_hooks
    if hooks is None:
        start()
        return await delegate(call), True
    if hooks.wants(HookEvent.PreToolUse):
        reply = await hooks.fire(loop, hooks.tool_input(loop, HookEvent.PreToolUse, call))
        loop.hook_errors.extend(reply.errors)
        refusal = hook_refusal(reply.decision)
        if refusal is not None:
            if reply.decision is not None and reply.decision.decision == "stop":
                stop(loop)
            return ContentToolResult(call.id, error=refusal), False
    start()
    result = await delegate(call)
    event = HookEvent.PostToolUse if result.error is None else HookEvent.PostToolUseFailure
    if hooks.wants(event):
        reply = await hooks.fire(
            loop,
            hooks.tool_input(loop, event, call, tool_result=result.value, tool_error=result.error),
        )
        loop.hook_errors.extend(reply.errors)
        if reply.decision is not None and reply.decision.decision == "stop":
            stop(loop)
    return result, True


#: A subagent's run events its lead's observers can see through the hook activity (its
#: tool events reach the lead's hooks in the tool activity).
_OBSERVED_RUN_EVENTS = (HookEvent.SessionStart, HookEvent.UserPromptSubmit, HookEvent.Stop)


def observed_hooks(observers: tuple[str, ...]) -> LeadHooks | None:
    """The hook activities a subagent's run makes for its lead's observers: SessionStart,
    UserPromptSubmit and Stop of the subagent's own run, with its ids, as in-process
    (``None``: none observed)."""
    events = tuple(e.value for e in _OBSERVED_RUN_EVENTS if e.value in observers)
    return LeadHooks(events) if events else None


def _gated(permissions: PermissionSpec) -> bool:
    """Whether a lead's ``delegate_to_agent`` call needs the permission activity: the mode
    rules exempt it, the allow and deny lists and the callback do not."""
    return permissions.can_use_tool or bool(permissions.allow or permissions.deny)


async def _delegate_permission(
    loop: AgentLoop, call: ContentToolRequest
) -> ContentToolResult | None:
    """Check a ``delegate_to_agent`` call on a worker (``deputy_delegate_gate``); log what
    the check did; the refusal, or ``None`` when the delegation may go ahead. A check
    that fails on every attempt denies the call (fail closed)."""
    request = ToolCall(
        request_id=call.id,
        name=call.name,
        arguments=call.arguments,
        offered=(),
        permissions=loop.permissions,
        **loop.ids.fields(),
    )
    try:
        reply: ToolReply = await workflow.execute_activity(
            DELEGATE_GATE_ACTIVITY,
            request,
            result_type=ToolReply,
            start_to_close_timeout=HOOK_TIMEOUT,
            heartbeat_timeout=HOOK_HEARTBEAT_TIMEOUT,
            retry_policy=HOOK_RETRY,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
    except ActivityError as exc:
        if cancelling(exc):
            raise
        cause = exc.cause if exc.cause is not None else exc
        reason = f"Tool '{call.name}' denied: the permission check failed: {cause}"
        step = GateStep(GateStepKind.DENY, reason)
        reply = ToolReply(
            ContentToolResult(call.id, error=permission_denied_text(reason)),
            denied=reason,
            gate=GateReport(started=False, steps=(step,)),
        )
    gate = reply.gate
    if gate is not None:
        _log_gate(loop, call, gate)
    loop.hook_errors.extend(reply.hook_errors)
    if gate is not None and gate.started:
        return None
    return reply.result


class LeadHooks:
    """The lead-side hook events one run asks for, run by ``deputy_hook`` activities."""

    __slots__ = ("events",)

    def __init__(self, events: tuple[str, ...]) -> None:
        self.events = frozenset(HookEvent(e) for e in events)

    def wants(self, event: HookEvent) -> bool:
        """Whether the run asked for ``event``."""
        return event in self.events

    async def fire(
        self, loop: AgentLoop, hook_input: HookInput, *, announce: bool = True
    ) -> HookReply:
        """Run the workers' hooks for one event; ``announce`` its errors as warning events.

        A hook activity that fails (its worker lost on every attempt) counts as a hook
        error; for PreToolUse it denies the call (fail closed).
        """
        reply = await run_hooks(hook_input)
        if announce:
            warn(loop, reply.errors)
        return reply

    def input(self, loop: AgentLoop, event: HookEvent, **fields: Any) -> HookInput:
        """The input of one of the lead's own events (the worker fills ``working_dir``)."""
        return HookInput(
            event=event, **loop.ids.fields(), permission_mode=loop.permissions.mode, **fields
        )

    def tool_input(
        self, loop: AgentLoop, event: HookEvent, call: ContentToolRequest, **fields: Any
    ) -> HookInput:
        """The input of a tool event of one of the lead's own calls."""
        return self.input(
            loop,
            event,
            tool_call_id=call.id,
            tool_name=call.name,
            tool_input=call.arguments,
            **fields,
        )

    async def before_run(self, loop: AgentLoop) -> None:
        """SessionStart: a durable lead's run is its whole session."""
        if self.wants(HookEvent.SessionStart):
            reply = await self.fire(loop, self.input(loop, HookEvent.SessionStart))
            loop.hook_errors.extend(reply.errors)

    async def prompt(self, loop: AgentLoop, task: str) -> bool:
        """UserPromptSubmit; ``True`` when a deny or stop ends the run before it starts."""
        if not self.wants(HookEvent.UserPromptSubmit):
            return False
        reply = await self.fire(loop, self.input(loop, HookEvent.UserPromptSubmit, prompt=task))
        loop.hook_errors.extend(reply.errors)
        return reply.decision is not None and reply.decision.decision in ("deny", "stop")

    async def after_run(self, loop: AgentLoop, stop_reason: StopReason) -> None:
        """Stop: after the result is settled, so a lead's errors are announced, not
        recorded; a subagent's also go to its delegation's record, which the lead settles
        after the child's run, Stop hooks included (as in-process)."""
        if self.wants(HookEvent.Stop):
            reply = await self.fire(loop, self.input(loop, HookEvent.Stop, reason=stop_reason))
            if loop.ids.delegation_id is not None:
                loop.hook_errors.extend(reply.errors)

    async def subagent(
        self, loop: AgentLoop, event: HookEvent, child: dict[str, Any], **fields: Any
    ) -> tuple[str, ...]:
        """SubagentStart or SubagentStop for the delegation ``child`` describes (its
        ``delegation_id``, ``tool_call_id``, ``task`` and ``child_*`` ids); returns the
        hook errors, which belong to the delegation's record. The decision changes
        nothing, as in-process."""
        if not self.wants(event):
            return ()
        return await subagent_hooks(loop.ids, loop.permissions.mode, event, child, **fields)


async def run_hooks(hook_input: HookInput) -> HookReply:
    """The workers' hooks for one event, in a ``deputy_hook`` activity (recorded, so a
    replay never runs them again). An activity that fails on every attempt counts as a
    hook error; for PreToolUse it denies the call (fail closed)."""
    try:
        reply: HookReply = await workflow.execute_activity(
            HOOK_ACTIVITY,
            HookCall(hook_input),
            result_type=HookReply,
            start_to_close_timeout=HOOK_TIMEOUT,
            heartbeat_timeout=HOOK_HEARTBEAT_TIMEOUT,
            retry_policy=HOOK_RETRY,
            # A cancelled run waits for its running hooks to stop, as for tool calls.
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
    except ActivityError as exc:
        if cancelling(exc):
            raise
        cause = exc.cause if exc.cause is not None else exc
        error = f"{hook_input.event.value}: {cause}"
        decision = (
            HookDecision.deny(f"Hook error: {cause}")
            if hook_input.event is HookEvent.PreToolUse
            else None
        )
        reply = HookReply(decision, (error,))
    return reply


async def subagent_hooks(
    ids: Ids, mode: str, event: HookEvent, child: dict[str, Any], **fields: Any
) -> tuple[str, ...]:
    """SubagentStart or SubagentStop of the agent ``ids`` (permission ``mode``) for the
    delegation ``child`` describes; returns the hook errors (the delegation's)."""
    hook_input = HookInput(
        event=event,
        agent_id=ids.agent_id,
        agent_name=ids.agent_name,
        run_id=ids.run_id,
        permission_mode=mode,
        **child,
        **fields,
    )
    reply = await run_hooks(hook_input)
    return reply.errors


async def batch_hooks(
    events: tuple[str, ...],
    ids: Ids,
    mode: str,
    event: HookEvent,
    child: dict[str, Any],
    **fields: Any,
) -> tuple[str, ...]:
    """A ``parallel_delegate`` batch's SubagentStart or SubagentStop for one responder,
    when the batch asks for it (``events``); returns the hook errors (the responder's)."""
    if event.value not in events:
        return ()
    return await subagent_hooks(ids, mode, event, child, **fields)
