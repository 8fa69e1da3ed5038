"""The gate every tool call passes before it runs.

In order: the call's limit slot, a pending interrupt, a known tool, the permission check
(the agent's own rules and ``can_use_tool``; for a subagent also its lead's *current*
permissions), then the PreToolUse hooks and, because hooks may await, the lead's
permissions once more. Every denial goes through :func:`refuse`, the single path that
emits the permission event and the Notification hooks. Kept apart from the loop in
``_agent`` so each reads top to bottom.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..chat._types import ContentToolRequest, ContentToolResult
from ..tools._tool import Tool
from ._events import PermissionEvent
from ._hooks import HookEvent, HookInput
from ._permissions import PermissionDeny
from ._runstate import RunState

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["gate", "lead_denial", "refuse"]


async def gate(
    agent: Agent, run: RunState, call: ContentToolRequest, call_id: str, slot: bool
) -> Tool | ContentToolResult:
    """The tool to run, or the error result that refuses the call."""
    if not slot:
        run.stop_reason = run.stop_reason or "tool_call_limit"
        return ContentToolResult(call.id, error="Tool call limit reached; the call did not run.")
    if agent._interrupt_reason is not None:
        run.stop_reason = run.stop_reason or "interrupted"
        return ContentToolResult(call.id, error="The run was interrupted; the call did not run.")
    tool = agent._tools.get(call.name)
    if tool is None:
        names = ", ".join(agent._tools) or "none"
        return ContentToolResult(
            call.id, error=f"Unknown tool: {call.name}. Available tools: {names}"
        )
    pre = (
        agent._hook_input(HookEvent.PreToolUse, run, call=call, call_id=call_id)
        if agent._permissions.can_use_tool is not None or agent._wants(HookEvent.PreToolUse)
        else None
    )
    denied = await check_permission(agent, run, tool, call, call_id, pre)
    if denied is not None:
        return ContentToolResult(call.id, error=denied)
    if pre is not None and agent._wants(HookEvent.PreToolUse):
        decision = await agent._fire(run, pre)
        if decision is not None and decision.decision == "stop":
            run.stop_reason = run.stop_reason or "hook_requested_stop"
            return ContentToolResult(call.id, error=f"Run stopped by hook: {decision.reason}")
        if decision is not None and decision.decision == "deny":
            return ContentToolResult(call.id, error=f"Denied by hook: {decision.reason}")
        # Hooks may await (a person, a policy service); the lead may have been
        # narrowed meanwhile, so its live permissions are checked once more.
        late = lead_denial(agent, tool, call)
        if late is not None:
            return ContentToolResult(call.id, error=await refuse(agent, run, call, call_id, late))
    return tool


def lead_denial(agent: Agent, tool: Tool, call: ContentToolRequest) -> PermissionDeny | None:
    """A subagent's call checked against its lead's *current* permissions."""
    gov = agent.governance
    if gov is None:
        return None
    denial = gov.lead.permissions.check_static(tool, call.arguments)
    if denial is None:
        return None
    return PermissionDeny(
        f"{denial.reason} (lead's current permissions)", denial.interrupt, final=denial.final
    )


async def check_permission(
    agent: Agent,
    run: RunState,
    tool: Tool,
    call: ContentToolRequest,
    call_id: str,
    context: HookInput | None,
) -> str | None:
    """The denial reason, or ``None`` when the call may go ahead.

    ``can_use_tool`` receives ``context``: the call's PreToolUse hook input.
    """
    result = await agent._permissions.check(tool, call.arguments, context)
    denial = result if isinstance(result, PermissionDeny) else None
    # An allow by the static rules is implied by the tool_start that follows; an
    # allow by a callback or hook is a decision worth its own event.
    decided = agent._permissions.can_use_tool is not None
    if denial is None:
        denial = lead_denial(agent, tool, call)
    elif (
        not denial.final
        and agent.governance is None
        and agent.hooks.has(HookEvent.PermissionRequest)
    ):
        # Only an agent's own calls can be approved by PermissionRequest hooks; a
        # subagent's never reach its lead (the ceiling must hold), and final denials
        # (the deny list, a failed can_use_tool) are never put to them.
        decision = await agent._fire(
            run,
            agent._hook_input(
                HookEvent.PermissionRequest,
                run,
                call=call,
                call_id=call_id,
                permission_reason=denial.reason,
            ),
        )
        if decision is not None:
            decided = True
            if decision.decision == "allow":
                denial = None
            elif decision.reason:
                denial = PermissionDeny(decision.reason, denial.interrupt)
    if denial is None:
        if decided and run.emit is not None:
            run.emit(
                PermissionEvent(
                    **agent._ids(run),
                    tool_call_id=call_id,
                    tool_name=call.name,
                    decision="allow",
                )
            )
        return None
    return await refuse(agent, run, call, call_id, denial)


async def refuse(
    agent: Agent, run: RunState, call: ContentToolRequest, call_id: str, denial: PermissionDeny
) -> str:
    """Announce a denial (event, Notification hooks) and return the model's message."""
    if run.emit is not None:
        run.emit(
            PermissionEvent(
                **agent._ids(run),
                tool_call_id=call_id,
                tool_name=call.name,
                decision="deny",
                reason=denial.reason,
            )
        )
    if denial.interrupt:
        run.stop_reason = run.stop_reason or "interrupted"
    if agent._wants(HookEvent.Notification):
        await agent._fire(
            run,
            agent._hook_input(
                HookEvent.Notification, run, message=f"permission_denied: {denial.reason}"
            ),
        )
    return f"Permission denied: {denial.reason}"
