"""Single-agent runtime edge cases: public signatures, limits, hooks, event logs, streams.

Everything runs the real Agent loop on a ScriptedProvider keyed per agent name; tools are
real functions, concurrency is real (events the tools wait on), logs are real streams.
"""

from __future__ import annotations

import inspect
import io
import re
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    STOP_REASONS,
    Agent,
    AgentResult,
    BudgetExceeded,
    Chat,
    EventLogWriter,
    HookDecision,
    HookEvent,
    PermissionMode,
    Permissions,
    RequestLimitExceeded,
    Tool,
    UsageLimits,
    decode_event,
    tool,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_call, tool_calls
from deputy_runtime.chat._types import AssistantTurn, ContentText, Usage
from deputy_runtime.runtime import RunStart, StopEvent, TextDelta, UsageEvent

pytestmark = pytest.mark.anyio

AGENT_ID = re.compile(r"^agent_[0-9a-f]{32}$")
RUN_ID = re.compile(r"^run_[0-9a-f]{32}$")


def _agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider({"a": script})
    return Agent(Chat(provider), name="a", **kwargs), provider


def _text(text: str, usage: Usage) -> AssistantTurn:
    return AssistantTurn((ContentText(text),), usage, finish_reason="stop")


# -- binding public names --------------------------------------------------------------------


def test_agent_signature_and_defaults_match_design() -> None:
    params = inspect.signature(Agent.__init__).parameters
    assert list(params)[:2] == ["self", "chat"]
    expected = {
        "tools": (),
        "system_prompt": None,
        "permissions": None,
        "usage_limits": None,
        "hooks": None,
        "working_dir": None,
        "name": None,
    }
    for name, default in expected.items():
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].default == default, name
    for method in ("run", "run_stream", "run_sync", "interrupt", "set_permission_mode"):
        assert callable(getattr(Agent, method)), method


def test_usage_limits_defaults_and_stop_reasons_match_design() -> None:
    limits = UsageLimits()
    assert (
        limits.max_requests,
        limits.max_tool_calls,
        limits.max_input_tokens,
        limits.max_output_tokens,
        limits.max_total_tokens,
        limits.max_cost_usd,
        limits.on_exceed,
    ) == (25, None, None, None, None, None, "stop")
    assert STOP_REASONS == (
        "complete",
        "request_limit",
        "tool_call_limit",
        "input_token_limit",
        "output_token_limit",
        "total_token_limit",
        "cost_limit",
        "hook_requested_stop",
        "interrupted",
        "provider_error",
        "error",
        "setup_error",
        "not_started",
        "lease_lost",
        "delegation_error",
        "delegation_stopped",
        "time_limit",
        "delegation_limit",
        "invalid_output",
        "context_window",
    )
    assert [e.value for e in HookEvent] == [
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "UserPromptSubmit",
        "Notification",
        "ConfigChange",
        "PreCompact",
        "PostCompact",
        "SessionStart",
        "SessionEnd",
    ]
    assert AgentResult.__struct_fields__[:6] == (
        "response",
        "turns",
        "usage",
        "stop_reason",
        "agent_id",
        "run_id",
    )


# -- usage accounting -------------------------------------------------------------------------


async def test_cached_tokens_and_reported_cost_are_summed_per_run() -> None:
    first = Usage(requests=1, input_tokens=100, output_tokens=10, cached_input_tokens=60)
    priced = Usage(
        requests=1, input_tokens=50, output_tokens=5, cached_input_tokens=20, cost_usd=0.25
    )
    calls: list[str] = []

    @tool(read_only=True)
    def probe() -> str:
        """Record a call."""
        calls.append("probe")
        return "ok"

    turn = tool_call("probe", {}, usage=first)
    agent, _ = _agent([turn, _text("done", priced)], tools=[probe])
    result = await agent.run("go")
    assert result.stop_reason == "complete"
    assert calls == ["probe"]
    usage = result.usage
    assert (usage.requests, usage.tool_calls) == (2, 1)
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (150, 15, 80)
    # Cached input tokens are part of input, never counted twice.
    assert usage.total_tokens == 165
    assert usage.cost_usd == pytest.approx(0.25)

    # A second run on the same agent counts from zero; no price reported means cost None.
    agent2, _ = _agent([_text("a", first)])
    result2 = await agent2.run("again")
    assert result2.usage.cost_usd is None
    assert result2.usage.cached_input_tokens == 60


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("max_input_tokens", 50, "input_token_limit"),
        ("max_output_tokens", 5, "output_token_limit"),
        ("max_total_tokens", 60, "total_token_limit"),
        ("max_cost_usd", 0.05, "cost_limit"),
    ],
)
@pytest.mark.parametrize("on_exceed", ["stop", "error"])
async def test_every_token_and_cost_limit_stops_after_the_response(
    field: str, value: float, reason: str, on_exceed: str
) -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def work() -> str:
        """Do some work."""
        ran.append("work")
        return "worked"

    usage = Usage(requests=1, input_tokens=100, output_tokens=10, cost_usd=0.10)
    agent, provider = _agent(
        [tool_call("work", {}, usage=usage), reply("never requested")], tools=[work]
    )
    limits = UsageLimits(**{field: value}, on_exceed=on_exceed)  # type: ignore[arg-type]
    if on_exceed == "stop":
        result = await agent.run("go", usage_limits=limits)
    else:
        with pytest.raises(BudgetExceeded) as info:
            await agent.run("go", usage_limits=limits)
        assert info.value.stop_reason == reason
        assert isinstance(info.value.result, AgentResult)
        result = info.value.result
    assert result.stop_reason == reason
    # The limit is checked after the response: the requested tool never ran and no
    # second request was made; the open call got an error result (consistent history).
    assert ran == []
    assert len(provider.requests_for("a")) == 1
    assert result.turns[-1].role == "user"
    assert agent.last_result is result


async def test_rejected_tool_calls_count_against_the_tool_call_limit() -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def allowed() -> str:
        """Allowed."""
        ran.append("allowed")
        return "ok"

    @tool(read_only=True)
    def blocked() -> str:
        """Denied by the deny list."""
        ran.append("blocked")
        return "no"

    agent, provider = _agent(
        [tool_call("blocked", {}), tool_call("allowed", {}), reply("unreachable")],
        tools=[allowed, blocked],
        permissions=Permissions(mode=PermissionMode.STANDARD, deny=frozenset({"blocked"})),
        usage_limits=UsageLimits(max_tool_calls=1),
    )
    result = await agent.run("go")
    assert ran == []
    assert result.stop_reason == "tool_call_limit"
    assert result.usage.tool_calls == 1
    second = provider.requests_for("a")[1]
    denied = second.turns[-1].contents[0]
    assert "deny list" in (denied.error or "")  # type: ignore[union-attr]


async def test_one_raising_tool_does_not_cancel_its_concurrent_siblings() -> None:
    started = {"slow_a": anyio.Event(), "slow_b": anyio.Event()}

    async def waits_for_sibling(me: str, other: str) -> str:
        started[me].set()
        await started[other].wait()  # both must be running at once to get past this
        return f"{me} done"

    def boom() -> str:
        raise RuntimeError("tool exploded")

    tools = [
        Tool(
            name=name,
            description=name,
            parameters={"type": "object", "properties": {}},
            function=function,
            read_only=True,
        )
        for name, function in (
            ("slow_a", lambda: waits_for_sibling("slow_a", "slow_b")),
            ("boom", boom),
            ("slow_b", lambda: waits_for_sibling("slow_b", "slow_a")),
        )
    ]
    agent, provider = _agent(
        [tool_calls(("slow_a", {}), ("boom", {}), ("slow_b", {})), reply("done")],
        tools=tools,
    )
    with anyio.fail_after(10):
        result = await agent.run("go")
    assert result.stop_reason == "complete"
    results = provider.requests_for("a")[1].turns[-1].contents
    assert [getattr(r, "value", None) for r in results] == ["slow_a done", None, "slow_b done"]
    assert "tool exploded" in (results[1].error or "")  # type: ignore[union-attr]


# -- hooks that the suite did not drive on a plain agent ----------------------------------


async def test_session_start_fires_once_per_agent_and_stop_gets_the_reason() -> None:
    agent, _ = _agent(["one", "two"])
    sessions: list[str | None] = []
    stops: list[tuple[str | None, str | None]] = []
    agent.hooks.add(HookEvent.SessionStart, lambda i: sessions.append(i.run_id))
    agent.hooks.add(HookEvent.Stop, lambda i: stops.append((i.run_id, i.reason)))
    first = await agent.run("first")
    second = await agent.run("second")
    assert sessions == [first.run_id]
    assert stops == [(first.run_id, "complete"), (second.run_id, "complete")]


async def test_user_prompt_submit_deny_sends_no_request() -> None:
    agent, provider = _agent(["never"])
    prompts: list[str | None] = []

    def gate(i: Any) -> HookDecision:
        prompts.append(i.prompt)
        return HookDecision.deny("not this task")

    agent.hooks.add(HookEvent.UserPromptSubmit, gate)
    result = await agent.run("forbidden task")
    assert prompts == ["forbidden task"]
    assert result.stop_reason == "hook_requested_stop"
    assert provider.requests_for("a") == []
    assert result.usage.requests == 0


async def test_permission_request_deny_replaces_the_reason_the_model_sees() -> None:
    @tool(destructive=True)
    def wipe() -> str:
        """Destroys things."""
        raise AssertionError("must not run")

    agent, provider = _agent([tool_call("wipe", {}), reply("ok")], tools=[wipe])
    agent.hooks.add(HookEvent.PermissionRequest, lambda i: HookDecision.deny("ask the owner first"))
    result = await agent.run("go")
    assert result.stop_reason == "complete"
    error = provider.requests_for("a")[1].turns[-1].contents[0].error  # type: ignore[union-attr]
    assert error == "Permission denied: ask the owner first"


async def test_stop_hook_fires_when_a_limit_raises() -> None:
    agent, _ = _agent(
        [tool_call("missing", {}), reply("unreachable")],
        usage_limits=UsageLimits(max_requests=1, on_exceed="error"),
    )
    stops: list[str | None] = []
    agent.hooks.add(HookEvent.Stop, lambda i: stops.append(i.reason))
    with pytest.raises(RequestLimitExceeded):
        await agent.run("go")
    assert stops == ["request_limit"]


# -- events ---------------------------------------------------------------------------------


async def test_event_log_writer_on_a_stream_writes_one_decodable_line_per_event() -> None:
    @tool(read_only=True)
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    agent, _ = _agent([tool_call("echo", {"text": "hi"}), reply("bye")], tools=[echo])
    buffer = io.BytesIO()
    writer = EventLogWriter(stream=buffer)
    result = await agent.run("go", on_event=writer)
    writer.close()  # a stream it does not own stays open
    assert not buffer.closed
    events = [decode_event(line) for line in buffer.getvalue().splitlines()]
    assert isinstance(events[0], RunStart)
    assert isinstance(events[-2], UsageEvent)
    assert isinstance(events[-1], StopEvent)
    assert events[-1].stop_reason == "complete"
    assert {(e.agent_id, e.run_id) for e in events} == {(result.agent_id, result.run_id)}
    assert AGENT_ID.match(result.agent_id)
    assert RUN_ID.match(result.run_id)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolStart") < kinds.index("ToolEnd")


async def test_run_stream_of_a_plain_agent_streams_text_and_ends_with_stop() -> None:
    agent, _ = _agent(["streamed answer"])
    events = [event async for event in agent.run_stream("go")]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "streamed answer"
    assert isinstance(events[-1], StopEvent)
    assert events[-1].stop_reason == "complete"
    assert agent.last_result is not None
    assert agent.last_result.response == "streamed answer"
