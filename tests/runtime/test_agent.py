"""The Agent loop: requests, concurrent tool calls, permissions, hooks, limits, cancellation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    Agent,
    BudgetExceeded,
    Chat,
    HookDecision,
    HookEvent,
    Hooks,
    PermissionAllow,
    PermissionDeny,
    PermissionMode,
    Permissions,
    RequestLimitExceeded,
    RunActiveError,
    UsageLimits,
    tool,
    tools_file,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_call, tool_calls
from deputy_runtime.chat._types import ContentToolResult, ModelRequest, Usage
from deputy_runtime.runtime import StopEvent, ToolEnd, ToolStart, UsageEvent
from tests.runtime.helpers import append_then

pytestmark = pytest.mark.anyio


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


@tool(destructive=True)
def wipe(target: str) -> str:
    """Destroys things."""
    raise AssertionError("wipe must never run in these tests")


def results_of(turn_contents: tuple[Any, ...]) -> list[ContentToolResult]:
    return [c for c in turn_contents if isinstance(c, ContentToolResult)]


def make_agent(script: Any, tools: Any = (), **kw: Any) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider({"agent": script})
    return Agent(Chat(provider), tools=tools, name="agent", **kw), provider


async def test_tool_round_trip_and_usage() -> None:
    agent, provider = make_agent([tool_call("add", {"a": 2, "b": 3}), reply("5")], [add])
    result = await agent.run("add 2 and 3")
    assert result.stop_reason == "complete"
    assert result.response == "5"
    assert result.usage.requests == 2
    assert result.usage.tool_calls == 1
    assert result.usage.input_tokens == 20
    tool_results = results_of(result.turns[2].contents)
    assert tool_results[0].value == 5
    assert agent.chat.get_turns() == list(result.turns)
    provider.assert_complete()


async def test_second_request_sees_tool_result() -> None:
    seen: list[ModelRequest] = []

    def second(request: ModelRequest) -> str:
        seen.append(request)
        return "ok"

    agent, _ = make_agent([tool_call("add", {"a": 1, "b": 1}), second], [add])
    await agent.run("go")
    last = seen[0].turns[-1]
    assert last.role == "user"
    assert results_of(last.contents)[0].value == 2
    assert [t.name for t in seen[0].tools] == ["add"]


async def test_concurrent_tool_calls_run_concurrently_and_keep_order() -> None:
    # Each tool waits until every other has started: only possible if they overlap.
    started = 0
    all_started = anyio.Event()

    @tool(read_only=True)
    async def meet(label: str) -> str:
        """Wait for the others."""
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await all_started.wait()
        return f"done-{label}"

    calls = tool_calls(*[("meet", {"label": x}) for x in ("a", "b", "c")])
    agent, _ = make_agent([calls, reply("fin")], [meet])
    with anyio.fail_after(5):
        result = await agent.run("go")
    values = [r.value for r in results_of(result.turns[2].contents)]
    assert values == ["done-a", "done-b", "done-c"]


async def test_tool_error_goes_to_model_not_host() -> None:
    agent, _ = make_agent([tool_call("explode", {}), reply("sorry")], [explode])
    result = await agent.run("go")
    assert result.stop_reason == "complete"
    error = results_of(result.turns[2].contents)[0].error
    assert error is not None
    assert "kaboom" in error


async def test_bad_arguments_name_the_argument() -> None:
    agent, _ = make_agent([tool_call("add", {"a": "x", "b": 1}), reply("hm")], [add])
    result = await agent.run("go")
    error = results_of(result.turns[2].contents)[0].error
    assert error is not None
    assert "a" in error
    assert error.startswith("Invalid arguments")


async def test_unknown_tool_lists_available() -> None:
    agent, _ = make_agent([tool_call("nope", {}), reply("ok")], [add])
    result = await agent.run("go")
    error = results_of(result.turns[2].contents)[0].error
    assert error == "Unknown tool: nope. Available tools: add"


async def test_denied_tool_never_runs_and_model_sees_reason(tmp_path: Path) -> None:
    agent, _ = make_agent(
        [tool_call("wipe", {"target": "x"}), reply("ok")],
        [wipe],
        permissions=Permissions(mode=PermissionMode.READONLY),
        working_dir=tmp_path,
    )
    result = await agent.run("go")
    error = results_of(result.turns[2].contents)[0].error
    assert error is not None
    assert error.startswith("Permission denied:")
    assert "readonly" in error


async def test_can_use_tool_that_raises_denies() -> None:
    def broken(name: str, args: Any, context: Any) -> Any:
        raise ValueError("policy store down")

    agent, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 1}), reply("ok")],
        [add],
        permissions=Permissions(mode=PermissionMode.FULL, can_use_tool=broken),
    )
    result = await agent.run("go")
    error = results_of(result.turns[2].contents)[0].error
    assert error is not None
    assert "policy store down" in error


async def test_can_use_tool_gets_call_context() -> None:
    contexts: list[Any] = []

    async def gate(name: str, args: Any, context: Any) -> PermissionAllow | PermissionDeny:
        contexts.append(context)
        return PermissionAllow() if args["a"] == 1 else PermissionDeny("only a=1")

    calls = tool_calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 1}))
    agent, _ = make_agent([calls, reply("ok")], [add], permissions=Permissions(can_use_tool=gate))
    result = await agent.run("go")
    first, second = results_of(result.turns[2].contents)
    assert first.value == 2
    assert second.error == "Permission denied: only a=1"
    assert {c.tool_call_id for c in contexts} == {c.id for c in calls.tool_requests}
    assert all(c.agent_id == agent.agent_id for c in contexts)


async def test_pre_tool_use_hook_that_raises_denies() -> None:
    hooks = Hooks()

    def broken(_: Any) -> None:
        raise RuntimeError("audit offline")

    hooks.add(HookEvent.PreToolUse, broken)
    agent, _ = make_agent([tool_call("add", {"a": 1, "b": 1}), reply("ok")], [add], hooks=hooks)
    result = await agent.run("go")
    error = results_of(result.turns[2].contents)[0].error
    assert error == "Denied by hook: Hook error: audit offline"
    assert result.hook_errors == ("PreToolUse: audit offline",)


async def test_pre_tool_use_matcher_and_first_decision_wins() -> None:
    hooks = Hooks()
    order: list[str] = []
    hooks.add(HookEvent.PreToolUse, lambda i: append_then(order, "other", None), matcher="other")
    hooks.add(HookEvent.PreToolUse, lambda i: append_then(order, "first", HookDecision.deny("no")))
    hooks.add(HookEvent.PreToolUse, lambda i: append_then(order, "second", HookDecision.allow()))
    agent, _ = make_agent([tool_call("add", {"a": 1, "b": 1}), reply("ok")], [add], hooks=hooks)
    result = await agent.run("go")
    assert order == ["first"]
    assert results_of(result.turns[2].contents)[0].error == "Denied by hook: no"


async def test_post_tool_use_can_stop_the_run() -> None:
    hooks = Hooks()
    hooks.add(HookEvent.PostToolUse, lambda i: HookDecision.stop("enough"))
    agent, provider = make_agent(
        [tool_call("add", {"a": 1, "b": 1}), reply("never")], [add], hooks=hooks
    )
    result = await agent.run("go")
    assert result.stop_reason == "hook_requested_stop"
    assert provider.requests == 1
    assert results_of(result.turns[2].contents)[0].value == 2


@tool(destructive=True)
def stamp(text: str) -> str:
    """Destructive in name only: returns its input."""
    return f"stamped {text}"


async def test_permission_request_hook_can_allow_own_call(tmp_path: Path) -> None:
    # Standard mode refuses a destructive tool; the hook approves this one call.
    hooks = Hooks()
    hooks.add(HookEvent.PermissionRequest, lambda i: HookDecision.allow(), matcher="stamp")
    agent, _ = make_agent(
        [tool_call("stamp", {"text": "x"}), reply("ok")],
        [stamp],
        hooks=hooks,
        working_dir=tmp_path,
    )
    result = await agent.run("go")
    assert results_of(result.turns[2].contents)[0].value == "stamped x"


@pytest.mark.parametrize("source", ["deny_list", "raising_callback", "junk_callback"])
async def test_final_denials_are_never_put_to_permission_request_hooks(
    tmp_path: Path, source: str
) -> None:
    asked: list[str] = []

    def approve(hook_input: Any) -> HookDecision:
        asked.append(hook_input.tool_name)
        return HookDecision.allow()

    def raising(name: str, arguments: Any, context: Any) -> Any:
        raise RuntimeError("policy service down")

    permissions = {
        "deny_list": Permissions(deny=frozenset({"stamp"})),
        # Full mode, so only the callback can deny.
        "raising_callback": Permissions(mode=PermissionMode.FULL, can_use_tool=raising),
        "junk_callback": Permissions(
            mode=PermissionMode.FULL,
            can_use_tool=lambda *a: "yes",  # type: ignore[arg-type]  # junk under test
        ),
    }[source]
    hooks = Hooks()
    hooks.add(HookEvent.PermissionRequest, approve)
    agent, _ = make_agent(
        [tool_call("stamp", {"text": "x"}), reply("ok")],
        [stamp],
        hooks=hooks,
        permissions=permissions,
        working_dir=tmp_path,
    )
    result = await agent.run("go")
    error = results_of(result.turns[2].contents)[0].error or ""
    assert error.startswith("Permission denied:")
    assert asked == []


async def test_narrowing_mid_run_applies_to_next_call(tmp_path: Path) -> None:
    files = tools_file(tmp_path)
    agent_box: list[Agent] = []

    def narrow_then_write(request: ModelRequest) -> Any:
        agent_box[0].set_permission_mode("readonly")
        return tool_call("write_file", {"path": "late.txt", "content": "x"})

    script = [
        tool_call("write_file", {"path": "early.txt", "content": "x"}),
        narrow_then_write,
        reply("done"),
    ]
    agent, _ = make_agent(script, files, working_dir=tmp_path)
    agent_box.append(agent)
    changes: list[Any] = []
    agent.hooks.add(HookEvent.ConfigChange, lambda i: append_then(changes, i, None))
    result = await agent.run("go")
    assert (tmp_path / "early.txt").exists()
    assert not (tmp_path / "late.txt").exists()
    error = results_of(result.turns[4].contents)[0].error
    assert error is not None
    assert "readonly" in error
    assert [(c.key, c.old_value, c.new_value) for c in changes] == [
        ("permission_mode", "standard", "readonly")
    ]


async def test_widening_raises() -> None:
    agent, _ = make_agent([], permissions=Permissions(mode=PermissionMode.READONLY))
    from deputy_runtime import PermissionModeWideningError

    with pytest.raises(PermissionModeWideningError):
        agent.set_permission_mode("standard")
    assert agent.permissions.mode == "readonly"


async def test_max_requests_zero_sends_nothing() -> None:
    agent, provider = make_agent([reply("never")], usage_limits=UsageLimits(max_requests=0))
    result = await agent.run("go")
    assert result.stop_reason == "request_limit"
    assert provider.requests == 0


async def test_request_limit_stops_at_boundary() -> None:
    loop = [tool_call("add", {"a": 1, "b": 1}) for _ in range(5)]
    agent, provider = make_agent(loop, [add], usage_limits=UsageLimits(max_requests=3))
    result = await agent.run("go")
    assert result.stop_reason == "request_limit"
    assert provider.requests == 3
    # The tool calls of the last allowed response still ran (their results are answered).
    assert result.usage.tool_calls == 3
    assert result.turns[-1].role == "user"


async def test_tool_call_limit_rejects_extra_calls() -> None:
    calls = tool_calls(*[("add", {"a": i, "b": 0}) for i in range(3)])
    agent, provider = make_agent(
        [calls, reply("x")], [add], usage_limits=UsageLimits(max_tool_calls=2)
    )
    result = await agent.run("go")
    assert result.stop_reason == "tool_call_limit"
    assert provider.requests == 1
    res = results_of(result.turns[2].contents)
    assert [r.value for r in res[:2]] == [0, 1]
    assert res[2].error == "Tool call limit reached; the call did not run."


async def test_token_limit_checked_after_response() -> None:
    big = Usage(requests=1, input_tokens=60, output_tokens=50)
    script = [tool_call("add", {"a": 1, "b": 1}, usage=big), reply("never")]
    agent, provider = make_agent(script, [add], usage_limits=UsageLimits(max_total_tokens=100))
    result = await agent.run("go")
    assert result.stop_reason == "total_token_limit"
    assert provider.requests == 1
    # The open tool call is closed with an error result: the history stays valid.
    assert results_of(result.turns[-1].contents)[0].error is not None


async def test_on_exceed_error_raises_after_final_usage_event() -> None:
    agent, _ = make_agent([reply("x")], usage_limits=UsageLimits(max_requests=0, on_exceed="error"))
    events: list[Any] = []
    with pytest.raises(RequestLimitExceeded) as info:
        async for event in agent.run_stream("go"):
            events.append(event)
    assert isinstance(events[-2], UsageEvent)
    assert isinstance(events[-1], StopEvent)
    assert info.value.stop_reason == "request_limit"


async def test_budget_exceeded_for_tool_calls() -> None:
    agent, _ = make_agent(
        [tool_calls(("add", {"a": 1, "b": 1}), ("add", {"a": 1, "b": 1})), reply("x")],
        [add],
        usage_limits=UsageLimits(max_tool_calls=1, on_exceed="error"),
    )
    with pytest.raises(BudgetExceeded) as info:
        await agent.run("go")
    assert info.value.stop_reason == "tool_call_limit"


async def test_one_active_run_per_agent() -> None:
    gate = anyio.Event()

    async def slow(request: ModelRequest) -> str:
        await gate.wait()
        return "ok"

    agent, _ = make_agent([slow])
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.run, "first")
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(RunActiveError):
            await agent.run("second")
        gate.set()


async def test_interrupt_honoured_at_next_boundary() -> None:
    agent_box: list[Agent] = []

    def interrupting(request: ModelRequest) -> Any:
        agent_box[0].interrupt()
        return tool_call("add", {"a": 1, "b": 1})

    agent, provider = make_agent([interrupting, reply("never")], [add])
    agent_box.append(agent)
    result = await agent.run("go")
    assert result.stop_reason == "interrupted"
    assert provider.requests == 1
    assert "interrupted" in (results_of(result.turns[2].contents)[0].error or "")


async def test_cancelled_run_leaves_consistent_turns_and_final_stop_event() -> None:
    entered = anyio.Event()

    @tool(read_only=True)
    async def hang() -> str:
        """Never returns."""
        entered.set()
        await anyio.sleep_forever()
        return "unreachable"

    agent, _ = make_agent([tool_call("hang", {})], [hang])
    events: list[Any] = []

    async def consume() -> None:
        async for event in agent.run_stream("go"):
            events.append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await entered.wait()
        tg.cancel_scope.cancel()
    turns = agent.chat.get_turns()
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    assert results_of(turns[2].contents)[0].error is not None
    assert agent.last_result is not None
    assert agent.last_result.stop_reason == "interrupted"
    # The agent is reusable afterwards.
    agent.chat.provider = ScriptedProvider({"agent": [reply("again")]})
    assert (await agent.run("retry")).response == "again"


async def test_stream_tool_events_share_call_id() -> None:
    agent, _ = make_agent([tool_call("add", {"a": 1, "b": 2}), reply("3")], [add])
    events = [e async for e in agent.run_stream("go")]
    starts = [e for e in events if isinstance(e, ToolStart)]
    ends = [e for e in events if isinstance(e, ToolEnd)]
    assert len(starts) == len(ends) == 1
    assert starts[0].tool_call_id == ends[0].tool_call_id
    assert ends[0].result_preview == "3"
    assert {e.run_id for e in events} == {events[0].run_id}


async def test_provider_error_is_a_stop_reason() -> None:
    from deputy_runtime import ProviderError

    agent, _ = make_agent([ProviderError("upstream 500", status=500)])
    result = await agent.run("go")
    assert result.stop_reason == "provider_error"
    assert result.error is not None
    assert "upstream 500" in result.error


def test_run_sync_outside_loop() -> None:
    agent, _ = make_agent([reply("sync ok")])
    assert agent.run_sync("go").response == "sync ok"


async def test_run_sync_refuses_inside_loop() -> None:
    agent, _ = make_agent([reply("x")])
    with pytest.raises(RuntimeError, match="event loop"):
        agent.run_sync("go")
