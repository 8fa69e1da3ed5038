"""Hostile retry hints and hostile usage reports.

A ``retry-after`` of ``nan``, ``inf`` or a negative number is ignored (our own backoff
applies) and an absurd one ends the retries; nothing but typed errors leaves the client.
Usage that cannot be true (negative or absurd token counts, a negative cost) rejects the
response with InvalidUsageError and is never counted, so limits stay in force.
"""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import Agent, Chat, UsageLimits, tool
from deputy_runtime.chat import AssistantTurn
from deputy_runtime.chat._http import RetryPolicy, _retry_after
from deputy_runtime.chat._openai import OpenAICompatibleProvider
from deputy_runtime.errors import InvalidUsageError, ProviderError, RateLimitError
from tests.chat.hostile import KEY, OK, make, outcome
from tests.chat.loopback import LoopbackServer, Reply, Seen, anthropic_sse, openai_sse

pytestmark = pytest.mark.anyio


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


def rate_limited(headers: dict[str, str]) -> Reply:
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    return Reply.json(body, 429, headers)


# -- 3. retry hints ------------------------------------------------------------------------

HOSTILE_HINTS = [
    {"retry-after": "nan"},
    {"retry-after": "NaN"},
    {"retry-after": "inf"},
    {"retry-after": "-inf"},
    {"retry-after": "-5"},
    {"retry-after": "1e999"},
    {"retry-after-ms": "nan"},
    {"retry-after-ms": "-inf"},
    {"retry-after-ms": "-100"},
    {"retry-after-ms": "nan", "retry-after": "nan"},
    {"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"},
]


@pytest.mark.parametrize("headers", HOSTILE_HINTS, ids=lambda h: ",".join(h.values()))
async def test_retry_after_nan_inf_or_negative_falls_back_to_backoff(
    kind: str, headers: dict[str, str]
) -> None:
    sleeps = Sleeps()
    policy = RetryPolicy(initial_delay=0.001, max_delay=0.004, sleep=sleeps)
    with LoopbackServer([rate_limited(headers), Reply.json(OK[kind])]) as server:
        result = await outcome(make(kind, server.url, retry=policy), stream=False)
    assert isinstance(result, AssistantTurn)
    assert result.text == "Hi there!"
    assert len(server.requests) == 2
    assert len(sleeps.waits) == 1
    assert 0.00075 <= sleeps.waits[0] <= 0.001  # our own first backoff, jittered


@pytest.mark.parametrize("headers", [{"retry-after": "1e300"}, {"retry-after-ms": "1e300"}])
async def test_absurd_retry_after_ends_the_retries_with_a_typed_error(
    kind: str, headers: dict[str, str]
) -> None:
    sleeps = Sleeps()
    with LoopbackServer([rate_limited(headers)]) as server:
        result = await outcome(make(kind, server.url, retry=RetryPolicy(sleep=sleeps)), False)
    assert isinstance(result, RateLimitError)
    assert "retry budget" in str(result)
    assert sleeps.waits == []
    assert len(server.requests) == 1


async def test_retry_after_nan_does_not_escape_an_agent_run(kind: str) -> None:
    """Every answer is a 429 with ``retry-after: nan``: the run ends with a typed error."""
    with LoopbackServer(lambda seen: rate_limited({"retry-after": "nan"})) as server:
        provider = make(kind, server.url, max_retries=2)
        try:
            result = await Agent(Chat(provider)).run("go")
        finally:
            await provider.aclose()
    assert result.stop_reason == "provider_error"
    assert result.error is not None
    assert "HTTP 429" in result.error
    assert "gave up after 3 attempt(s)" in result.error
    assert len(server.requests) == 3


number_text = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(-(10**400), 10**400).map(str),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40),
    st.sampled_from(["nan", "-nan", "inf", "+inf", "Infinity", "1_000", " 3 ", "0x10", "1e-400"]),
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["retry-after", "retry-after-ms"]), value=number_text)
def test_any_retry_hint_parses_to_none_or_a_finite_non_negative_wait(name: str, value: str) -> None:
    headers = httpx.Headers({name.encode("latin-1"): value.encode("latin-1")})
    wait = _retry_after(headers)
    assert wait is None or (math.isfinite(wait) and wait >= 0)


# -- 4. reported usage ---------------------------------------------------------------------


def openai_with_usage(usage: dict[str, Any]) -> dict[str, Any]:
    return {**OK["openai"], "usage": usage}


def anthropic_with_usage(usage: dict[str, Any]) -> dict[str, Any]:
    return {**OK["anthropic"], "usage": usage}


BAD_USAGE: dict[str, list[tuple[dict[str, Any], str]]] = {
    "openai": [
        ({"prompt_tokens": -1000, "completion_tokens": 2}, "input_tokens is -1000"),
        ({"prompt_tokens": 5, "completion_tokens": -2}, "output_tokens is -2"),
        (
            {
                "prompt_tokens": 5,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": -1},
            },
            "cached_input_tokens is -1",
        ),
        ({"prompt_tokens": 2**60, "completion_tokens": 2}, f"input_tokens is {2**60}"),
        ({"prompt_tokens": 5, "completion_tokens": 2, "cost": -0.5}, "cost is -0.5"),
    ],
    "anthropic": [
        ({"input_tokens": -1000, "output_tokens": 2}, "input_tokens is -1000"),
        ({"input_tokens": 5, "output_tokens": -2}, "output_tokens is -2"),
        (
            {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": -7},
            "cache_read_input_tokens is -7",
        ),
        (
            {"input_tokens": 5, "output_tokens": 2, "cache_creation_input_tokens": -7},
            "cache_creation_input_tokens is -7",
        ),
        ({"input_tokens": 5, "output_tokens": 10**30}, f"output_tokens is {10**30}"),
    ],
}


def usage_cases() -> list[Any]:
    return [
        pytest.param(k, usage, expected, id=f"{k}-{expected}")
        for k, cases in BAD_USAGE.items()
        for usage, expected in cases
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(("which", "usage", "expected"), usage_cases())
async def test_impossible_usage_is_an_invalid_usage_error(
    which: str, usage: dict[str, Any], expected: str, stream: bool
) -> None:
    if which == "openai":
        body: dict[str, Any] = openai_with_usage(usage)
        reply = Reply.sse(openai_sse(body)) if stream else Reply.json(body)
    else:
        body = anthropic_with_usage(usage)
        reply = Reply.sse(anthropic_sse(body)) if stream else Reply.json(body)
    with LoopbackServer([reply]) as server:
        result = await outcome(make(which, server.url), stream)
    assert isinstance(result, InvalidUsageError)
    assert isinstance(result, ProviderError)
    assert "invalid usage: " + expected in str(result)
    assert len(server.requests) == 1  # not retried: the server said what it said


async def test_reported_cost_is_counted_when_valid() -> None:
    body = openai_with_usage({"prompt_tokens": 5, "completion_tokens": 2, "cost": 0.25})
    with LoopbackServer([Reply.json(body)]) as server:
        result = await outcome(make("openai", server.url), stream=False)
    assert isinstance(result, AssistantTurn)
    assert result.usage.cost_usd == 0.25


@tool(read_only=True)
def ping() -> str:
    """Answer pong."""
    return "pong"


def tool_call_reply(usage: dict[str, Any]) -> Any:
    def reply(seen: Seen) -> Reply:
        n = len(json.loads(seen.body)["messages"])
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
            ],
        }
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        return Reply.json({"choices": [choice], "usage": usage})

    return reply


@pytest.mark.parametrize(
    ("usage", "limits"),
    [
        (
            {"prompt_tokens": 5, "completion_tokens": 2, "cost": -1.0},
            UsageLimits(max_requests=40, max_cost_usd=0.01),
        ),
        (
            {"prompt_tokens": -100_000, "completion_tokens": 2},
            UsageLimits(max_requests=40, max_total_tokens=50),
        ),
    ],
    ids=["negative-cost", "negative-tokens"],
)
async def test_impossible_usage_cannot_disable_an_agents_limits(
    usage: dict[str, Any], limits: UsageLimits
) -> None:
    """A server that always asks for another tool call and reports impossible usage."""
    with LoopbackServer(tool_call_reply(usage)) as server:
        provider = OpenAICompatibleProvider("m", base_url=server.url + "/v1", api_key=KEY)
        try:
            result = await Agent(Chat(provider), tools=[ping], usage_limits=limits).run("go")
        finally:
            await provider.aclose()
    assert result.stop_reason == "provider_error"
    assert result.error is not None
    assert "invalid usage" in result.error
    assert len(server.requests) == 1  # the first impossible report ends the run
    assert result.usage.input_tokens == 0  # and was never counted
    assert not result.usage.cost_usd


async def test_valid_usage_reaches_the_limit() -> None:
    """The counterpart: with honest usage the same server is stopped by the limit."""
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "cost": 0.004}
    with LoopbackServer(tool_call_reply(usage)) as server:
        provider = OpenAICompatibleProvider("m", base_url=server.url + "/v1", api_key=KEY)
        limits = UsageLimits(max_requests=40, max_cost_usd=0.01)
        try:
            result = await Agent(Chat(provider), tools=[ping], usage_limits=limits).run("go")
        finally:
            await provider.aclose()
    assert result.stop_reason == "cost_limit"
    assert len(server.requests) == 3
