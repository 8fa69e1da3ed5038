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
    )
    from ._cancel import cancelling
    from ._hooks import HOOK_ACTIVITY, HookCall, HookReply
    from ._values import ToolReply

if TYPE_CHECKING:
    from ._loop import AgentLoop

__all__ = ["HOOK_RETRY", "LeadHooks", "after_tool_reply", "delegate_with_hooks"]

#: A hook activity is retried only when the worker running it is lost.
HOOK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
HOOK_TIMEOUT = timedelta(minutes=30)
HOOK_HEARTBEAT_TIMEOUT = timedelta(seconds=20)


def after_tool_reply(loop: AgentLoop, call: ContentToolRequest, reply: ToolReply) -> None:
    """Apply what the worker's hooks did around one tool call to the run."""
    if reply.allowed_by_hook:
        loop.events.append(
            PermissionEvent(
                **loop.ids.fields(), tool_call_id=call.id, tool_name=call.name, decision="allow"
            )
        )
    warn(loop, reply.hook_errors)
    loop.hook_errors.extend(reply.hook_errors)
    if reply.stop is not None:
        stop(loop)


def stop(loop: AgentLoop) -> None:
    """End the run at its next boundary with ``hook_requested_stop`` (an earlier reason
    to stop is kept)."""
    if loop.stop_reason is None:
        loop.stop_reason = StopReason.HOOK_REQUESTED_STOP


def warn(loop: AgentLoop, errors: tuple[str, ...]) -> None:
    """Announce hook errors as warning events of the run."""
    for error in errors:
        loop.events.append(WarningEvent(**loop.ids.fields(), message=hook_warning(error)))


async def delegate_with_hooks(
    loop: AgentLoop,
    call: ContentToolRequest,
    delegate: Callable[[ContentToolRequest], Awaitable[ContentToolResult]],
) -> ContentToolResult:
    """A ``delegate_to_agent`` call inside the lead's PreToolUse and PostToolUse hooks, as
    every call of the in-process lead is (when the run asks for those events)."""
    hooks = loop.lead_hooks
    if hooks is None:
        return await delegate(call)
    if hooks.wants(HookEvent.PreToolUse):
        reply = await hooks.fire(loop, hooks.tool_input(loop, HookEvent.PreToolUse, call))
        loop.hook_errors.extend(reply.errors)
        refusal = hook_refusal(reply.decision)
        if refusal is not None:
            if reply.decision is not None and reply.decision.decision == "stop":
                stop(loop)
            return ContentToolResult(call.id, error=refusal)
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
    return result


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
        """Stop: after the result is settled, so its errors are announced, not recorded."""
        if self.wants(HookEvent.Stop):
            await self.fire(loop, self.input(loop, HookEvent.Stop, reason=stop_reason))

    async def subagent(
        self, loop: AgentLoop, event: HookEvent, child: dict[str, Any], **fields: Any
    ) -> tuple[str, ...]:
        """SubagentStart or SubagentStop for the delegation ``child`` describes (its
        ``delegation_id``, ``tool_call_id``, ``task`` and ``child_*`` ids); returns the
        hook errors, which belong to the delegation's record. The decision changes
        nothing, as in-process."""
        if not self.wants(event):
            return ()
        ids = loop.ids
        hook_input = HookInput(
            event=event,
            agent_id=ids.agent_id,
            agent_name=ids.agent_name,
            run_id=ids.run_id,
            permission_mode=loop.permissions.mode,
            **child,
            **fields,
        )
        reply = await self.fire(loop, hook_input, announce=False)
        return reply.errors
