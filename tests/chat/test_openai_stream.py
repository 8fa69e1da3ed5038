"""Chat Completions streaming edge cases, over real sockets in random chunk sizes.

The shapes follow what OpenAI and compatible servers (Ollama, vLLM, proxies) actually send:
parallel tool calls with interleaved argument deltas, usage-only chunks with empty, null or
missing ``choices``, mid-stream error payloads, missing/null/repeated tool-call indexes,
whole calls in one chunk, and streams that stop early.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ModelRequest,
    OllamaProvider,
    OpenAICompatibleProvider,
    OpenAIProvider,
    StreamDelta,
    Turn,
    Usage,
)
from deputy_runtime.errors import ProviderError
from tests.chat.loopback import End, LoopbackServer, Reply, sse_record

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest("Be terse.", (Turn("user", (ContentText("Weather in Paris and Rome?"),)),))
USAGE = {
    "prompt_tokens": 80,
    "completion_tokens": 40,
    "total_tokens": 120,
    "prompt_tokens_details": {"cached_tokens": 16},
}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
    }
    body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return sse_record({**body, **extra})


def call(
    index: int | None, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    tc: dict[str, Any] = {} if index is None else {"index": index}
    if id:
        tc |= {"id": id, "type": "function"}
    fn = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    if fn:
        tc["function"] = fn
    return {"tool_calls": [tc]}


USAGE_CHUNK = sse_record(
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE}
)
DONE = sse_record("[DONE]")


async def run(
    body: str,
    provider_cls: type[OpenAIProvider] = OpenAIProvider,
    *,
    sizes: Any = "random",
    end: End = "complete",
) -> tuple[list[StreamDelta], AssistantTurn, LoopbackServer]:
    with LoopbackServer([Reply.sse(body, sizes=sizes, seed=len(body), end=end)]) as server:
        provider = provider_cls("m", api_key="k", base_url=server.url + "/v1", max_retries=0)
        try:
            items = [x async for x in provider.stream(REQUEST)]
        finally:
            await provider.aclose()
    *deltas, turn = items
    assert isinstance(turn, AssistantTurn)
    return deltas, turn, server  # type: ignore[return-value]


PARIS, ROME = {"city": "Paris"}, {"city": "Rome"}


async def test_parallel_calls_with_interleaved_argument_deltas() -> None:
    body = (
        chunk({"role": "assistant", "content": ""})
        + chunk({"content": "Checking"})
        + chunk(call(0, "call_A", "get_weather", ""))
        + chunk(call(1, "call_B", "get_weather", ""))
        + chunk(call(0, args='{"ci'))
        + chunk(call(1, args='{"city":'))
        + chunk(call(0, args='ty":"Paris"}'))
        + chunk(call(1, args='"Rome"}'))
        + chunk(finish="tool_calls")
        + USAGE_CHUNK
        + DONE
    )
    deltas, turn, server = await run(body, sizes=1)
    assert [d.text for d in deltas] == ["Checking"]
    assert turn.contents == (
        ContentText("Checking"),
        ContentToolRequest("call_A", "get_weather", PARIS),
        ContentToolRequest("call_B", "get_weather", ROME),
    )
    assert turn.usage == Usage(1, 80, 40, 16)
    assert turn.finish_reason == "tool_calls"
    assert server.requests[0].json["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("choices", ["empty", "null", "missing"])
async def test_usage_only_chunk_shapes(choices: str) -> None:
    usage_chunk: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "usage": USAGE}
    if choices != "missing":
        usage_chunk["choices"] = [] if choices == "empty" else None
    body = chunk({"content": "Hi"}) + chunk(finish="stop") + sse_record(usage_chunk) + DONE
    _, turn, _ = await run(body)
    assert turn.usage == Usage(1, 80, 40, 16)
    assert turn.text == "Hi"


async def test_no_usage_chunk_means_zero_tokens_but_one_request() -> None:
    _, turn, _ = await run(chunk({"content": "Hi"}) + chunk(finish="stop") + DONE)
    assert turn.usage == Usage(requests=1)


async def test_usage_on_the_final_choice_chunk_vllm_style() -> None:
    _, turn, _ = await run(chunk({"content": "Hi"}) + chunk(finish="stop", usage=USAGE) + DONE)
    assert turn.usage.output_tokens == 40


@pytest.mark.parametrize(
    "error_record",
    [
        sse_record(
            {
                "error": {
                    "message": "The server had an error while processing",
                    "type": "server_error",
                }
            }
        ),
        sse_record({"error": "The server had an error while processing"}),
        sse_record({"error": {"message": "The server had an error while processing"}}, "error"),
    ],
    ids=["object", "string", "event-error"],
)
async def test_mid_stream_error_payload_raises(error_record: str) -> None:
    body = chunk({"content": "partial "}) + error_record + chunk({"content": "never"}) + DONE
    with pytest.raises(ProviderError, match="The server had an error while processing"):
        await run(body)


async def test_missing_indexes_ollama_style() -> None:
    # Old Ollama: no index at all; each call arrives with an id, arguments may follow.
    body = (
        chunk(call(None, "call_1", "get_weather", '{"city":'))
        + chunk(call(None, args='"Paris"}'))
        + chunk(call(None, "call_2", "get_weather", '{"city":"Rome"}'))
        + chunk(finish="tool_calls")
        + DONE
    )
    _, turn, _ = await run(body, OllamaProvider)
    assert turn.tool_requests == (
        ContentToolRequest("call_1", "get_weather", PARIS),
        ContentToolRequest("call_2", "get_weather", ROME),
    )


async def test_every_call_reported_at_index_zero() -> None:
    # Ollama with some model parsers: index 0 for every call, but distinct ids.
    body = (
        chunk(call(0, "call_1", "get_weather", '{"city":"Paris"}'))
        + chunk(call(0, "call_2", "get_weather", ""))
        + chunk(call(0, args='{"city":"Rome"}'))
        + chunk(finish="tool_calls")
        + DONE
    )
    _, turn, _ = await run(body, OllamaProvider)
    assert [c.arguments for c in turn.tool_requests] == [PARIS, ROME]


async def test_null_indexes_and_ids_repeated_on_every_delta() -> None:
    body = (
        chunk(call(None, "call_1", "get_weather", '{"ci'))
        + chunk(call(None, "call_1", None, 'ty":"Paris"}'))
        + chunk(call(None, "call_2", "get_weather", '{"city"'))
        + chunk(call(None, "call_2", None, ':"Rome"}'))
        + chunk(finish="tool_calls")
        + DONE
    )
    _, turn, _ = await run(body, OpenAICompatibleProvider)
    assert [(c.id, c.arguments) for c in turn.tool_requests] == [
        ("call_1", PARIS),
        ("call_2", ROME),
    ]


async def test_whole_calls_in_one_chunk_and_object_arguments() -> None:
    two = {
        "tool_calls": [
            {
                "index": 0,
                "id": "a",
                "type": "function",
                "function": {"name": "w", "arguments": '{"city":"Paris"}'},
            },
            {
                "index": 1,
                "id": "b",
                "type": "function",
                "function": {"name": "w", "arguments": ROME},
            },
        ]
    }
    _, turn, _ = await run(chunk(two, "tool_calls") + DONE, OpenAICompatibleProvider)
    assert [c.arguments for c in turn.tool_requests] == [PARIS, ROME]


async def test_empty_arguments_mean_no_arguments() -> None:
    _, turn, _ = await run(
        chunk(call(0, "a", "current_date", "")) + chunk(finish="tool_calls") + DONE
    )
    assert turn.tool_requests == (ContentToolRequest("a", "current_date", {}),)


async def test_invalid_argument_json_is_a_clear_error() -> None:
    body = chunk(call(0, "a", "get_weather", '{"city": "Par')) + chunk(finish="length") + DONE
    with pytest.raises(ProviderError, match=r"'get_weather' \(a\).*not valid JSON"):
        await run(body)


async def test_reasoning_deltas_become_thinking() -> None:
    body = (
        chunk({"reasoning_content": "Let me think. "})
        + chunk({"reasoning": "Done."})
        + chunk({"content": "42"})
        + chunk(finish="stop")
        + DONE
    )
    deltas, turn, _ = await run(body, OpenAICompatibleProvider)
    assert [d.thinking for d in deltas if d.thinking] == ["Let me think. ", "Done."]
    assert turn.contents == (ContentThinking("Let me think. Done."), ContentText("42"))


@pytest.mark.parametrize(
    ("body", "end"),
    [
        (chunk({"content": "Hel"}) + chunk({"content": "lo"}), "complete"),  # clean EOF, no finish
        (chunk({"content": "Hel"}) + chunk(finish="stop") + USAGE_CHUNK, "complete"),  # no [DONE]
        (chunk({"content": "Hel"}) + 'data: {"id": "chatcmpl-1", "choi', "complete"),  # cut record
        (chunk({"content": "Hel"}), "truncate"),  # connection closed mid HTTP chunk
        (chunk({"content": "Hel"}), "reset"),  # TCP reset
    ],
    ids=["no-finish", "no-done", "cut-record", "truncated-body", "reset"],
)
async def test_truncated_streams_raise_and_yield_no_turn(body: str, end: End) -> None:
    with LoopbackServer([Reply.sse(body, end=end)]) as server:
        provider = OpenAIProvider("m", api_key="k", base_url=server.url + "/v1", max_retries=3)
        seen: list[Any] = []
        with anyio.fail_after(10), pytest.raises(ProviderError, match="stream"):
            async for item in provider.stream(REQUEST):
                seen.append(item)
        await provider.aclose()
    assert not any(isinstance(x, AssistantTurn) for x in seen)
    assert len(server.requests) == 1  # a started stream is never retried


async def test_compatible_server_may_omit_done_after_finish() -> None:
    body = chunk({"content": "Hi"}) + chunk(finish="stop") + USAGE_CHUNK
    _, turn, _ = await run(body, OpenAICompatibleProvider)
    assert (turn.text, turn.usage.input_tokens) == ("Hi", 80)


async def test_malformed_chunk_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match="malformed stream chunk"):
        await run(chunk({"content": "Hi"}) + sse_record("{not json") + DONE)


async def test_json_answer_to_a_stream_request_is_accepted() -> None:
    completion = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Whole"},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }
    with LoopbackServer([Reply.json(completion)]) as server:
        provider = OpenAICompatibleProvider("m", base_url=server.url + "/v1")
        items = [x async for x in provider.stream(REQUEST)]
        await provider.aclose()
    assert items[0] == StreamDelta(text="Whole")
    assert isinstance(items[-1], AssistantTurn)
    assert items[-1].usage.input_tokens == 80


async def test_one_byte_chunks_reach_the_decoder_one_byte_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's 1-byte HTTP chunks really arrive as 1-byte reads (not coalesced)."""
    from deputy_runtime.chat import _http as http_module
    from deputy_runtime.chat._sse import SSEDecoder

    sizes: list[int] = []

    class Recording(SSEDecoder):  # _http looks the decoder up by this name
        def feed(self, chunk: bytes) -> list[Any]:
            sizes.append(len(chunk))
            return super().feed(chunk)

    monkeypatch.setattr(http_module, "SSEDecoder", Recording)
    body = chunk({"content": "Hé☃"}) + chunk(finish="stop") + DONE
    _, turn, _ = await run(body, sizes=1)
    assert turn.text == "Hé☃"
    assert set(sizes) == {1}
    assert len(sizes) == len(body.encode())


def test_provider_survives_successive_event_loops_and_backends() -> None:
    """A sync wrapper runs each call in a fresh loop; the lazily made client follows."""
    replies = [
        Reply.json({"choices": [{"message": {"content": f"r{i}"}, "finish_reason": "stop"}]})
        for i in range(3)
    ]
    with LoopbackServer(replies) as server:
        provider = OpenAIProvider("m", api_key="k", base_url=server.url + "/v1")
        texts = [
            anyio.run(provider.complete, REQUEST, backend=b).text
            for b in ("asyncio", "trio", "asyncio")
        ]
        anyio.run(provider.aclose)
    assert texts == ["r0", "r1", "r2"]
    assert len(server.requests) == 3
