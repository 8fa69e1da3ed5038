"""The gate every tool call passes before it runs.

In order: the call's limit slot, a pending interrupt, a known tool, the permission check
(the agent's own rules and ``can_use_tool``; for a subagent also its lead's *current*
permissions), then the PreToolUse hooks and, because hooks may await, the lead's
permissions once more. Every denial goes through :func:`refuse`, the single path that
emits the permission event and the Notification hooks. The gate sees the run only
through its :class:`RunContext`.
"""

from __future__ import annotations

from ..chat import ContentToolRequest, ContentToolResult
from ..tools import Tool
from ._context import RunContext, RunOwner
from ._events import PermissionEvent
from ._hooks import HookDecision, HookEvent, HookInput
from ._permissions import PermissionDeny
from ._states import StopReason
from ._texts import INTERRUPTED_TEXT, TOOL_CALL_LIMIT_TEXT, permission_denied_text

__all__ = ["gate", "hook_refusal", "lead_denial", "refuse"]


async def gate(
    ctx: RunContext, call: ContentToolRequest, call_id: str, slot: bool
) -> Tool | ContentToolResult:
    """The tool to run, or the error result that refuses the call.

    Args:
        ctx: The run the call belongs to.
        call: The model's tool request.
        call_id: The call's id (the request's, or a fresh one).
        slot: Whether the run's tool-call limit left this call a slot.

    Returns:
        The tool to run, or the error result the model sees instead.
    """
    if not slot:
        ctx.stop(StopReason.TOOL_CALL_LIMIT)
        return ContentToolResult(call.id, error=TOOL_CALL_LIMIT_TEXT)
    owner = ctx.owner
    if owner.interrupt_reason is not None:
        ctx.stop(StopReason.INTERRUPTED)
        return ContentToolResult(call.id, error=INTERRUPTED_TEXT)
    tool = owner.tool(call.name)
    if tool is None:
        names = ", ".join(owner.tool_names()) or "none"
        return ContentToolResult(
            call.id, error=f"Unknown tool: {call.name}. Available tools: {names}"
        )
    pre = (
        ctx.hook_input(HookEvent.PreToolUse, call=call, call_id=call_id)
        if owner.permissions.can_use_tool is not None or ctx.wants(HookEvent.PreToolUse)
        else None
    )
    denied = await check_permission(ctx, tool, call, call_id, pre)
    if denied is not None:
        return ContentToolResult(call.id, error=denied)
    if pre is not None and ctx.wants(HookEvent.PreToolUse):
        decision = await ctx.fire(pre)
        refusal = hook_refusal(decision)
        if refusal is not None:
            if decision is not None and decision.decision == "stop":
                ctx.stop(StopReason.HOOK_REQUESTED_STOP)
            return ContentToolResult(call.id, error=refusal)
        # Hooks may await (a person, a policy service); the lead may have been
        # narrowed meanwhile, so its live permissions are checked once more.
        late = lead_denial(owner, tool, call)
        if late is not None:
            return ContentToolResult(call.id, error=await refuse(ctx, call, call_id, late))
    return tool


def hook_refusal(decision: HookDecision | None) -> str | None:
    """The model's error text for a PreToolUse decision that refuses the call.

    Args:
        decision: What the PreToolUse hooks decided (``None``: nothing).

    Returns:
        The error result's text for a stop or a deny, ``None`` when the call goes ahead.
        A stop also ends the run at its next boundary (the caller's job).
    """
    if decision is None:
        return None
    if decision.decision == "stop":
        return f"Run stopped by hook: {decision.reason}"
    if decision.decision == "deny":
        return f"Denied by hook: {decision.reason}"
    return None


def lead_denial(owner: RunOwner, tool: Tool, call: ContentToolRequest) -> PermissionDeny | None:
    """A subagent's call checked against its lead's *current* permissions."""
    gov = owner.governance
    if gov is None:
        return None
    denial = gov.lead.permissions.check_static(tool, call.arguments)
    if denial is None:
        return None
    return PermissionDeny(
        f"{denial.reason} (lead's current permissions)", denial.interrupt, final=denial.final
    )


async def check_permission(
    ctx: RunContext,
    tool: Tool,
    call: ContentToolRequest,
    call_id: str,
    context: HookInput | None,
) -> str | None:
    """The denial reason, or ``None`` when the call may go ahead.

    ``can_use_tool`` receives ``context``: the call's PreToolUse hook input.
    """
    owner = ctx.owner
    permissions = owner.permissions
    result = await permissions.check(tool, call.arguments, context)
    denial = result if isinstance(result, PermissionDeny) else None
    # An allow by the static rules is implied by the tool_start that follows; an
    # allow by a callback or hook is a decision worth its own event.
    decided = permissions.can_use_tool is not None
    if denial is None:
        denial = lead_denial(owner, tool, call)
    elif (
        not denial.final
        and owner.governance is None
        and owner.hooks.has(HookEvent.PermissionRequest)
    ):
        # Only an agent's own calls can be approved by PermissionRequest hooks; a
        # subagent's never reach its lead (the ceiling must hold), and final denials
        # (the deny list, a failed can_use_tool) are never put to them.
        decision = await ctx.fire(
            ctx.hook_input(
                HookEvent.PermissionRequest,
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
        if decided and ctx.emit is not None:
            ctx.emit(
                PermissionEvent(
                    **ctx.event_ids(),
                    tool_call_id=call_id,
                    tool_name=call.name,
                    decision="allow",
                )
            )
        return None
    return await refuse(ctx, call, call_id, denial)


async def refuse(
    ctx: RunContext, call: ContentToolRequest, call_id: str, denial: PermissionDeny
) -> str:
    """Announce a denial (event, Notification hooks) and return the model's message."""
    if ctx.emit is not None:
        ctx.emit(
            PermissionEvent(
                **ctx.event_ids(),
                tool_call_id=call_id,
                tool_name=call.name,
                decision="deny",
                reason=denial.reason,
            )
        )
    if denial.interrupt:
        ctx.stop(StopReason.INTERRUPTED)
    if ctx.wants(HookEvent.Notification):
        await ctx.fire(
            ctx.hook_input(HookEvent.Notification, message=f"permission_denied: {denial.reason}")
        )
    return permission_denied_text(denial.reason)
