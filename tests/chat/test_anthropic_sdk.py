"""Cross-check: the official ``anthropic`` SDK, pointed at the loopback server, reads the
same responses, streams and errors to the same content as our provider (test-only
dependency, used synchronously)."""

from __future__ import annotations

from typing import Any

import anthropic
import anyio
import httpx2  # the anthropic SDK's own fork of httpx
import pytest

from deputy_runtime.chat import AnthropicProvider
from deputy_runtime.errors import AuthenticationError, ProviderError
from tests.chat.loopback import (
    LoopbackServer,
    Reply,
    anthropic_expected,
    anthropic_replayable,
    anthropic_request,
    anthropic_sse,
    load_exchanges,
    sse_record,
    turn_summary,
)

EXCHANGES = [
    e
    for e in load_exchanges("anthropic_messages.jsonl")
    if anthropic_replayable(e["request"]["json"])
]

# One CA bundle load for the whole module: building an SSL context per client is slow.
_SSL = httpx2.create_ssl_context()


def _id(e: dict[str, Any]) -> str:
    return f"{e['source'].rsplit('/', 1)[-1]}#{e['index']}"


def _ours(server: LoopbackServer, body: dict[str, Any], *, stream: bool) -> Any:
    async def run() -> Any:
        provider = AnthropicProvider(
            body["model"], api_key="k", base_url=server.url + "/v1", max_retries=0
        )
        try:
            if stream:
                return [x async for x in provider.stream(anthropic_request(body))][-1]
            return await provider.complete(anthropic_request(body))
        finally:
            await provider.aclose()

    return anyio.run(run)


def _sdk(server: LoopbackServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="k", base_url=server.url, max_retries=0, http_client=httpx2.Client(verify=_SSL)
    )


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_id)
def test_sdk_and_provider_agree_on_recorded_response(exchange: dict[str, Any]) -> None:
    body, response = exchange["request"]["json"], exchange["response"]["json"]
    with LoopbackServer([Reply.json(response), Reply.json(response)]) as server:
        sdk = _sdk(server).messages.create(**body)
        ours = _ours(server, body, stream=False)
    assert turn_summary(ours) == anthropic_expected(sdk.model_dump())
    assert server.requests[0].json == server.requests[1].json


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_id)
def test_sdk_and_provider_agree_on_streamed_response(exchange: dict[str, Any]) -> None:
    body, response = exchange["request"]["json"], exchange["response"]["json"]
    sse = anthropic_sse(response)
    stream_body = {k: v for k, v in body.items() if k != "stream"}
    with LoopbackServer([Reply.sse(sse, seed=1), Reply.sse(sse, seed=2)]) as server:
        with _sdk(server).messages.stream(**stream_body) as events:
            final = events.get_final_message()
        ours = _ours(server, body, stream=True)
    summary = anthropic_expected(final.model_dump())
    assert turn_summary(ours) == summary
    assert summary == anthropic_expected(response)


def test_sdk_and_provider_agree_on_error_bodies() -> None:
    body = EXCHANGES[0]["request"]["json"]
    error = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": "req_1",
    }
    with LoopbackServer([Reply.json(error, 401), Reply.json(error, 401)]) as server:
        with pytest.raises(anthropic.AuthenticationError, match="invalid x-api-key"):
            _sdk(server).messages.create(**body)
        with pytest.raises(
            AuthenticationError, match=r"invalid x-api-key \[authentication_error\]"
        ):
            _ours(server, body, stream=False)


def test_sdk_and_provider_both_reject_a_mid_stream_error_event() -> None:
    body = EXCHANGES[0]["request"]["json"]
    head = anthropic_sse(EXCHANGES[0]["response"]["json"]).split("\n\n")[:3]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    sse = "\n\n".join(head) + "\n\n" + sse_record(error, "error")
    stream_body = {k: v for k, v in body.items() if k != "stream"}
    with LoopbackServer([Reply.sse(sse), Reply.sse(sse)]) as server:
        with (
            pytest.raises(anthropic.APIStatusError, match="Overloaded"),
            _sdk(server).messages.stream(**stream_body) as events,
        ):
            events.get_final_message()
        with pytest.raises(ProviderError, match=r"Overloaded \[overloaded_error\]"):
            _ours(server, body, stream=True)
