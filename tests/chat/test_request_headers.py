"""Per-call HTTP headers (``request_headers_scope``) reach the wire, through a loopback
server on a real socket, for the OpenAI-compatible and Anthropic providers, on asyncio
and trio."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    AnthropicProvider,
    ContentText,
    ModelRequest,
    OpenAICompatibleProvider,
    Turn,
    current_request_headers,
    request_headers_scope,
)
from tests.chat.loopback import LoopbackServer, Reply, Seen

pytestmark = pytest.mark.anyio

OPENAI_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
ANTHROPIC_REPLY = {
    "id": "msg",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def _request() -> ModelRequest:
    return ModelRequest(None, (Turn("user", (ContentText("hi"),)),), (), {})


def _provider(kind: str, url: str) -> Any:
    if kind == "openai":
        return OpenAICompatibleProvider("m", base_url=url + "/v1")
    return AnthropicProvider("m", api_key="k", base_url=url)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_each_concurrent_call_sends_its_own_headers(kind: str) -> None:
    body = OPENAI_REPLY if kind == "openai" else ANTHROPIC_REPLY

    def reply(seen: Seen) -> Reply:
        return Reply.json(body)

    with LoopbackServer(reply) as server:
        provider = _provider(kind, server.url)

        async def call(key: str) -> None:
            with request_headers_scope({"Idempotency-Key": key}):
                await provider.complete(_request())

        async with anyio.create_task_group() as tg:
            for key in ("k1", "k2", "k3"):
                tg.start_soon(call, key)
        await provider.complete(_request())  # outside any scope: no such header
    keys = [seen.headers.get("idempotency-key") for seen in server.requests]
    assert sorted(keys[:3]) == ["k1", "k2", "k3"]  # type: ignore[type-var]
    assert keys[3] is None


def test_scopes_nest_and_restore() -> None:
    assert dict(current_request_headers()) == {}
    with request_headers_scope({"A": "1", "B": "2"}):
        with request_headers_scope({"B": "3"}):
            assert dict(current_request_headers()) == {"A": "1", "B": "3"}
        assert dict(current_request_headers()) == {"A": "1", "B": "2"}
    assert dict(current_request_headers()) == {}


def test_header_values_must_be_strings() -> None:
    with (
        pytest.raises(TypeError, match="'Idempotency-Key': 3"),
        request_headers_scope({"Idempotency-Key": 3}),  # type: ignore[dict-item]
    ):
        pass
