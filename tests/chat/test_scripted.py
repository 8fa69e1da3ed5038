"""ScriptedProvider and the agent-name context: playing scripts, failing loudly."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    DEFAULT_SCRIPTED_USAGE,
    AssistantTurn,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ModelRequest,
    ScriptedProvider,
    StreamDelta,
    Turn,
    Usage,
    agent_name_scope,
    current_agent_name,
    reply,
    reset_current_agent,
    set_current_agent,
    stream_request,
    tool_call,
    tool_calls,
)
from deputy_runtime.errors import ProviderError, ScriptError

pytestmark = pytest.mark.anyio


def ask(text: str) -> ModelRequest:
    return ModelRequest(None, (Turn("user", (ContentText(text),)),))


async def test_shared_script_plays_in_order_and_reports_usage() -> None:
    own = Usage(requests=1, input_tokens=1000, output_tokens=1)
    provider = ScriptedProvider(["one", reply("two"), reply("three", usage=own)])
    first = await provider.complete(ask("a"))
    assert first.text == "one"
    assert first.usage == DEFAULT_SCRIPTED_USAGE
    assert first.finish_reason == "stop"
    assert (await provider.complete(ask("b"))).usage == DEFAULT_SCRIPTED_USAGE
    assert (await provider.complete(ask("c"))).usage == own
    assert provider.requests == 3
    assert [r.turns[0].text for r in provider.requests_for(None)] == ["a", "b", "c"]
    provider.assert_complete()


async def test_exhausted_script_names_agent_and_position() -> None:
    provider = ScriptedProvider(["only"])
    await provider.complete(ask("a"))
    with agent_name_scope("researcher"), pytest.raises(ScriptError) as info:
        await provider.complete(ask("what now?"))
    message = str(info.value)
    assert "exhausted" in message
    assert "request 2" in message
    assert "'researcher'" in message
    assert "what now?" in message


async def test_assert_complete_lists_unused_entries() -> None:
    provider = ScriptedProvider({"lead": ["a", "b"], "worker": ["c"]})
    with agent_name_scope("lead"):
        await provider.complete(ask("x"))
    assert provider.remaining("lead") == 1
    with pytest.raises(ScriptError) as info:
        provider.assert_complete()
    assert "'lead': 1 of 2" in str(info.value)
    assert "'worker': 1 of 1" in str(info.value)


async def test_keyed_scripts_follow_the_current_agent() -> None:
    provider = ScriptedProvider(
        {"lead": ["lead reply"], "helper": ["helper reply"], None: ["anon"]}
    )
    with agent_name_scope("helper"):
        assert (await provider.complete(ask("h"))).text == "helper reply"
    with agent_name_scope("lead"):
        assert (await provider.complete(ask("l"))).text == "lead reply"
    assert (await provider.complete(ask("n"))).text == "anon"
    assert [r.turns[0].text for r in provider.requests_for("helper")] == ["h"]
    assert [name for name, _ in provider.request_log] == ["helper", "lead", None]
    with agent_name_scope("stranger"), pytest.raises(ScriptError) as info:
        await provider.complete(ask("?"))
    assert "'stranger'" in str(info.value)
    assert "'lead', 'helper', None" in str(info.value)
    provider.assert_complete()


async def test_responder_serves_many_concurrent_requests() -> None:
    gate = anyio.Event()
    arrived: list[str] = []

    async def worker(request: ModelRequest) -> str:
        arrived.append(request.turns[0].text)
        if len(arrived) == 20:
            gate.set()
        await gate.wait()  # every request is in flight at once before any returns
        return f"done {request.turns[0].text}"

    provider = ScriptedProvider({"worker": worker}, record=False)
    answers: dict[int, str] = {}

    async def child(i: int) -> None:
        with agent_name_scope("worker"):
            answers[i] = (await provider.complete(ask(str(i)))).text

    with anyio.fail_after(10):  # deadlock guard only
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(child, i)
    assert answers == {i: f"done {i}" for i in range(20)}
    assert provider.requests == 20
    assert provider.request_log == []  # record=False keeps no log
    provider.assert_complete()  # responders are never "unfinished"


async def test_callable_entries_check_requests() -> None:
    def expects_hello(request: ModelRequest) -> AssistantTurn:
        assert request.turns[-1].text == "hello", "wanted a greeting"
        return reply("hi")

    provider = ScriptedProvider([expects_hello, expects_hello])
    assert (await provider.complete(ask("hello"))).text == "hi"
    with agent_name_scope("lead"), pytest.raises(ScriptError) as info:
        await provider.complete(ask("bye"))
    assert "entry 2" in str(info.value)
    assert "'lead'" in str(info.value)
    assert "wanted a greeting" in str(info.value)

    bad = ScriptedProvider([lambda request: 42])  # type: ignore[list-item, return-value]  # under test
    with pytest.raises(ScriptError, match="returned int"):
        await bad.complete(ask("x"))


async def test_exception_entries_are_raised() -> None:
    provider = ScriptedProvider([ProviderError("upstream down", status=503), "recovered"])
    with pytest.raises(ProviderError, match="upstream down"):
        await provider.complete(ask("x"))
    assert (await provider.complete(ask("x"))).text == "recovered"


async def test_stream_yields_deltas_then_the_turn() -> None:
    turn = AssistantTurn((ContentThinking("hmm"), ContentText("answer")))
    provider = ScriptedProvider([turn])
    items = [item async for item in stream_request(provider, ask("q"))]
    assert items[:2] == [StreamDelta(thinking="hmm"), StreamDelta(text="answer")]
    last = items[2]
    assert isinstance(last, AssistantTurn)
    assert last.contents == turn.contents
    assert last.usage == DEFAULT_SCRIPTED_USAGE


async def test_with_model_shares_the_script() -> None:
    provider = ScriptedProvider(["a", "b"], usage=Usage(requests=1, input_tokens=3))
    other = provider.with_model("small")
    assert other.model == "small"
    assert other.name == "scripted"
    assert (await other.complete(ask("1"))).usage.input_tokens == 3
    assert (await provider.complete(ask("2"))).text == "b"
    assert provider.requests == 2
    other.assert_complete()


def test_tool_call_helpers() -> None:
    one = tool_call("read", {"path": "a"})
    two = tool_call("read", {"path": "b"})
    assert one.tool_requests[0].id != two.tool_requests[0].id
    assert one.finish_reason == "tool_use"
    many = tool_calls(
        ("a", {}), ("b", {"x": 1}, "id-b"), ContentToolRequest("id-c", "c", {}), text="Working."
    )
    assert many.text == "Working."
    assert [(r.id, r.name, r.arguments) for r in many.tool_requests][1:] == [
        ("id-b", "b", {"x": 1}),
        ("id-c", "c", {}),
    ]
    assert tool_call("x", id="fixed").tool_requests[0].id == "fixed"


def test_bad_scripts_are_rejected_at_construction() -> None:
    with pytest.raises(TypeError, match=r"script\[1\]"):
        ScriptedProvider(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"script\['lead'\]"):
        ScriptedProvider({"lead": "not a list"})
    with pytest.raises(TypeError, match="script must be"):
        ScriptedProvider("text")  # a str is a Sequence, so only the runtime check catches it


async def test_agent_name_context_is_per_task() -> None:
    assert current_agent_name() is None
    both_set = anyio.Event()
    seen: dict[str, str | None] = {}
    ready: list[str] = []

    async def agent(name: str) -> None:
        with agent_name_scope(name):
            ready.append(name)
            if len(ready) == 2:
                both_set.set()
            await both_set.wait()  # both scopes are open at the same time here
            seen[name] = current_agent_name()
        seen[name + "-after"] = current_agent_name()

    async with anyio.create_task_group() as tg:
        tg.start_soon(agent, "a")
        tg.start_soon(agent, "b")
    assert seen == {"a": "a", "b": "b", "a-after": None, "b-after": None}

    token = set_current_agent("outer")
    try:
        with agent_name_scope("inner"):
            assert current_agent_name() == "inner"
        assert current_agent_name() == "outer"
    finally:
        reset_current_agent(token)
    assert current_agent_name() is None


async def test_scripted_drives_a_chat_by_agent_name() -> None:
    from deputy_runtime.chat import Chat, chat

    provider: Any = ScriptedProvider({"lead": ["from lead"], "child": ["from child"]})
    lead = Chat(provider)
    child = chat("scripted/alt", script=[])  # a registry-built scripted chat
    assert child.provider.model == "alt"
    with agent_name_scope("child"):
        assert await lead.fresh().chat_async("x") == "from child"
    with agent_name_scope("lead"):
        assert await lead.chat_async("y") == "from lead"
    provider.assert_complete()


async def test_stream_request_sees_the_agent_name_and_falls_back() -> None:
    from deputy_runtime.chat import Provider

    provider = ScriptedProvider({"lead": ["lead words"], "child": ["child words"]})
    with agent_name_scope("child"):
        items = [item async for item in stream_request(provider, ask("q"))]
    assert items[0] == StreamDelta(text="child words")

    class Stub(Provider):
        """Inherits the Protocol's stub ``stream``; only ``complete`` is real."""

        name = "stub"
        model = "m"

        async def complete(self, request: ModelRequest) -> AssistantTurn:
            return reply("whole")

        def with_model(self, model: str) -> Provider:
            return self

    stub = Stub()  # type: ignore[abstract]  # stream is left out on purpose: the fallback
    items = [item async for item in stream_request(stub, ask("q"))]
    assert len(items) == 1
    assert isinstance(items[0], AssistantTurn)
    assert items[0].text == "whole"

    class Truncated(Stub):
        async def stream(self, request: ModelRequest) -> Any:
            yield StreamDelta(text="half")

    with pytest.raises(ProviderError, match="without a final assistant turn"):
        async for _ in stream_request(Truncated(), ask("q")):
            pass
