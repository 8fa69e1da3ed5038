"""What a run leaves in the conversation when it ends early: finished tool results are
kept, cut-off calls say so, the final stop event still arrives, and the next run sends
a history with alternating roles."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deputy_runtime import Agent, Chat, HookEvent, PermissionMode, Permissions, UsageLimits, tool
from deputy_runtime.chat import ScriptedProvider, reply, tool_call, tool_calls
from deputy_runtime.chat._types import ContentText, ContentToolResult, ModelRequest, Turn, Usage
from deputy_runtime.runtime import Event, StopEvent, ToolEnd

pytestmark = pytest.mark.anyio


def results_of(turn: Turn) -> dict[str, ContentToolResult]:
    return {c.request_id: c for c in turn.contents if isinstance(c, ContentToolResult)}


def roles(request: ModelRequest) -> list[str]:
    return [t.role for t in request.turns]


async def test_a_cancelled_turn_keeps_finished_results_and_marks_cut_off_calls() -> None:
    writes: list[str] = []
    hanging = anyio.Event()

    @tool(destructive=True)
    async def record(text: str) -> str:
        """Record text (a side effect the model must not repeat)."""
        writes.append(text)
        return f"recorded {text}"

    @tool(read_only=True)
    async def hang() -> str:
        """Never returns."""
        hanging.set()
        await anyio.sleep_forever()
        return "unreachable"

    provider = ScriptedProvider(
        {"a": [tool_calls(("record", {"text": "x"}), ("hang", {})), reply("after")]}
    )
    # A destructive tool runs in standard mode only from the allow list.
    permissions = Permissions(mode=PermissionMode.STANDARD, allow=frozenset({"record", "hang"}))
    agent = Agent(Chat(provider), tools=[record, hang], name="a", permissions=permissions)
    events: list[Event] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: agent.run("go", on_event=events.append))
            await hanging.wait()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert writes == ["x"]
    turns = agent.chat.get_turns()
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    calls = {c.name: c.id for c in turns[1].tool_requests}
    answered = results_of(turns[2])
    assert answered[calls["record"]].value == "recorded x"
    assert answered[calls["record"]].error is None
    assert "cancelled while this tool call was running" in (answered[calls["hang"]].error or "")
    # The event stream agrees with the history, and the stop event still comes last.
    ends = {e.tool_name: e.error for e in events if isinstance(e, ToolEnd)}
    assert ends == {"record": None}
    assert isinstance(events[-1], StopEvent)
    assert events[-1].stop_reason == "interrupted"
    # The next run sends the real result, not an invitation to write again.
    assert (await agent.run("next")).response == "after"
    sent = provider.request_log[-1][1]
    # The cut-off turn's results and the new task share one user turn.
    assert roles(sent) == ["user", "assistant", "user"]
    assert results_of(sent.turns[2])[calls["record"]].value == "recorded x"
    assert sent.turns[2].contents[-1] == ContentText("next")


@pytest.mark.parametrize("ending", ["cancel", "limit", "interrupt"])
async def test_a_task_left_unanswered_is_merged_into_the_next_run(ending: str) -> None:
    started = anyio.Event()

    async def slow(request: ModelRequest) -> Any:
        started.set()
        await anyio.sleep_forever()

    script: list[Any] = [slow, reply("answer")] if ending == "cancel" else [reply("answer")]
    provider = ScriptedProvider({"a": script})
    agent = Agent(Chat(provider), name="a")
    with anyio.fail_after(10):
        if ending == "cancel":
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.run, "first task")
                await started.wait()
                tg.cancel_scope.cancel()
        elif ending == "limit":
            result = await agent.run("first task", usage_limits=UsageLimits(max_requests=0))
            assert result.stop_reason == "request_limit"
        else:

            async def interrupt_first(hook_input: Any) -> None:
                agent.interrupt()

            handle = agent.hooks.add(HookEvent.UserPromptSubmit, interrupt_first)
            result = await agent.run("first task")
            assert result.stop_reason == "interrupted"
            agent.hooks.remove(handle)
    assert [t.role for t in agent.chat.get_turns()] == ["user"]
    assert (await agent.run("second task")).response == "answer"
    sent = provider.request_log[-1][1]
    assert roles(sent) == ["user"]
    texts = [c.text for c in sent.turns[0].contents if isinstance(c, ContentText)]
    assert texts == ["first task", "second task"]


async def test_a_host_history_with_unanswered_calls_is_repaired_before_the_task() -> None:
    provider = ScriptedProvider({"a": [reply("fine")]})
    agent = Agent(Chat(provider), name="a")
    agent.chat.set_turns(
        [Turn("user", (ContentText("earlier"),)), tool_calls(("lookup", {"k": 1})).turn()]
    )
    assert (await agent.run("now")).response == "fine"
    sent = provider.request_log[-1][1]
    assert roles(sent) == ["user", "assistant", "user"]
    repaired = [c for c in sent.turns[2].contents if isinstance(c, ContentToolResult)]
    assert len(repaired) == 1
    assert repaired[0].error
    assert sent.turns[2].contents[-1] == ContentText("now")


async def test_calls_of_a_reply_past_a_limit_are_answered_as_not_run() -> None:
    # The first turn's call runs; the second reply passes the token limit, so its call
    # never runs and must not be answered with the first turn's result.
    @tool(read_only=True)
    def count() -> str:
        """Count."""
        return "counted"

    small = Usage(requests=1, input_tokens=5, output_tokens=5)
    big = Usage(requests=1, input_tokens=100, output_tokens=5)
    provider = ScriptedProvider(
        {"a": [tool_call("count", {}, usage=small), tool_call("count", {}, usage=big)]}
    )
    agent = Agent(
        Chat(provider), tools=[count], name="a", usage_limits=UsageLimits(max_total_tokens=50)
    )
    result = await agent.run("go")
    assert result.stop_reason == "total_token_limit"
    turns = agent.chat.get_turns()
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert [r.value for r in results_of(turns[2]).values()] == ["counted"]
    [last] = results_of(turns[4]).values()
    assert (last.value, last.error) == (None, "The run stopped before this tool call ran.")
