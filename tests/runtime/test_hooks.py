"""Hooks registry: order, first decision wins, matchers, error handling, forwarding sets."""

from __future__ import annotations

from typing import Any

import pytest

from deputy_runtime import DelegationPolicy, HookDecision, HookEvent, HookInput, Hooks
from deputy_runtime.errors import DelegationBindingError
from tests.runtime.helpers import append_then

pytestmark = pytest.mark.anyio


def tool_input(
    event: HookEvent = HookEvent.PreToolUse, tool: str | None = "read_file"
) -> HookInput:
    return HookInput(event=event, agent_id="agent_x", tool_name=tool)


def test_all_fourteen_events() -> None:
    assert len(HookEvent) == 14


def test_unknown_event_is_rejected_with_the_list() -> None:
    with pytest.raises(ValueError, match="PreToolUse"):
        Hooks().add("PreToolUze", lambda i: None)


async def test_registration_order_and_first_non_none_wins() -> None:
    hooks = Hooks()
    calls: list[str] = []
    hooks.add(HookEvent.PreToolUse, lambda i: append_then(calls, "a", None))

    async def second(i: HookInput) -> HookDecision:
        calls.append("b")
        return HookDecision.deny("b says no")

    hooks.add(HookEvent.PreToolUse, second)
    hooks.add(HookEvent.PreToolUse, lambda i: append_then(calls, "c", HookDecision.allow()))
    decision = await hooks.dispatch(tool_input(), [])
    assert decision == HookDecision.deny("b says no")
    assert calls == ["a", "b"]


async def test_matcher_never_matches_events_without_tool_name() -> None:
    hooks = Hooks()
    seen: list[Any] = []
    hooks.add(HookEvent.Stop, lambda i: append_then(seen, i, None), matcher=".*")
    await hooks.dispatch(tool_input(HookEvent.Stop, tool=None), [])
    assert seen == []
    hooks.add(HookEvent.PreToolUse, lambda i: append_then(seen, i, None), matcher="read_.*")
    await hooks.dispatch(tool_input(tool="write_file"), [])
    await hooks.dispatch(tool_input(tool="read_file"), [])
    assert [i.tool_name for i in seen] == ["read_file"]


async def test_errors_fail_closed_only_for_pre_tool_use() -> None:
    hooks = Hooks()

    def boom(i: HookInput) -> None:
        raise RuntimeError("down")

    hooks.add(HookEvent.PreToolUse, boom)
    hooks.add(HookEvent.PostToolUse, boom)
    hooks.add(HookEvent.PostToolUse, lambda i: HookDecision.stop("later hook ran"))
    errors: list[str] = []
    pre = await hooks.dispatch(tool_input(), errors)
    assert pre is not None
    assert pre.decision == "deny"
    post = await hooks.dispatch(tool_input(HookEvent.PostToolUse), errors)
    assert post == HookDecision.stop("later hook ran")
    assert errors == ["PreToolUse: down", "PostToolUse: down"]


async def test_non_decision_result_is_an_error() -> None:
    hooks = Hooks()
    hooks.add(HookEvent.PreToolUse, lambda i: "yes")  # type: ignore[arg-type,return-value]
    errors: list[str] = []
    decision = await hooks.dispatch(tool_input(), errors)
    assert decision is not None
    assert decision.decision == "deny"
    assert "expected HookDecision" in errors[0]


async def test_remove_and_decorator() -> None:
    hooks = Hooks()

    @hooks.on("PreToolUse")
    def deny(i: HookInput) -> HookDecision:
        return HookDecision.deny("x")

    assert hooks.has(HookEvent.PreToolUse)
    hooks.remove(hooks.matchers(HookEvent.PreToolUse)[0])
    assert not hooks.has(HookEvent.PreToolUse)


def test_observers_validation() -> None:
    # Names are accepted and normalised at runtime; the field is annotated as the HookEvents
    # they become.
    policy = DelegationPolicy(observers=("Stop", "Stop", HookEvent.Notification))  # type: ignore[arg-type]
    assert policy.observers == (HookEvent.Stop, HookEvent.Notification)
    assert HookEvent.PreToolUse in policy.forwarded_events
    for never in ("PermissionRequest", "SubagentStart", "SubagentStop"):
        with pytest.raises(DelegationBindingError, match="never forwarded"):
            DelegationPolicy(observers=(never,))  # type: ignore[arg-type]  # names: see above
    with pytest.raises(DelegationBindingError, match="not a HookEvent"):
        DelegationPolicy(observers=("Nope",))  # type: ignore[arg-type]  # not a name: under test


async def test_session_hooks_and_warning_events() -> None:
    from deputy_runtime import Agent, Chat
    from deputy_runtime.chat import ScriptedProvider, reply
    from deputy_runtime.runtime import WarningEvent

    hooks = Hooks()
    seen: list[str] = []
    hooks.add(HookEvent.SessionStart, lambda i: append_then(seen, "start", None))
    hooks.add(HookEvent.SessionEnd, lambda i: append_then(seen, f"end:{i.reason}", None))

    def broken_stop(i: HookInput) -> None:
        raise RuntimeError("audit log full")

    hooks.add(HookEvent.UserPromptSubmit, broken_stop)
    agent = Agent(
        Chat(ScriptedProvider({"a": [reply("one"), reply("two")]})), name="a", hooks=hooks
    )
    events = [e async for e in agent.run_stream("first")]
    warnings = [e for e in events if isinstance(e, WarningEvent)]
    assert [w.message for w in warnings] == ["hook failed: UserPromptSubmit: audit log full"]
    assert agent.last_result is not None
    assert agent.last_result.hook_errors == ("UserPromptSubmit: audit log full",)
    await agent.run("second")  # same session: no second SessionStart
    await agent.end_session("shutdown")
    await agent.end_session("again")  # once per session
    assert seen == ["start", "end:shutdown"]
