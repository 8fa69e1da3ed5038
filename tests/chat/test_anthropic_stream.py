"""Anthropic Messages streaming edge cases over real sockets in random chunk sizes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    AnthropicProvider,
    AssistantTurn,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ModelRequest,
    StreamDelta,
    Turn,
    Usage,
)
from deputy_runtime.errors import ProviderError
from tests.chat.loopback import End, LoopbackServer, Reply, sse_record

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(None, (Turn("user", (ContentText("Weather in Paris and Rome?"),)),))


def ev(kind: str, **fields: Any) -> str:
    return sse_record({"type": kind, **fields}, kind)


START = ev(
    "message_start",
    message={
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude",
        "stop_reason": None,
        "usage": {
            "input_tokens": 472,
            "cache_creation_input_tokens": 10,
            "cache_read_input_tokens": 100,
            "output_tokens": 2,
        },
    },
)


def block(index: int, content_block: dict[str, Any], *deltas: dict[str, Any]) -> str:
    out = ev("content_block_start", index=index, content_block=content_block)
    out += "".join(ev("content_block_delta", index=index, delta=d) for d in deltas)
    return out + ev("content_block_stop", index=index)


def end(stop_reason: str = "end_turn", output_tokens: int = 61) -> str:
    delta = ev(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )
    return delta + ev("message_stop")


def tool(index: int, id: str, *pieces: str) -> str:
    first = {"type": "tool_use", "id": id, "name": "get_weather", "input": {}}
    return block(index, first, *({"type": "input_json_delta", "partial_json": p} for p in pieces))


async def run(
    body: str, *, sizes: Any = "random", end_: End = "complete"
) -> tuple[list[StreamDelta], AssistantTurn]:
    with LoopbackServer([Reply.sse(body, sizes=sizes, seed=len(body), end=end_)]) as server:
        provider = AnthropicProvider(
            "claude", api_key="k", base_url=server.url + "/v1", max_retries=0
        )
        try:
            items = [x async for x in provider.stream(REQUEST)]
        finally:
            await provider.aclose()
    *deltas, turn = items
    assert isinstance(turn, AssistantTurn)
    return deltas, turn  # type: ignore[return-value]


async def test_thinking_text_and_parallel_tool_use_with_json_deltas() -> None:
    body = (
        START
        + block(
            0,
            {"type": "thinking", "thinking": "", "signature": ""},
            {"type": "thinking_delta", "thinking": "Two cities; "},
            {"type": "thinking_delta", "thinking": "two calls."},
            {"type": "signature_delta", "signature": "EqQBCkYIBx"},
        )
        + ev("ping")
        + block(
            1,
            {"type": "text", "text": ""},
            {"type": "text_delta", "text": "Let me "},
            {"type": "text_delta", "text": "check."},
        )
        + tool(
            2, "toolu_A", "", '{"city": "Par', 'is"}'
        )  # an empty partial_json first (ellmer #228)
        + tool(3, "toolu_B", '{"city": "Rome"}')
        + end("tool_use")
    )
    deltas, turn = await run(body, sizes=1)
    assert [d.thinking for d in deltas if d.thinking] == ["Two cities; ", "two calls."]
    assert "".join(d.text for d in deltas) == "Let me check."
    assert turn.contents == (
        ContentThinking("Two cities; two calls.", signature="EqQBCkYIBx"),
        ContentText("Let me check."),
        ContentToolRequest("toolu_A", "get_weather", {"city": "Paris"}),
        ContentToolRequest("toolu_B", "get_weather", {"city": "Rome"}),
    )
    assert turn.finish_reason == "tool_use"
    # input = uncached + cache writes + cache reads; output is the cumulative final count.
    assert turn.usage == Usage(1, 582, 61, 100)


async def test_tool_use_without_deltas_means_no_arguments() -> None:
    _, turn = await run(START + tool(0, "toolu_A") + end("tool_use"))
    assert turn.tool_requests == (ContentToolRequest("toolu_A", "get_weather", {}),)


async def test_redacted_thinking_is_kept_for_replay() -> None:
    body = (
        START
        + block(0, {"type": "redacted_thinking", "data": "opaque=="})
        + block(1, {"type": "text", "text": "ok"})
        + end()
    )
    _, turn = await run(body)
    assert turn.contents == (ContentThinking("", redacted="opaque=="), ContentText("ok"))


async def test_server_tool_blocks_are_skipped() -> None:
    server_block = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_fetch",
        "input": {"url": "https://x"},
    }
    body = START + block(0, server_block) + block(1, {"type": "text", "text": "done"}) + end()
    _, turn = await run(body)
    assert turn.contents == (ContentText("done"),)


async def test_mid_stream_error_event_raises() -> None:
    error = ev("error", error={"type": "overloaded_error", "message": "Overloaded"})
    body = (
        START
        + block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Hi"})
        + error
        + end()
    )
    with pytest.raises(ProviderError, match=r"Overloaded \[overloaded_error\]"):
        await run(body)


async def test_delta_for_a_block_that_never_started_is_an_error() -> None:
    body = (
        START
        + ev("content_block_delta", index=5, delta={"type": "text_delta", "text": "x"})
        + end()
    )
    with pytest.raises(ProviderError, match="block 5 before its start"):
        await run(body)


async def test_invalid_tool_json_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match=r"'get_weather' \(toolu_A\).*not valid JSON"):
        await run(START + tool(0, "toolu_A", '{"city": ') + end("max_tokens"))


@pytest.mark.parametrize(
    ("body", "how"),
    [
        (START + block(0, {"type": "text", "text": "Hi"}), "complete"),  # no message_delta/stop
        (
            START + block(0, {"type": "text", "text": "Hi"}) + end()[: -len(ev("message_stop"))],
            "complete",
        ),
        (
            block(0, {"type": "text", "text": "Hi"}) + ev("message_stop"),
            "complete",
        ),  # no message_start
        (START + block(0, {"type": "text", "text": "Hi"}), "truncate"),
        (START + block(0, {"type": "text", "text": "Hi"}), "reset"),
    ],
    ids=["no-message-delta", "no-message-stop", "no-message-start", "truncated-body", "reset"],
)
async def test_truncated_streams_raise_and_yield_no_turn(body: str, how: End) -> None:
    with LoopbackServer([Reply.sse(body, end=how)]) as server:
        provider = AnthropicProvider(
            "claude", api_key="k", base_url=server.url + "/v1", max_retries=3
        )
        seen: list[Any] = []
        with anyio.fail_after(10), pytest.raises(ProviderError, match="stream"):
            async for item in provider.stream(REQUEST):
                seen.append(item)
        await provider.aclose()
    assert not any(isinstance(x, AssistantTurn) for x in seen)
    assert len(server.requests) == 1
