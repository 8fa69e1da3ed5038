"""Fault injection against the loopback server: retries, budgets, typed errors, timeouts,
broken streams and cancellation, for both wire formats. Every test asserts how many
requests the server saw. Backoff is made tiny (or recorded instead of slept) through the
providers' constructor arguments, so nothing here waits for long."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deputy_runtime.chat import (
    AnthropicProvider,
    AssistantTurn,
    ContentText,
    HTTPProvider,
    ModelRequest,
    OpenAIProvider,
    RetryPolicy,
    StreamDelta,
    Turn,
)
from deputy_runtime.chat._http import _retry_after, error_from_response
from deputy_runtime.errors import (
    AuthenticationError,
    BadRequestError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from tests.chat.loopback import LoopbackServer, Reply, anthropic_sse, openai_sse

pytestmark = pytest.mark.anyio

KEY = "sk-secret-do-not-leak-42"
REQUEST = ModelRequest(None, (Turn("user", (ContentText("hello"),)),))
OK = {
    "openai": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi!"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": "Hi!"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    },
}


def error_body(kind: str, message: str, type_: str) -> dict[str, Any]:
    if kind == "openai":
        return {"error": {"message": message, "type": type_, "param": None, "code": type_}}
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_1"}


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Sleeps:
    """Records the waits the retry loop asks for instead of sleeping them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.sleep(0)


def make(
    kind: str, server: LoopbackServer, sleeps: Sleeps | None = None, **kw: Any
) -> HTTPProvider:
    policy = RetryPolicy(initial_delay=0.001, max_delay=0.004, sleep=sleeps or anyio.sleep)
    kw.setdefault("retry", policy)
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    return cls("m", api_key=KEY, base_url=server.url + "/v1", **kw)


async def call(provider: HTTPProvider, stream: bool = False) -> AssistantTurn:
    try:
        if stream:
            items = [x async for x in provider.stream(REQUEST)]
            assert isinstance(items[-1], AssistantTurn)
            return items[-1]
        return await provider.complete(REQUEST)
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("headers", "wait"),
    [({"retry-after": "2"}, 2.0), ({"retry-after-ms": "150", "retry-after": "9"}, 0.15)],
)
async def test_429_with_retry_after_then_success(
    kind: str, headers: dict[str, str], wait: float
) -> None:
    replies = [
        Reply.json(error_body(kind, "Rate limit reached", "rate_limit_error"), 429, headers),
        Reply.json(OK[kind]),
    ]
    sleeps = Sleeps()
    with LoopbackServer(replies) as server:
        turn = await call(make(kind, server, sleeps))
    assert turn.text == "Hi!"
    assert len(server.requests) == 2
    assert sleeps.waits == [wait]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_500_502_503_then_success(kind: str, stream: bool) -> None:
    replies = [Reply.json(error_body(kind, f"boom {s}", "api_error"), s) for s in (500, 502, 503)]
    ok = OK[kind]
    replies.append(
        Reply.sse(openai_sse(ok) if kind == "openai" else anthropic_sse(ok))
        if stream
        else Reply.json(ok)
    )
    sleeps = Sleeps()
    with LoopbackServer(replies) as server:
        turn = await call(make(kind, server, sleeps, max_retries=3), stream=stream)
    assert turn.text == "Hi!"
    assert len(server.requests) == 4
    # Exponential backoff with up to 25% jitter: 1ms, 2ms, 4ms (capped at max_delay).
    assert [
        round(w / b, 2) >= 0.75 and w <= b
        for w, b in zip(sleeps.waits, (0.001, 0.002, 0.004), strict=True)
    ] == [True] * 3


async def test_rate_limit_budget_of_retries_exhausted(kind: str) -> None:
    body = error_body(kind, "Rate limit reached for requests", "rate_limit_error")
    with (
        LoopbackServer([Reply.json(body, 429)] * 3) as server,
        pytest.raises(RateLimitError) as info,
    ):
        await call(make(kind, server, max_retries=2))
    assert len(server.requests) == 3
    assert info.value.status == 429
    assert info.value.provider == kind
    assert "Rate limit reached for requests [rate_limit_error]" in str(info.value)
    assert "gave up after 3 attempt(s)" in str(info.value)


async def test_retry_after_beyond_the_time_budget_is_not_waited_for(kind: str) -> None:
    body = error_body(kind, "slow down", "rate_limit_error")
    sleeps = Sleeps()
    with (
        LoopbackServer([Reply.json(body, 429, {"retry-after": "30"})]) as server,
        pytest.raises(RateLimitError, match="retry budget of 5s"),
    ):
        await call(make(kind, server, sleeps, retry_budget=5))
    assert len(server.requests) == 1
    assert sleeps.waits == []


async def test_server_errors_exhausted_are_provider_errors(kind: str) -> None:
    with (
        LoopbackServer(
            [Reply.json(error_body(kind, "Overloaded", "overloaded_error"), 529)] * 2
        ) as server,
        pytest.raises(ProviderError) as info,
    ):
        await call(make(kind, server, max_retries=1))
    assert type(info.value) is ProviderError
    assert info.value.status == 529
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "error", "type_"),
    [
        (401, AuthenticationError, "authentication_error"),
        (403, AuthenticationError, "permission_error"),
        (400, BadRequestError, "invalid_request_error"),
        (404, BadRequestError, "not_found_error"),
        (429, RateLimitError, "insufficient_quota"),
    ],
)
async def test_client_errors_are_not_retried(
    kind: str, status: int, error: type[ProviderError], type_: str
) -> None:
    sleeps = Sleeps()
    with (
        LoopbackServer(
            [Reply.json(error_body(kind, "Nope: check your request", type_), status)]
        ) as server,
        pytest.raises(
            error, match=rf"HTTP {status}\): Nope: check your request \[{type_}\]"
        ) as info,
    ):
        await call(make(kind, server, sleeps))
    assert len(server.requests) == 1
    assert sleeps.waits == []
    assert info.value.body == error_body(kind, "Nope: check your request", type_)


async def test_x_should_retry_header_overrides(kind: str) -> None:
    replies = [Reply.json(error_body(kind, "no", "api_error"), 500, {"x-should-retry": "false"})]
    with LoopbackServer(replies) as server, pytest.raises(ProviderError, match="HTTP 500"):
        await call(make(kind, server))
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            Reply(502, {"content-type": "text/html"}, b"<html>Bad gateway</html>"),
            "<html>Bad gateway</html>",
        ),
        (Reply.json({"error": "model not loaded"}, 503), "model not loaded"),
        (Reply.json({"detail": "Not authenticated"}, 401), "Not authenticated"),
    ],
)
async def test_non_standard_error_bodies_keep_the_server_message(
    reply: Reply, message: str
) -> None:
    with LoopbackServer([reply]) as server, pytest.raises(ProviderError, match=message):
        await call(make("openai", server, max_retries=0))
    assert len(server.requests) == 1


async def test_connection_reset_before_response_is_retried(kind: str) -> None:
    with LoopbackServer([Reply(end="drop"), Reply.json(OK[kind])]) as server:
        turn = await call(make(kind, server))
    assert turn.text == "Hi!"
    assert len(server.requests) == 2


async def test_connection_refused_is_retried_then_a_provider_error(kind: str) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    provider = cls(
        "m", api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(sleep=sleeps)
    )
    with pytest.raises(ProviderError, match="connection failed"):
        await call(provider)
    assert len(sleeps.waits) == 2  # three attempts


async def test_connection_reset_mid_stream(kind: str) -> None:
    body = openai_sse(OK[kind])[:120] if kind == "openai" else anthropic_sse(OK[kind])[:400]
    with (
        LoopbackServer([Reply.sse(body, end="reset")]) as server,
        anyio.fail_after(10),
        pytest.raises(ProviderError, match="stream"),
    ):
        await call(make(kind, server), stream=True)
    assert len(server.requests) == 1


async def test_stream_without_final_event(kind: str) -> None:
    body = (
        openai_sse(OK[kind], done=False)
        if kind == "openai"
        else anthropic_sse(OK[kind], stop=False)
    )
    with (
        LoopbackServer([Reply.sse(body)]) as server,
        anyio.fail_after(10),
        pytest.raises(ProviderError, match="ended before it was complete"),
    ):
        await call(make(kind, server), stream=True)
    assert len(server.requests) == 1


async def test_slow_server_times_out_after_retries(kind: str) -> None:
    with (
        LoopbackServer([Reply.json(OK[kind], delay=5)] * 2) as server,
        anyio.fail_after(10),
        pytest.raises(ProviderTimeoutError, match="timed out") as info,
    ):
        await call(make(kind, server, timeout=0.2, max_retries=1))
    assert len(server.requests) == 2
    assert "gave up after 2 attempt(s)" in str(info.value)


async def test_stalled_stream_times_out_without_retry(kind: str) -> None:
    head = openai_sse(OK[kind])[:150] if kind == "openai" else anthropic_sse(OK[kind])[:300]
    with (
        LoopbackServer([Reply.sse(head, end="hang")]) as server,
        anyio.fail_after(10),
        pytest.raises(ProviderTimeoutError, match="stalled"),
    ):
        await call(make(kind, server, timeout=0.2), stream=True)
    assert len(server.requests) == 1


async def test_api_key_never_in_errors_or_logs(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with (
        LoopbackServer(
            [Reply.json(error_body(kind, "bad key", "authentication_error"), 401)]
        ) as server,
        pytest.raises(AuthenticationError) as info,
    ):
        await call(make(kind, server))
    assert (
        server.requests[0]
        .headers.get("authorization", server.requests[0].headers.get("x-api-key", ""))
        .endswith(KEY)
    )
    assert KEY not in caplog.text
    assert KEY not in str(info.value) + repr(info.value.body)


async def _wait_for(predicate: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not predicate():
            await anyio.sleep(0.005)


async def _server_saw_disconnect(server: LoopbackServer) -> bool:
    return await anyio.to_thread.run_sync(server.disconnected.wait, 5)


async def test_cancelling_complete_mid_flight_closes_the_connection(kind: str) -> None:
    with LoopbackServer([Reply.json(OK[kind], delay=30)]) as server:
        provider = make(kind, server)
        async with anyio.create_task_group() as tg:
            tg.start_soon(provider.complete, REQUEST)
            await _wait_for(lambda: len(server.requests) == 1)
            tg.cancel_scope.cancel()
        assert await _server_saw_disconnect(server)
        await provider.aclose()
    assert len(server.requests) == 1
    assert server.disconnects == 1


async def _consume(provider: HTTPProvider, first: anyio.Event, got: list[Any]) -> None:
    async for item in provider.stream(REQUEST):
        got.append(item)
        first.set()


@pytest.mark.parametrize("how", ["cancel", "aclose"])
async def test_cancelling_a_stream_mid_flight_closes_the_response(kind: str, how: str) -> None:
    # The records up to and including the first text delta, then the server goes quiet.
    full = openai_sse(OK[kind]) if kind == "openai" else anthropic_sse(OK[kind])
    head = "\n\n".join(full.split("\n\n")[: 2 if kind == "openai" else 4]) + "\n\n"
    with LoopbackServer([Reply.sse(head, sizes=None, end="hang")]) as server, anyio.fail_after(10):
        provider = make(kind, server)
        got: list[Any] = []
        if how == "cancel":
            first = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_consume, provider, first, got)
                await first.wait()
                tg.cancel_scope.cancel()
        else:
            async with aclosing(provider.stream(REQUEST)) as items:  # type: ignore[type-var]
                async for item in items:
                    got.append(item)
                    break
        assert await _server_saw_disconnect(server)
        await provider.aclose()
    assert got
    assert all(isinstance(x, StreamDelta) for x in got)  # no half turn was produced
    assert len(server.requests) == 1


def test_retry_after_header_forms() -> None:
    import httpx

    assert _retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert _retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert _retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert _retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert _retry_after(httpx.Headers({})) is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": True}, "max_retries"),
        ({"budget": -1.0}, "budget"),
        ({"initial_delay": "1"}, "initial_delay"),
    ],
)
def test_retry_policy_validation(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**kwargs)


@settings(max_examples=200, deadline=None)
@given(
    status=st.integers(400, 599),
    body=st.binary(max_size=200)
    | st.builds(
        lambda o: json.dumps(o).encode(),
        st.recursive(
            st.none() | st.text(max_size=20) | st.integers(),
            lambda c: (
                st.lists(c, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["error", "message", "type", "detail", "code"]), c, max_size=4
                )
            ),
            max_leaves=8,
        ),
    ),
)
def test_any_error_body_maps_to_a_typed_error(status: int, body: bytes) -> None:
    """Hostile or odd error bodies never crash the mapping and keep the status."""
    error = error_from_response("openai", status, body)
    assert isinstance(error, ProviderError)
    assert error.status == status
    assert f"HTTP {status}" in str(error)
    assert isinstance(error, RateLimitError) == (status == 429)
    assert isinstance(error, AuthenticationError) == (status in (401, 403))


@settings(max_examples=100, deadline=None)
@given(
    key=st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=60
    )
)
def test_api_key_never_appears_in_repr(key: str) -> None:
    def shown(cls: Any, api_key: str) -> str:
        provider = cls("model-x", api_key=api_key, base_url="http://127.0.0.1:9/v1")
        return repr(provider) + repr(provider.with_model("y")) + repr(provider._session)

    for cls in (OpenAIProvider, AnthropicProvider):
        # A key that is part of the repr anyway ('Anthropi') proves nothing either way.
        assume(key not in shown(cls, "k"))
        assert key not in shown(cls, key)


def test_providers_satisfy_the_protocol() -> None:
    from deputy_runtime.chat import Provider

    for cls in (OpenAIProvider, AnthropicProvider):
        assert isinstance(cls("m", api_key="k"), Provider)


@pytest.mark.parametrize("explicit", [True, False], ids=["provider-timeout", "client-timeout"])
async def test_injected_client_timeouts(explicit: bool) -> None:
    """Explicit provider timeouts apply to an injected client; otherwise its own do."""
    import httpx

    client_timeout = 60.0 if explicit else 0.2
    async with httpx.AsyncClient(timeout=client_timeout) as client:
        with LoopbackServer([Reply.json(OK["openai"], delay=5)]) as server:
            kw: dict[str, Any] = {"timeout": 0.2} if explicit else {}
            provider = make("openai", server, client=client, max_retries=0, **kw)
            with anyio.fail_after(10), pytest.raises(ProviderTimeoutError):
                await provider.complete(REQUEST)
        assert len(server.requests) == 1
        assert not client.is_closed  # an injected client is never closed by the provider
        await provider.aclose()
        assert not client.is_closed
