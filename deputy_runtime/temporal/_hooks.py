"""Hooks on a worker: the host's callbacks, run by the activities, never by workflow code.

Hooks are host callbacks, so they cannot travel in a workflow's history: every worker of a
task queue registers them (``DeputyActivities(hooks=...)``) and runs them where the
in-process runtime does. Around a tool call (the ``deputy_tool_call`` activity) they run
in the gate's order: the permission checks, then PermissionRequest (an agent's own
denied call) and Notification (a denial), then PreToolUse, the tool, and PostToolUse or
PostToolUseFailure. A subagent's calls see its lead's hooks for the events always
forwarded (PreToolUse, PostToolUse, PostToolUseFailure) and no others, as in-process
without observers. Lead-side and lifecycle events run in the ``deputy_hook`` activity,
only for the events a run asks for, and its answer is recorded in the history, so a
replay never runs a hook again.

Activities run at least once: a worker lost mid-call leaves the call (and its hooks) to
run again on another worker, so a hook can see the same call twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ..runtime import ALWAYS_FORWARDED, HookDecision, HookEvent, HookInput, Hooks
from ._values import ToolCall

__all__ = ["HOOK_ACTIVITY", "HookCall", "HookReply", "ToolCallHooks", "hook_event_names"]

HOOK_ACTIVITY = "deputy_hook"


class HookCall(msgspec.Struct, frozen=True, gc=False):
    """One hook event for the ``deputy_hook`` activity (its ``working_dir`` is filled in on
    the worker)."""

    input: HookInput


class HookReply(msgspec.Struct, frozen=True, gc=False):
    """What the worker's hooks decided for one event, and the errors of those that raised."""

    decision: HookDecision | None = None
    errors: tuple[str, ...] = ()


def hook_event_names(events: Any) -> tuple[str, ...]:
    """``events`` checked against :class:`HookEvent`, as a tuple of their names.

    Args:
        events: Hook event names or members (an iterable, not a single string).

    Returns:
        The names, in order, each once.

    Raises:
        ValueError: ``events`` is a string, or one of them is not a hook event.
    """
    if isinstance(events, str | bytes):
        raise ValueError(
            f"hook_events must be a list of hook event names, got the string {events!r}"
        )
    names: list[str] = []
    for value in events:
        try:
            name = HookEvent(value).value
        except ValueError:
            known = ", ".join(e.value for e in HookEvent)
            raise ValueError(
                f"hook_events: {value!r} is not a hook event; expected one of: {known}"
            ) from None
        if name not in names:
            names.append(name)
    return tuple(names)


async def run_hook(hooks: Hooks, call: HookCall, working_dir: Path) -> HookReply:
    """Dispatch one event to ``hooks``; the first decision wins, errors are collected."""
    hook_input = call.input
    if hook_input.working_dir is None:
        hook_input = msgspec.structs.replace(hook_input, working_dir=str(working_dir))
    errors: list[str] = []
    decision = await hooks.dispatch(hook_input, errors)
    return HookReply(decision, tuple(errors))


class ToolCallHooks:
    """The hooks around one tool call on a worker, with the call's ids and mode.

    A subagent's call (``call.delegation_id`` set) runs its lead's hooks for the events
    always forwarded only. ``errors`` collects ``"EVENT: message"`` lines of hooks that
    raised.
    """

    __slots__ = ("call", "errors", "hooks", "subagent", "working_dir")

    def __init__(self, hooks: Hooks, call: ToolCall, working_dir: Path) -> None:
        self.hooks = hooks
        self.call = call
        self.working_dir = working_dir
        self.subagent = call.delegation_id is not None
        self.errors: list[str] = []

    def wants(self, event: HookEvent) -> bool:
        """Whether a hook runs for ``event`` around this call."""
        if self.subagent and event not in ALWAYS_FORWARDED:
            return False
        return self.hooks.has(event)

    def input(self, event: HookEvent, *, tool: bool = True, **fields: Any) -> HookInput:
        """The hook input of ``event`` for this call (``tool=False``: no tool fields)."""
        call = self.call
        return HookInput(
            event=event,
            agent_id=call.agent_id or "",
            agent_name=call.agent_name,
            run_id=call.run_id,
            working_dir=str(self.working_dir),
            delegation_id=call.delegation_id,
            parent_agent_id=call.parent_agent_id,
            parent_run_id=call.parent_run_id,
            tool_call_id=call.request_id if tool else None,
            tool_name=call.name if tool else None,
            tool_input=call.arguments if tool else None,
            permission_mode=call.permissions.mode,
            **fields,
        )

    async def fire(
        self, event: HookEvent, *, tool: bool = True, **fields: Any
    ) -> HookDecision | None:
        """Run the hooks for ``event`` (if any listen) and return their decision."""
        if not self.wants(event):
            return None
        return await self.hooks.dispatch(self.input(event, tool=tool, **fields), self.errors)
