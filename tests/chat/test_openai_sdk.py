"""Cross-check: the official ``openai`` SDK, pointed at the loopback server, reads the same
responses, streams and errors to the same content as our provider.

This is what makes the loopback server (and the SSE re-encoding of recorded responses) a
credible stand-in for the real API. The SDK is a test-only dependency; it runs
synchronously here, so these tests need no event loop.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import openai
import pytest

from deputy_runtime.chat import AssistantTurn, OpenAIProvider
from deputy_runtime.errors import ProviderError, RateLimitError
from tests.chat.loopback import (
    LoopbackServer,
    Reply,
    load_exchanges,
    openai_expected,
    openai_replayable,
    openai_request,
    openai_sse,
    sse_record,
    turn_summary,
)

EXCHANGES = [
    e
    for e in load_exchanges("chat_completions.jsonl")
    + load_exchanges("chat_completions_history_text.jsonl")[:40:4]
    if openai_replayable(e["request"]["json"])
]

# One CA bundle load for the whole module: building an SSL context per client is slow.
_SSL = httpx.create_ssl_context()


def _id(e: dict[str, Any]) -> str:
    return f"{e['source'].rsplit('/', 1)[-1]}#{e['index']}"


def _ours(server: LoopbackServer, body: dict[str, Any], *, stream: bool) -> Any:
    async def run() -> Any:
        provider = OpenAIProvider(
            body["model"], api_key="k", base_url=server.url + "/v1", max_retries=0
        )
        try:
            if stream:
                return [x async for x in provider.stream(openai_request(body))][-1]
            return await provider.complete(openai_request(body))
        finally:
            await provider.aclose()

    return anyio.run(run)


def _sdk(server: LoopbackServer) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="k",
        base_url=server.url + "/v1",
        max_retries=0,
        # The SDK accepts an httpx.Client (it checks for one) but annotates only httpx2.Client.
        http_client=httpx.Client(verify=_SSL),  # type: ignore[arg-type]
    )


def _summary(completion: Any) -> dict[str, Any]:
    return {**openai_expected(completion.model_dump()), "thinking": []}


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_id)
def test_sdk_and_provider_agree_on_recorded_response(exchange: dict[str, Any]) -> None:
    body, response = exchange["request"]["json"], exchange["response"]["json"]
    with LoopbackServer([Reply.json(response), Reply.json(response)]) as server:
        sdk = _sdk(server).chat.completions.create(**body)
        ours = _ours(server, body, stream=False)
    assert turn_summary(ours) == _summary(sdk)
    # Both clients sent the same request body.
    assert server.requests[0].json == server.requests[1].json | {"stream": False}


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_id)
def test_sdk_and_provider_agree_on_streamed_response(exchange: dict[str, Any]) -> None:
    body, response = exchange["request"]["json"], exchange["response"]["json"]
    stream_body = {**body, "stream_options": {"include_usage": True}}
    stream_body.pop("stream")
    sse = openai_sse(response)
    with LoopbackServer([Reply.sse(sse, seed=1), Reply.sse(sse, seed=2)]) as server:
        with _sdk(server).chat.completions.stream(**stream_body) as events:
            final = events.get_final_completion()
        ours = _ours(server, body, stream=True)
    assert isinstance(ours, AssistantTurn)
    summary = _summary(final)
    assert turn_summary(ours) == summary
    assert summary == {**openai_expected(response), "thinking": []}


def test_sdk_and_provider_agree_on_error_bodies() -> None:
    body = EXCHANGES[0]["request"]["json"]
    error = {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    with LoopbackServer([Reply.json(error, 429), Reply.json(error, 429)]) as server:
        with pytest.raises(openai.RateLimitError) as sdk_error:
            _sdk(server).chat.completions.create(**body)
        with pytest.raises(RateLimitError) as our_error:
            _ours(server, body, stream=False)
    assert sdk_error.value.status_code == our_error.value.status == 429
    # Both surface the server's own message; ours also keeps the parsed body.
    assert "Rate limit reached for requests" in sdk_error.value.message
    assert "Rate limit reached for requests [requests]" in str(our_error.value)
    assert our_error.value.body == error


def test_sdk_and_provider_both_reject_a_mid_stream_error_payload() -> None:
    body = EXCHANGES[3]["request"]["json"]
    response = EXCHANGES[3]["response"]["json"]
    head = openai_sse(response, usage=False, done=False).split("\n\n")[:2]
    sse = (
        "\n\n".join(head)
        + "\n\n"
        + sse_record({"error": {"message": "The server had an error", "type": "server_error"}})
    )
    with LoopbackServer([Reply.sse(sse), Reply.sse(sse)]) as server:
        with pytest.raises(openai.APIError, match="The server had an error"):
            for _ in _sdk(server).chat.completions.create(**{**body, "stream": True}):
                pass
        with pytest.raises(ProviderError, match="The server had an error"):
            _ours(server, body, stream=True)
