"""Chat layer edge cases: sync chat() in a loop, cost, retries, keys never shown.

Every HTTP exchange goes to the loopback server of tests/chat/loopback.py (real sockets on
127.0.0.1). Async tests run on both anyio backends.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from deputy_runtime.chat import Chat, RetryPolicy, ScriptedProvider, Usage, chat, reply
from deputy_runtime.errors import (
    AuthenticationError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from tests.chat.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.anyio

KEY = "sk-audit-secret-7f3a9"
OPENAI_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}
FAST = RetryPolicy(initial_delay=0.001, max_delay=0.002)


def _compatible(server: LoopbackServer, **kw: Any) -> Chat:
    kw.setdefault("retry", FAST)
    return chat("openai_compatible/m", base_url=server.url + "/v1", api_key=KEY, **kw)


async def test_sync_chat_in_a_running_loop_sends_nothing_but_works_from_a_thread() -> None:
    with LoopbackServer([Reply.json(OPENAI_OK)]) as server:
        conversation = _compatible(server)
        with pytest.raises(RuntimeError, match=r"chat_async") as info:
            conversation.chat("hello")
        assert "event loop" in str(info.value)
        assert server.requests == []
        assert conversation.get_turns() == []
        # A worker thread has no running loop: there the sync call is allowed.
        answer = await anyio.to_thread.run_sync(conversation.chat, "hello")
        assert answer == "Hi!"
        assert len(server.requests) == 1
        assert [turn.role for turn in conversation.get_turns()] == ["user", "assistant"]


def test_sync_chat_outside_a_loop_twice_over_http() -> None:
    # Two sync calls are two event loops; the provider's client must survive both.
    with LoopbackServer([Reply.json(OPENAI_OK), Reply.json(OPENAI_OK)]) as server:
        conversation = _compatible(server)
        assert conversation.chat("one") == "Hi!"
        assert conversation.chat("two") == "Hi!"
        assert len(server.requests) == 2
        assert len(server.requests[1].json["messages"]) == 3
        assert len(conversation.get_turns()) == 4


async def test_cost_over_http_is_unknown_and_tokens_count_completed_requests() -> None:
    limited = Reply.json(
        {"error": {"message": "slow down", "type": "rate_limit"}}, 429, {"retry-after": "0"}
    )
    with LoopbackServer([limited, Reply.json(OPENAI_OK)]) as server:
        conversation = _compatible(server)
        assert await conversation.chat_async("hello") == "Hi!"
        assert len(server.requests) == 2  # the 429 and its retry
    # The retried attempt is one model request; the failed one reported no usage.
    assert conversation.get_tokens() == [Usage(requests=1, input_tokens=5, output_tokens=2)]
    assert conversation.get_cost() is None
    assert conversation.get_cost("last") is None


async def test_get_cost_sums_known_costs_and_last_follows_the_latest_request() -> None:
    priced = Usage(requests=1, input_tokens=10, output_tokens=1, cost_usd=0.5)
    provider = ScriptedProvider([reply("a", usage=priced), "b", reply("c", usage=priced)])
    conversation = Chat(provider)
    assert conversation.get_cost() is None
    assert conversation.get_cost("last") is None
    await conversation.chat_async("1")
    await conversation.chat_async("2")
    assert conversation.get_cost() == pytest.approx(0.5)
    assert conversation.get_cost("last") is None  # the latest request reported no cost
    await conversation.chat_async("3")
    assert conversation.get_cost() == pytest.approx(1.0)
    assert conversation.get_cost("last") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="include must be 'all' or 'last'"):
        conversation.get_cost("first")  # type: ignore[arg-type]


async def test_retry_budget_smaller_than_retry_after_gives_up_after_one_request() -> None:
    limited = Reply.json(
        {"error": {"message": "slow down", "type": "rate_limit"}}, 429, {"retry-after": "30"}
    )
    policy = RetryPolicy(max_retries=5, initial_delay=0.001, max_delay=0.002, budget=1.0)
    with LoopbackServer([limited, Reply.json(OPENAI_OK)]) as server:
        conversation = _compatible(server, retry=policy)
        with anyio.fail_after(10), pytest.raises(RateLimitError) as info:
            await conversation.chat_async("hello")
        assert len(server.requests) == 1
    assert info.value.status == 429
    assert "slow down" in str(info.value)
    assert conversation.get_turns() == []


ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude",
    "content": [{"type": "text", "text": "Hi!"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 2},
}


def _http_chat(kind: str, server: LoopbackServer, **kw: Any) -> Chat:
    kw.setdefault("retry", FAST)
    spec = "openai/m" if kind == "openai" else "anthropic/m"
    return chat(spec, base_url=server.url + "/v1", api_key=KEY, **kw)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [408, 409, 504])
async def test_408_409_504_are_retried_then_succeed(kind: str, status: int) -> None:
    # 408 and 409 are among the retried statuses; no other test sends them.
    ok = OPENAI_OK if kind == "openai" else ANTHROPIC_OK
    failed = Reply.json({"error": {"message": f"try again ({status})", "type": "x"}}, status)
    with LoopbackServer([failed, Reply.json(ok)]) as server:
        conversation = _http_chat(kind, server)
        assert await conversation.chat_async("hello") == "Hi!"
        assert len(server.requests) == 2
        assert server.requests[0].body == server.requests[1].body  # the same request again
    assert [turn.role for turn in conversation.get_turns()] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("status", "error"),
    [(408, ProviderTimeoutError), (409, ProviderError), (504, ProviderTimeoutError)],
)
async def test_retried_statuses_exhausted_raise_the_typed_error(
    status: int, error: type[ProviderError]
) -> None:
    failed = Reply.json({"error": {"message": "still busy", "type": "x"}}, status)
    with LoopbackServer([failed] * 3) as server:
        conversation = _http_chat("openai", server, max_retries=2)
        with pytest.raises(error) as info:
            await conversation.chat_async("hello")
        assert len(server.requests) == 3
    assert type(info.value) is error
    assert info.value.status == status
    assert "still busy" in str(info.value)
    assert conversation.get_turns() == []


SPECS = {
    "openai/gpt-x": "OPENAI_API_KEY",
    "anthropic/claude-x": "ANTHROPIC_API_KEY",
    "openai_compatible/m": None,
    "ollama/llama": None,
}


def _shown(conversation: Chat) -> str:
    provider = conversation.provider
    parts = [repr(conversation), str(conversation), repr(conversation.clone())]
    parts += [repr(provider), str(provider), repr(vars(provider))]
    parts += [repr(provider.with_model("other"))]
    return "\n".join(parts)


@pytest.mark.parametrize("spec", list(SPECS))
def test_keys_never_in_repr_whether_passed_or_from_the_environment(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kw: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1"}
    assert KEY not in _shown(chat(spec, api_key=KEY, **kw))
    env = SPECS[spec]
    if env is not None:
        monkeypatch.setenv(env, KEY)
        assert KEY not in _shown(chat(spec, **kw))


async def test_compatible_key_is_sent_but_never_in_the_error() -> None:
    body = {"error": {"message": "invalid key", "type": "authentication_error"}}
    with LoopbackServer([Reply.json(body, 401)]) as server:
        conversation = _compatible(server)
        with pytest.raises(AuthenticationError) as info:
            await conversation.chat_async("hello")
        assert len(server.requests) == 1  # 401 is never retried
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "invalid key" in str(info.value)
    assert KEY not in str(info.value) + repr(info.value) + repr(info.value.body)
    assert conversation.get_turns() == []
