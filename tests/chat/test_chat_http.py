"""Chat over a real HTTP provider and a loopback server (real sockets on 127.0.0.1).

Checks what only the wire shows: the tool loop's results reach the server as the
provider's tool messages, in request order, with the tool error text; and cancelling
``chat_async``/``stream_async`` mid-request really closes the HTTP response.
"""

from __future__ import annotations

import json
import threading
from contextlib import aclosing
from typing import Any

import anyio
import anyio.to_thread
import pytest

from deputy_runtime.chat import Chat, ContentText, OpenAICompatibleProvider, Turn
from deputy_runtime.tools import Tool
from tests.chat.loopback import LoopbackServer, Reply, Seen, openai_sse

pytestmark = pytest.mark.anyio

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "local",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


TOOL_TURN = completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("call_A", "weather", {"city": "Paris"}),
            call("call_B", "broken", {"city": "Rome"}),
            call("call_C", "weather", {"city": "Oslo"}),
        ],
    },
    "tool_calls",
)
TEXT_TURN = completion({"role": "assistant", "content": "Paris and Oslo are sunny."}, "stop")


def tools() -> list[Tool]:
    def broken(city: str) -> str:
        raise RuntimeError(f"no data for {city}")

    async def weather(city: str) -> str:
        await anyio.sleep(0)
        return f"sunny in {city}"

    return [Tool("weather", "Weather.", CITY, weather), Tool("broken", "Broken.", CITY, broken)]


@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_loop_over_http(streaming: bool) -> None:
    if streaming:
        replies = [Reply.sse(openai_sse(TOOL_TURN)), Reply.sse(openai_sse(TEXT_TURN), sizes=1)]
    else:
        replies = [Reply.json(TOOL_TURN), Reply.json(TEXT_TURN)]
    with LoopbackServer(replies) as server:
        provider = OpenAICompatibleProvider(model="local", base_url=server.url + "/v1")
        chat = Chat(provider, "Be brief.", tools=tools())
        try:
            if streaming:
                async with aclosing(chat.stream_async("Weather?")) as stream:
                    text = "".join([chunk async for chunk in stream])
            else:
                text = await chat.chat_async("Weather?")
        finally:
            await provider.aclose()
    assert text == "Paris and Oslo are sunny."
    assert len(server.requests) == 2
    first, second = (seen.json for seen in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["weather", "broken"]
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_A", "sunny in Paris"),
        ("call_B", "Tool calling failed with error no data for Rome"),
        ("call_C", "sunny in Oslo"),
    ]
    assert [t.role for t in chat.get_turns()] == ["user", "assistant", "user", "assistant"]
    assert [u.input_tokens for u in chat.get_tokens()] == [11, 11]


class Arrivals:
    """Answers every request with ``reply`` and signals (thread-safely) that one arrived."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.arrived = threading.Event()

    def __call__(self, seen: Seen) -> Reply:
        self.arrived.set()
        return self.reply


async def wait_thread_event(event: threading.Event) -> None:
    # The server runs in a thread: wait for its event without blocking the loop.
    assert await anyio.to_thread.run_sync(event.wait, 10), "server event never happened"


HISTORY = [Turn("user", (ContentText("hi"),)), Turn("assistant", (ContentText("hello"),))]


async def test_cancelling_chat_async_mid_request_closes_the_connection() -> None:
    arrivals = Arrivals(Reply(delay=-1))  # never answers; notices when the client leaves
    with LoopbackServer(arrivals) as server:
        provider = OpenAICompatibleProvider(model="local", base_url=server.url + "/v1")
        chat = Chat(provider, turns=HISTORY)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(chat.chat_async, "doomed question")
                await wait_thread_event(arrivals.arrived)
                tg.cancel_scope.cancel()
            await wait_thread_event(server.disconnected)
        finally:
            await provider.aclose()
    assert server.disconnects == 1
    assert chat.get_turns() == HISTORY


async def test_cancelling_stream_async_mid_stream_closes_the_response() -> None:
    partial = openai_sse(TEXT_TURN, usage=False, done=False).split("\n\n")[:2]
    arrivals = Arrivals(Reply.sse("\n\n".join(partial) + "\n\n", sizes=None, end="hang"))
    with LoopbackServer(arrivals) as server:
        provider = OpenAICompatibleProvider(model="local", base_url=server.url + "/v1")
        chat = Chat(provider, turns=HISTORY)
        chunks: list[str] = []
        first_chunk = anyio.Event()

        async def consume() -> None:
            async with aclosing(chat.stream_async("tell me")) as stream:
                async for chunk in stream:
                    chunks.append(chunk)
                    first_chunk.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await first_chunk.wait()
                tg.cancel_scope.cancel()
            await wait_thread_event(server.disconnected)
        finally:
            await provider.aclose()
    assert chunks
    assert "".join(chunks) in TEXT_TURN["choices"][0]["message"]["content"]
    assert chat.get_turns() == HISTORY
    assert chat.get_tokens() == []
