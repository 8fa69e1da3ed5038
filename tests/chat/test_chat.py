"""Chat: the tool loop, turns, copies and the sync wrapper, over the scripted provider."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    CANCELLED_TOOL_CALL_ERROR,
    AssistantTurn,
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    ScriptedProvider,
    StreamDelta,
    ToolLoopLimitError,
    Turn,
    Usage,
    reply,
    tool_call,
    tool_calls,
)
from deputy_runtime.errors import ScriptError
from deputy_runtime.tools import Tool

pytestmark = pytest.mark.anyio

OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def make_tool(name: str, function: Any, parameters: dict[str, Any] | None = None) -> Tool:
    return Tool(name, f"The {name} tool.", parameters or OBJECT, function)


def results_of(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


async def test_text_reply_records_one_exchange() -> None:
    provider = ScriptedProvider(["Hello there."])
    chat = Chat(provider, "Be brief.")
    assert await chat.chat_async("Hi") == "Hello there."
    turns = chat.get_turns()
    assert [t.role for t in turns] == ["user", "assistant"]
    assert turns[0].contents == (ContentText("Hi"),)
    sent = provider.requests_for(None)[0]
    assert sent.system_prompt == "Be brief."
    assert sent.tools == ()
    assert chat.get_tokens() == [provider.usage]
    provider.assert_complete()


async def test_tool_round_trip_sends_results_and_specs() -> None:
    def check(request: ModelRequest) -> str:
        (result,) = results_of(request)
        assert result.value == "sunny in Paris"
        return "It is sunny."

    provider = ScriptedProvider([tool_call("weather", {"city": "Paris"}, id="c1"), check])
    weather = make_tool(
        "weather",
        lambda city: f"sunny in {city}",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    chat = Chat(provider, tools=[weather])
    assert await chat.chat_async("Weather?") == "It is sunny."
    assert [t.role for t in chat.get_turns()] == ["user", "assistant", "user", "assistant"]
    first = provider.requests_for(None)[0]
    assert [s.name for s in first.tools] == ["weather"]
    assert first.tools[0].parameters == weather.parameters
    assert len(chat.get_tokens()) == 2
    provider.assert_complete()


async def test_tool_calls_of_one_turn_run_concurrently_and_keep_order() -> None:
    # Each tool waits for an event only the other sets: run one at a time, they deadlock.
    first_started, second_started = anyio.Event(), anyio.Event()

    async def first() -> str:
        first_started.set()
        await second_started.wait()
        await anyio.sleep(0)  # finish after `second`
        await anyio.sleep(0)
        return "first done"

    async def second() -> str:
        second_started.set()
        await first_started.wait()
        return "second done"

    seen: list[list[ContentToolResult]] = []

    def check(request: ModelRequest) -> str:
        seen.append(results_of(request))
        return "both"

    provider = ScriptedProvider(
        [tool_calls(("first", {}, "a"), ("second", {}, "b"), ("first", {}, "c")), check]
    )
    chat = Chat(provider, tools=[make_tool("first", first), make_tool("second", second)])
    with anyio.fail_after(10):  # a deadlock guard, not a timing assertion
        assert await chat.chat_async("go") == "both"
    assert [(r.request_id, r.value) for r in seen[0]] == [
        ("a", "first done"),
        ("b", "second done"),
        ("c", "first done"),
    ]


async def test_tool_errors_and_unknown_tools_go_back_to_the_model() -> None:
    def boom() -> str:
        raise ValueError("disk on fire")

    seen: list[list[ContentToolResult]] = []

    def check(request: ModelRequest) -> str:
        seen.append(results_of(request))
        return "recovered"

    provider = ScriptedProvider([tool_calls(("boom", {}, "1"), ("nope", {}, "2")), check])
    chat = Chat(provider, tools=[make_tool("boom", boom)])
    assert await chat.chat_async("try") == "recovered"
    boom_result, unknown = seen[0]
    assert boom_result.error == "Tool calling failed with error disk on fire"
    assert boom_result.value is None
    assert unknown.error is not None
    assert unknown.error.startswith("Tool calling failed with error Unknown tool 'nope'")
    assert "boom" in unknown.error  # lists the tools that exist


async def test_max_tool_rounds_stops_the_loop_and_keeps_history_valid() -> None:
    def always_tools(request: ModelRequest) -> AssistantTurn:
        return tool_call("ping", {})

    provider = ScriptedProvider({None: always_tools})
    chat = Chat(provider, tools=[make_tool("ping", lambda: "pong")], max_tool_rounds=2)
    with pytest.raises(ToolLoopLimitError, match="max_tool_rounds=2") as info:
        await chat.chat_async("loop")
    assert info.value.max_tool_rounds == 2
    assert provider.requests == 3  # the first reply plus two rounds of tool results
    turns = chat.get_turns()
    assert turns[-1].role == "user"
    assert all(isinstance(c, ContentToolResult) and c.error for c in turns[-1].contents)

    # The next input is merged into that trailing user turn, not sent as a second one.
    provider2 = ScriptedProvider(["ok"])
    chat.provider = provider2
    assert await chat.chat_async("stop now") == "ok"
    sent = provider2.requests_for(None)[0].turns
    assert sent[-2].role == "assistant"
    assert isinstance(sent[-1].contents[0], ContentToolResult)
    assert sent[-1].contents[-1] == ContentText("stop now")


async def test_max_tool_rounds_zero_runs_no_tools() -> None:
    calls: list[int] = []
    provider = ScriptedProvider([tool_call("ping", {})])
    chat = Chat(provider, tools=[make_tool("ping", lambda: calls.append(1))], max_tool_rounds=0)
    with pytest.raises(ToolLoopLimitError):
        await chat.chat_async("x")
    assert calls == []


async def test_clone_is_independent_and_fresh_is_empty() -> None:
    provider = ScriptedProvider(["one", "two", "three"])
    chat = Chat(provider, "lead prompt", tools=[make_tool("a", lambda: 1)], params={"t": 0})
    await chat.chat_async("first")
    copy = chat.clone()
    assert copy.provider is provider
    assert copy.get_turns() == chat.get_turns()
    await copy.chat_async("second")
    copy.register_tool(make_tool("b", lambda: 2))
    assert len(chat.get_turns()) == 2
    assert len(copy.get_turns()) == 4
    assert [t.name for t in chat.get_tools()] == ["a"]
    assert [t.name for t in copy.get_tools()] == ["a", "b"]
    assert len(chat.get_tokens()) == 1

    child = chat.fresh("child prompt")
    assert child.provider is provider
    assert child.get_turns() == []
    assert child.get_tools() == []
    assert child.get_tokens() == []
    assert child.get_system_prompt() == "child prompt"
    assert child.params == {"t": 0}
    assert chat.get_system_prompt() == "lead prompt"
    await child.chat_async("third")
    assert provider.requests_for(None)[-1].params == {"t": 0}


async def test_sync_chat_refuses_inside_a_running_loop() -> None:
    chat = Chat(ScriptedProvider(["never"]))
    with pytest.raises(RuntimeError, match="chat_async"):
        chat.chat("hi")
    assert chat.get_turns() == []


def test_sync_chat_runs_outside_a_loop() -> None:
    chat = Chat(ScriptedProvider(["sync answer"]))
    assert chat.chat("hi") == "sync answer"
    assert chat.last_turn() == Turn("assistant", (ContentText("sync answer"),))


async def test_cancelled_request_rolls_back_the_user_turn() -> None:
    started = anyio.Event()

    async def hang(request: ModelRequest) -> str:
        started.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    provider = ScriptedProvider(["first answer", hang, "after cancel"])
    chat = Chat(provider)
    await chat.chat_async("first")
    before = chat.get_turns()
    async with anyio.create_task_group() as tg:
        tg.start_soon(chat.chat_async, "doomed")
        await started.wait()
        tg.cancel_scope.cancel()
    assert chat.get_turns() == before
    assert chat.get_tokens() == [provider.usage]
    assert await chat.chat_async("again") == "after cancel"
    texts = [t.text for t in provider.requests_for(None)[-1].turns]
    assert "doomed" not in texts
    assert texts == ["first", "first answer", "again"]


async def test_cancelled_stream_leaves_turns_consistent() -> None:
    provider = ScriptedProvider(["streamed words", "next"])
    chat = Chat(provider)
    with anyio.CancelScope() as scope:
        async with aclosing(chat.stream_async("hello")) as stream:
            async for chunk in stream:
                assert chunk == "streamed words"
                scope.cancel()
                await anyio.sleep(0)
    assert scope.cancelled_caught
    assert chat.get_turns() == []
    # An early break (aclose) is the same: nothing is committed.
    provider2 = ScriptedProvider(["a reply"])
    chat2 = Chat(provider2)
    stream = chat2.stream_async("hello")
    async for _ in stream:
        break
    await stream.aclose()
    assert chat2.get_turns() == []
    # The chat is usable again and the abandoned input was not kept.
    assert await chat.chat_async("again") == "next"
    assert [t.text for t in provider.requests_for(None)[-1].turns] == ["again"]


async def test_cancel_during_tools_repairs_unanswered_calls() -> None:
    tool_started = anyio.Event()

    async def slow() -> str:
        tool_started.set()
        await anyio.Event().wait()
        return "never"

    seen: list[ModelRequest] = []

    def check(request: ModelRequest) -> str:
        seen.append(request)
        return "fine"

    provider = ScriptedProvider([tool_calls(("slow", {}, "s1"), ("slow", {}, "s2")), check])
    chat = Chat(provider, tools=[make_tool("slow", slow)])
    async with anyio.create_task_group() as tg:
        tg.start_soon(chat.chat_async, "work")
        await tool_started.wait()
        tg.cancel_scope.cancel()
    # The exchange that produced the tool calls completed; the tool round did not.
    assert [t.role for t in chat.get_turns()] == ["user", "assistant"]
    assert await chat.chat_async("status?") == "fine"
    last = seen[0].turns[-1]
    assert last.role == "user"
    assert last.contents == (
        ContentToolResult("s1", error=CANCELLED_TOOL_CALL_ERROR),
        ContentToolResult("s2", error=CANCELLED_TOOL_CALL_ERROR),
        ContentText("status?"),
    )
    assert chat.get_turns()[2] == last  # the repair is now part of the history


async def test_unanswered_calls_inside_history_are_repaired() -> None:
    request = ContentToolRequest("x1", "lookup", {})
    history = [
        Turn("user", (ContentText("q"),)),
        Turn("assistant", (request,)),
        Turn("user", (ContentText("never mind"),)),
        Turn("assistant", (ContentText("ok"),)),
    ]
    provider = ScriptedProvider(["done"])
    chat = Chat(provider, turns=history)
    await chat.chat_async("next")
    sent = provider.requests_for(None)[0].turns
    assert sent[2].contents == (
        ContentToolResult("x1", error=CANCELLED_TOOL_CALL_ERROR),
        ContentText("never mind"),
    )
    assert sent[1:2] == tuple(history[1:2])
    assert sent[3] == history[3]


async def test_stream_async_yields_text_across_tool_rounds() -> None:
    provider = ScriptedProvider([tool_call("note", {}, text="Let me check. "), reply("All good.")])
    chat = Chat(provider, tools=[make_tool("note", lambda: "noted")])
    chunks = [chunk async for chunk in chat.stream_async("status")]
    assert chunks == ["Let me check. ", "All good."]
    assert chat.last_turn() == Turn("assistant", (ContentText("All good."),))
    assert len(chat.get_turns()) == 4


class CompleteOnly:
    """A provider with only ``complete``: streaming must fall back to the final turn."""

    name = "complete-only"
    model = "m"

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        return reply("whole answer")

    def with_model(self, model: str) -> CompleteOnly:
        return self


async def test_stream_falls_back_to_complete() -> None:
    chat = Chat(CompleteOnly())  # type: ignore[arg-type]
    assert [c async for c in chat.stream_async("hi")] == ["whole answer"]


async def test_one_exchange_at_a_time() -> None:
    started = anyio.Event()
    release = anyio.Event()

    async def wait(request: ModelRequest) -> str:
        started.set()
        await release.wait()
        return "done"

    chat = Chat(ScriptedProvider([wait]))
    async with anyio.create_task_group() as tg:
        tg.start_soon(chat.chat_async, "one")
        await started.wait()
        with pytest.raises(RuntimeError, match="clone"):
            await chat.chat_async("two")
        with pytest.raises(RuntimeError, match="running"):
            chat.set_turns([])
        release.set()
    assert len(chat.get_turns()) == 2


async def test_provider_errors_propagate_without_a_half_turn() -> None:
    provider = ScriptedProvider([ScriptError("scripted failure")])
    chat = Chat(provider)
    with pytest.raises(ScriptError, match="scripted failure"):
        await chat.chat_async("hi")
    assert chat.get_turns() == []


def test_turns_system_prompt_and_accessors() -> None:
    chat = Chat(ScriptedProvider([]), ["Part one.", "Part two."])
    assert chat.get_system_prompt() == "Part one.\n\nPart two."
    history = [Turn("user", (ContentText("u"),)), Turn("assistant", (ContentText("a"),))]
    chat.set_turns(history)
    full = chat.get_turns(include_system_prompt=True)
    assert full[0].role == "system"
    assert full[1:] == history
    other = Chat(ScriptedProvider([]))
    other.set_turns(full)
    assert other.get_system_prompt() == "Part one.\n\nPart two."
    assert other.get_turns() == history
    assert other.last_turn("user") == history[0]
    assert other.last_turn("system") is not None
    chat.set_system_prompt(None)
    assert chat.last_turn("system") is None
    with pytest.raises(ValueError, match=r"turns\[1\] is a system turn"):
        chat.set_turns([history[0], Turn("system", ())])
    with pytest.raises(TypeError, match=r"turns\[0\]"):
        chat.set_turns(["hello"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two tools are named 'a'"):
        chat.set_tools([make_tool("a", lambda: 1), make_tool("a", lambda: 2)])
    with pytest.raises(TypeError, match="expects a Tool"):
        chat.register_tool(lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tool_rounds"):
        Chat(ScriptedProvider([]), max_tool_rounds=-1)
    with pytest.raises(TypeError, match="Provider protocol"):
        Chat(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one input"):
        anyio.run(chat.chat_async)
    assert chat.get_model() == "scripted"


async def test_tokens_and_cost() -> None:
    priced = Usage(requests=1, input_tokens=100, output_tokens=20, cost_usd=0.25)
    provider = ScriptedProvider(["a", reply("b", usage=priced)])
    chat = Chat(provider)
    await chat.chat_async("1")
    assert chat.get_cost() is None
    await chat.chat_async("2")
    assert chat.get_tokens() == [provider.usage, priced]
    assert chat.get_usage().requests == 2
    assert chat.get_usage().input_tokens == provider.usage.input_tokens + 100
    assert chat.get_cost() == pytest.approx(0.25)
    assert chat.get_cost("last") == pytest.approx(0.25)


async def test_bad_arguments_are_reported_by_name_and_the_tool_does_not_run() -> None:
    from deputy_runtime.tools import tool

    ran: list[str] = []

    @tool
    async def forecast(city: str, days: int = 1) -> str:
        """Forecast the weather.

        Args:
            city: The city.
            days: How many days.
        """
        ran.append(city)
        return f"{city}: sun for {days} days"

    seen: list[list[ContentToolResult]] = []

    def check(request: ModelRequest) -> str:
        seen.append(results_of(request))
        return "done"

    provider = ScriptedProvider(
        [tool_calls(("forecast", {"city": 3}, "bad"), ("forecast", {"city": "Oslo"}, "ok")), check]
    )
    chat = Chat(provider, tools=[forecast])
    assert await chat.chat_async("weather") == "done"
    bad, good = seen[0]
    assert bad.error is not None
    assert bad.error.startswith("Tool calling failed with error ")
    assert "city" in bad.error
    assert good == ContentToolResult("ok", value="Oslo: sun for 1 days")
    assert ran == ["Oslo"]


class HangingStream:
    """Streams one delta, then waits forever; records whether its stream was closed.

    A stand-in for an HTTP stream stalled mid-response (the loopback HTTP versions of
    this live with the HTTP provider tests).
    """

    name = "hanging"
    model = "m"

    def __init__(self) -> None:
        self.first_delta_sent = anyio.Event()
        self.closed = False

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async def stream(self, request: ModelRequest) -> Any:
        try:
            yield StreamDelta(text="partial ")
            self.first_delta_sent.set()
            await anyio.Event().wait()
            yield reply("never")
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0)  # cleanup that awaits, like closing a response
            self.closed = True

    def with_model(self, model: str) -> HangingStream:
        return self


async def test_cancelling_stream_async_closes_the_provider_stream() -> None:
    provider = HangingStream()
    chat = Chat(provider)
    chat.set_turns([Turn("user", (ContentText("old"),)), Turn("assistant", (ContentText("a"),))])
    before = chat.get_turns()
    chunks: list[str] = []

    async def consume() -> None:
        async with aclosing(chat.stream_async("new")) as stream:
            async for chunk in stream:
                chunks.append(chunk)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await provider.first_delta_sent.wait()
        tg.cancel_scope.cancel()
    assert chunks == ["partial "]
    assert provider.closed
    assert chat.get_turns() == before
    assert chat.get_tokens() == []


async def test_abandoning_stream_async_early_closes_the_provider_stream() -> None:
    provider = HangingStream()
    chat = Chat(provider)
    async with aclosing(chat.stream_async("new")) as stream:
        async for chunk in stream:
            assert chunk == "partial "
            break
        assert not provider.closed  # suspended at its yield until the chain is closed
    assert provider.closed
    assert chat.get_turns() == []
    chat.provider = ScriptedProvider(["usable again"])  # the exchange ended: not busy
    assert await chat.chat_async("again") == "usable again"
