"""Hooks: host callbacks that observe and steer an agent at fixed points of its run.

Hooks for one event run in registration order; the first that returns a non-``None``
decision wins and later ones do not run. An error in a ``PreToolUse`` hook denies the
call (fail closed); errors in other hooks are recorded and the next hook runs.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from enum import StrEnum
from typing import Any, Literal

import msgspec

__all__ = ["HookCallback", "HookDecision", "HookEvent", "HookInput", "HookMatcher", "Hooks"]


class HookEvent(StrEnum):
    """The 14 points at which hooks run.

    ``PreCompact`` fires before a conversation is compacted (a ``deny`` skips that
    compaction, a ``stop`` ends the run) and ``PostCompact`` after it; both carry
    ``reason="auto"``, ``context_tokens`` (the estimated request size before, resp.
    after) and ``context_window``.
    """

    PreToolUse = "PreToolUse"
    PostToolUse = "PostToolUse"
    PostToolUseFailure = "PostToolUseFailure"
    PermissionRequest = "PermissionRequest"
    Stop = "Stop"
    SubagentStart = "SubagentStart"
    SubagentStop = "SubagentStop"
    UserPromptSubmit = "UserPromptSubmit"
    Notification = "Notification"
    ConfigChange = "ConfigChange"
    PreCompact = "PreCompact"
    PostCompact = "PostCompact"
    SessionStart = "SessionStart"
    SessionEnd = "SessionEnd"


#: Events forwarded from a subagent to its lead's hooks always.
ALWAYS_FORWARDED = frozenset(
    {HookEvent.PreToolUse, HookEvent.PostToolUse, HookEvent.PostToolUseFailure}
)
#: Events that can never be forwarded from a subagent.
NEVER_FORWARDED = frozenset(
    {HookEvent.PermissionRequest, HookEvent.SubagentStart, HookEvent.SubagentStop}
)


class HookInput(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What a hook callback receives. Fields that do not apply to an event are ``None``.

    Inside a delegation ``delegation_id`` and the parent ids are set, and ``agent_id`` is
    the subagent's own id, also when the lead's hooks run for a forwarded event. For
    SubagentStart/SubagentStop (fired on the lead) ``agent_id`` is the lead's and the
    ``child_*`` fields, ``status`` and ``task`` describe the delegation.
    """

    event: HookEvent
    agent_id: str
    agent_name: str | None = None
    run_id: str | None = None
    working_dir: str | None = None
    delegation_id: str | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    tool_result: Any = None
    tool_error: str | None = None
    permission_mode: str | None = None
    permission_reason: str | None = None
    prompt: str | None = None
    reason: str | None = None
    message: str | None = None
    key: str | None = None
    old_value: Any = None
    new_value: Any = None
    task: str | None = None
    status: str | None = None
    child_agent_id: str | None = None
    child_agent_name: str | None = None
    child_run_id: str | None = None
    result: str | None = None
    error: str | None = None
    context_tokens: int | None = None
    context_window: int | None = None


class HookDecision(msgspec.Struct, frozen=True, gc=False):
    """A hook's verdict. Build one with :meth:`allow`, :meth:`deny` or :meth:`stop`.

    PreToolUse: allow, deny (the model sees ``reason``) or stop the run. PostToolUse:
    stop the run. PermissionRequest: allow a denied call (agent's own calls only) or
    replace the denial reason with deny.
    """

    decision: Literal["allow", "deny", "stop"]
    reason: str = ""

    @classmethod
    def allow(cls) -> HookDecision:
        """Let the call go ahead."""
        return cls("allow")

    @classmethod
    def deny(cls, reason: str) -> HookDecision:
        """Refuse the call; ``reason`` goes back to the model."""
        return cls("deny", reason)

    @classmethod
    def stop(cls, reason: str = "stopped by hook") -> HookDecision:
        """End the run at the next boundary with stop reason ``hook_requested_stop``."""
        return cls("stop", reason)


HookCallback = Callable[[HookInput], "HookDecision | Awaitable[HookDecision | None] | None"]


class HookMatcher:
    """One registered callback, optionally limited to tool names matching a regex.

    A matcher with a pattern never matches events that carry no tool name.
    """

    __slots__ = ("_regex", "callback", "event", "pattern")

    def __init__(
        self, event: HookEvent, callback: HookCallback, pattern: str | None = None
    ) -> None:
        self.event = event
        self.callback = callback
        self.pattern = pattern
        try:
            self._regex = re.compile(pattern) if pattern is not None else None
        except (re.error, TypeError) as exc:
            raise ValueError(
                f"Hook matcher for {event.value} ({_callback_name(callback)}): {pattern!r} "
                f"is not a valid regular expression ({exc}); expected a regex matched "
                "against the whole tool name, such as 'write_.*' or 'read_file|grep_files'"
            ) from None

    def __repr__(self) -> str:
        return f"HookMatcher({self.event.value}, pattern={self.pattern!r})"

    def matches(self, tool_name: str | None) -> bool:
        """Whether this matcher applies to a call of ``tool_name``."""
        if self._regex is None:
            return True
        return tool_name is not None and self._regex.fullmatch(tool_name) is not None


def _callback_name(callback: HookCallback) -> str:
    return getattr(callback, "__qualname__", None) or type(callback).__name__


class Hooks:
    """A registry of hook callbacks, dispatched in registration order.

    A registry may be shared; subagents look their lead's registry up live at each event,
    so hooks added to the lead later still apply to running subagents.
    """

    __slots__ = ("_by_event",)

    def __init__(self, matchers: Iterable[HookMatcher] = ()) -> None:
        self._by_event: dict[HookEvent, tuple[HookMatcher, ...]] = {}
        for m in matchers:
            self._append(m)

    def add(
        self, event: HookEvent | str, callback: HookCallback, *, matcher: str | None = None
    ) -> HookMatcher:
        """Register ``callback`` for ``event``; ``matcher`` is a regex on the tool name."""
        try:
            hook_event = HookEvent(event)
        except ValueError:
            names = ", ".join(e.value for e in HookEvent)
            raise ValueError(f"Unknown hook event {event!r}; expected one of: {names}") from None
        if not callable(callback):
            raise TypeError(f"Hook callback for {hook_event.value} must be callable")
        m = HookMatcher(hook_event, callback, matcher)
        self._append(m)
        return m

    def on(
        self, event: HookEvent | str, *, matcher: str | None = None
    ) -> Callable[[HookCallback], HookCallback]:
        """Decorator form of :meth:`add`."""

        def register(callback: HookCallback) -> HookCallback:
            self.add(event, callback, matcher=matcher)
            return callback

        return register

    def remove(self, matcher: HookMatcher) -> None:
        """Unregister a matcher returned by :meth:`add`."""
        current = self._by_event.get(matcher.event, ())
        self._by_event[matcher.event] = tuple(m for m in current if m is not matcher)

    def _append(self, m: HookMatcher) -> None:
        # Tuples are replaced, never mutated, so a dispatch in progress keeps its snapshot.
        self._by_event[m.event] = (*self._by_event.get(m.event, ()), m)

    def has(self, event: HookEvent) -> bool:
        """Whether any callback is registered for ``event`` (a cheap fast-path check)."""
        return bool(self._by_event.get(event))

    def matchers(self, event: HookEvent) -> tuple[HookMatcher, ...]:
        """The matchers for ``event`` in registration order."""
        return self._by_event.get(event, ())

    async def dispatch(self, hook_input: HookInput, errors: list[str]) -> HookDecision | None:
        """Run the matching callbacks in order; the first non-``None`` decision wins.

        An error in a PreToolUse callback becomes a deny decision (fail closed). Other
        errors are appended to ``errors`` as ``"EVENT: message"`` and the next hook runs.
        """
        for m in self._by_event.get(hook_input.event, ()):
            if not m.matches(hook_input.tool_name):
                continue
            try:
                outcome = m.callback(hook_input)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            except Exception as exc:
                errors.append(f"{hook_input.event.value}: {exc}")
                if hook_input.event is HookEvent.PreToolUse:
                    return HookDecision.deny(f"Hook error: {exc}")
                continue
            if outcome is None:
                continue
            if not isinstance(outcome, HookDecision):
                message = f"hook returned {type(outcome).__name__}, expected HookDecision or None"
                errors.append(f"{hook_input.event.value}: {message}")
                if hook_input.event is HookEvent.PreToolUse:
                    return HookDecision.deny(f"Hook error: {message}")
                continue
            return outcome
        return None
