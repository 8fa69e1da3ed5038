"""Responses a transport builds already read (``httpx.MockTransport``, test doubles, caches).

Such a body can no longer be streamed; the providers take it as it is, under the same size
cap as a streamed body. The transport here is httpx's own MockTransport: these tests are
about that kind of transport, so no socket is involved on purpose.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from deputy_runtime import ResponseTooLargeError
from deputy_runtime.chat import Chat, OpenAIProvider, ResponseLimits

pytestmark = pytest.mark.anyio


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _client(text: str) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["model"] == "gpt-test"
        return httpx.Response(200, json=_completion(text))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_already_read_body_is_parsed(streaming: bool) -> None:
    async with _client("hello from a mock") as client:
        chat = Chat(OpenAIProvider("gpt-test", api_key="k", client=client))
        if streaming:
            pieces = [piece async for piece in chat.stream_async("hi")]
            text = "".join(pieces)
        else:
            text = await chat.chat_async("hi")
    assert text == "hello from a mock"


async def test_an_already_read_body_is_still_capped() -> None:
    async with _client("x" * 5_000) as client:
        limits = ResponseLimits(max_body_bytes=1_000)
        chat = Chat(OpenAIProvider("gpt-test", api_key="k", client=client, limits=limits))
        with pytest.raises(ResponseTooLargeError) as info:
            await chat.chat_async("hi")
    assert info.value.limit == 1_000
    assert "max_body_bytes" in str(info.value)
