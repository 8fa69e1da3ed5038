"""The gate of one tool call on a worker: permissions, ``can_use_tool`` and the hooks.

The in-process gate's order (``runtime._gate``), run inside the ``deputy_tool_call``
activity: the agent's own permissions (the static rules, then the workers'
``can_use_tool`` callback when the run asks for it), then for a subagent its lead's
current permissions (static rules only, as in-process); for an agent's own denied call
that is not final, the PermissionRequest hooks; on a denial the Notification hooks; then
PreToolUse. Each step the event log shows is recorded in a :class:`GateLog`, so the
workflow can append the events in the in-process order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from temporalio import activity
from temporalio.service import RPCError

from ..chat import ContentToolResult
from ..runtime import (
    DELEGATE_TOOL_NAME,
    HookEvent,
    PermissionDeny,
    Permissions,
    delegate_placeholder,
    hook_refusal,
    permission_denied_text,
)
from ..tools import Tool
from ._gate_report import TOOL_STARTED_SIGNAL, GateLog, GatePassed, GateStepKind
from ._hooks import ToolCallHooks
from ._values import ToolCall, ToolReply

__all__ = [
    "DELEGATE_GATE_ACTIVITY",
    "NO_CALLBACK",
    "CanUseTool",
    "announce_start",
    "delegate_gate",
    "tool_gate",
]

#: The activity checking a durable lead's ``delegate_to_agent`` call (see
#: :func:`delegate_gate`).
DELEGATE_GATE_ACTIVITY = "deputy_delegate_gate"
#: A lead's delegate tool as the permission rules see it: exempt from the mode rules,
#: not from the allow and deny lists or the callback (the placeholder never runs).
_DELEGATE_TOOL = Tool(
    name=DELEGATE_TOOL_NAME,
    description="Delegate a task to a subagent.",
    parameters={"type": "object"},
    function=delegate_placeholder,
)

#: ``can_use_tool(tool_name, arguments, context)`` as ``Permissions`` takes it (sync or
#: async, returning ``PermissionAllow`` or ``PermissionDeny``).
CanUseTool: TypeAlias = Callable[[str, Mapping[str, Any], Any], Any]

#: The denial of a call whose run asks for the workers' ``can_use_tool`` callback when
#: the worker running it has none (fail closed, as a failing callback does).
NO_CALLBACK = (
    "Tool '{name}' denied: the run asks for the workers' can_use_tool callback and this "
    "worker has none (register it with DeputyActivities(can_use_tool=...))."
)


async def tool_gate(
    tool: Tool,
    call: ToolCall,
    hooks: ToolCallHooks,
    own: Permissions,
    lead: Permissions | None,
    can_use_tool: CanUseTool | None,
    traced: Any = None,
    *,
    pre_tool_use: bool = True,
) -> ToolReply | GateLog:
    """Check one call; the reply that refuses it, or the log of a call that may run.

    Args:
        tool: The resolved tool.
        call: The call.
        hooks: The worker's hooks around this call.
        own: The calling agent's permissions.
        lead: Its lead's current permissions (a subagent's call), else ``None``.
        can_use_tool: The worker's callback (used when ``call.permissions`` asks for it).
        traced: The call's span, when tracing (its permission decision is set).
        pre_tool_use: Run the PreToolUse hooks (a lead's ``delegate_to_agent`` call has
            them in a ``deputy_hook`` activity of their own).

    Returns:
        A :class:`ToolReply` with the error result when the call is refused, else the
        :class:`GateLog` of what the gate did (the caller runs the tool).
    """
    log = GateLog()
    asks = call.permissions.can_use_tool
    denial: PermissionDeny | None
    if asks and can_use_tool is None:
        denial = PermissionDeny(NO_CALLBACK.format(name=tool.name), final=True)
    else:
        checked = Permissions(
            mode=own.mode,
            allow=own.allow,
            deny=own.deny,
            can_use_tool=can_use_tool if asks else None,
            write_root=own.write_root,
            working_dir=own.working_dir,
        )
        # The callback's context is the call's PreToolUse hook input, as in-process.
        context = hooks.input(HookEvent.PreToolUse) if asks else None
        result = await checked.check(tool, call.arguments, context)
        denial = result if isinstance(result, PermissionDeny) else None
    # An allow by the static rules is implied by the tool_start; one by the callback or a
    # PermissionRequest hook is a decision with its own event, as in-process.
    decided = asks
    allowed_by_hook = False
    if denial is None and lead is not None:
        late = lead.check_static(tool, call.arguments)
        if late is not None:
            reason = f"{late.reason} (lead's current permissions)"
            denial = PermissionDeny(reason, late.interrupt, final=late.final)
    elif denial is not None and not denial.final and hooks.wants(HookEvent.PermissionRequest):
        # An agent's own denied call may be approved (never a subagent's: the ceiling
        # holds); final denials are never put to the hooks.
        decision = await hooks.fire(HookEvent.PermissionRequest, permission_reason=denial.reason)
        log.errors(hooks.errors)
        if decision is not None:
            decided = True
            if decision.decision == "allow":
                denial, allowed_by_hook = None, True
            elif decision.reason:
                denial = PermissionDeny(decision.reason, denial.interrupt)
    if traced is not None:
        traced.set_attribute("deputy.permission.decision", "deny" if denial else "allow")
    if denial is not None:
        log.decide(GateStepKind.DENY, denial.reason)
        await hooks.fire(
            HookEvent.Notification, tool=False, message=f"permission_denied: {denial.reason}"
        )
        log.errors(hooks.errors)
        result_ = ContentToolResult(call.request_id, error=permission_denied_text(denial.reason))
        return ToolReply(
            result_,
            denied=denial.reason,
            hook_errors=tuple(hooks.errors),
            gate=log.report(started=False, interrupt=denial.interrupt),
        )
    if decided:
        log.decide(GateStepKind.ALLOW)
    if not pre_tool_use:
        log.allowed_by_hook = allowed_by_hook
        return log
    decision = await hooks.fire(HookEvent.PreToolUse)
    log.errors(hooks.errors)
    refusal = hook_refusal(decision)
    if refusal is not None:
        stop = decision.reason if decision and decision.decision == "stop" else None
        return ToolReply(
            ContentToolResult(call.request_id, error=refusal),
            stop=stop,
            hook_errors=tuple(hooks.errors),
            allowed_by_hook=allowed_by_hook,
            gate=log.report(started=False),
        )
    log.allowed_by_hook = allowed_by_hook
    return log


async def announce_start(call: ToolCall, log: GateLog) -> None:
    """Tell the calling workflow that ``call`` passed its gate (``deputy_tool_started``),
    so its log shows the gate's events and ``tool_start`` while the tool runs.

    Best effort: when the signal cannot be sent, the activity's reply carries the same
    report and the workflow logs it when the call ends.
    """
    info = activity.info()
    if not info.workflow_id:
        return
    try:
        handle = activity.client().get_workflow_handle(
            info.workflow_id, run_id=info.workflow_run_id
        )
        await handle.signal(
            TOOL_STARTED_SIGNAL, GatePassed(call.request_id, log.report(started=True))
        )
    except (RuntimeError, RPCError):
        return


async def delegate_gate(
    call: ToolCall, hooks: ToolCallHooks, own: Permissions, can_use_tool: CanUseTool | None
) -> ToolReply:
    """The permission part of the gate for a lead's ``delegate_to_agent`` call.

    The in-process lead checks its delegate tool like any other (the allow and deny lists
    and ``can_use_tool``; the mode rules exempt it), with PermissionRequest and
    Notification hooks; the durable lead runs this activity for it when its permissions
    have lists or ask for the callback. The reply's gate says whether it may go ahead
    (``started``); nothing runs here.
    """
    gate = await tool_gate(_DELEGATE_TOOL, call, hooks, own, None, can_use_tool, pre_tool_use=False)
    if isinstance(gate, ToolReply):
        return gate
    return ToolReply(
        ContentToolResult(call.request_id),
        hook_errors=tuple(hooks.errors),
        allowed_by_hook=gate.allowed_by_hook,
        gate=gate.report(started=True),
    )
