"""Anthropic Messages against a loopback server replaying recorded exchanges.

Same shape as test_openai.py: rebuild each recorded request from our types, send it to a
real socket, compare what arrived with what ellmer sent, and compare the parsed turn with
the recorded response; then replay the response as an SSE stream in random chunks.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from deputy_runtime.chat import (
    AnthropicProvider,
    AssistantTurn,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    ToolSpec,
    Turn,
)
from tests.chat.loopback import (
    LoopbackServer,
    Reply,
    anthropic_expected,
    anthropic_replayable,
    anthropic_request,
    anthropic_sse,
    load_exchanges,
    turn_summary,
)

pytestmark = pytest.mark.anyio

ALL = load_exchanges("anthropic_messages.jsonl")
EXCHANGES = [e for e in ALL if anthropic_replayable(e["request"]["json"])]


def _id(e: dict[str, Any]) -> str:
    return f"{e['source'].rsplit('/', 1)[-1]}#{e['index']}"


def _provider(server: LoopbackServer, **kw: Any) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-sonnet-5", api_key="sk-ant-test", base_url=server.url + "/v1", **kw
    )


def test_enough_exchanges_are_replayable() -> None:
    assert len(EXCHANGES) >= 15
    kinds = {
        b["type"] for e in EXCHANGES for m in e["request"]["json"]["messages"] for b in m["content"]
    }
    assert {"text", "tool_use", "tool_result"} <= kinds


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_id)
async def test_complete_sends_recorded_request_and_parses_recorded_response(
    exchange: dict[str, Any],
) -> None:
    recorded = exchange["request"]["json"]
    with LoopbackServer([Reply.json(exchange["response"]["json"])]) as server:
        async with _provider(server, max_retries=0) as provider:
            turn = await provider.complete(anthropic_request(recorded))
    [seen] = server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/messages")
    assert seen.headers["x-api-key"] == "sk-ant-test"
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.json == recorded
    assert turn_summary(turn) == anthropic_expected(exchange["response"]["json"])
    assert turn.usage.requests == 1


@pytest.mark.parametrize("exchange", ALL, ids=_id)
def test_every_recorded_response_parses(exchange: dict[str, Any]) -> None:
    # Includes image, PDF and web_fetch exchanges; server-tool blocks are skipped.
    provider = AnthropicProvider("m", api_key="k")
    raw = json.dumps(exchange["response"]["json"]).encode()
    assert turn_summary(provider._parse(raw, 0.0)) == anthropic_expected(
        exchange["response"]["json"]
    )


STREAM_CASES = [(e, "random") for e in ALL] + [
    (e, 1) for e in ALL if e["source"].endswith(("anthropic-tool.yml", "chat_anthropic.yml"))
]


@pytest.mark.parametrize(
    ("exchange", "sizes"), STREAM_CASES, ids=[f"{_id(e)}-{s}" for e, s in STREAM_CASES]
)
async def test_stream_replays_recorded_response_in_any_chunking(
    exchange: dict[str, Any], sizes: int | str
) -> None:
    response = exchange["response"]["json"]
    body = anthropic_sse(response)
    reply = Reply.sse(body, sizes=sizes, seed=exchange["index"])  # type: ignore[arg-type]
    recorded = exchange["request"]["json"]
    replayable = anthropic_replayable(recorded)
    if replayable:
        request = anthropic_request(recorded)
    else:  # images, documents, server tools: only the response side is checked
        request = ModelRequest("sys", (Turn("user", (ContentText("hi"),)),))
    with LoopbackServer([reply]) as server:
        async with _provider(server, max_retries=0) as provider:
            items = [x async for x in provider.stream(request)]
    sent = server.requests[0].json
    assert sent.pop("stream") is True
    if replayable:
        assert sent == {k: v for k, v in recorded.items() if k != "stream"}
    *deltas, turn = items
    assert isinstance(turn, AssistantTurn)
    assert all(isinstance(d, StreamDelta) for d in deltas)
    assert "".join(d.text for d in deltas) == turn.text
    assert turn_summary(turn) == anthropic_expected(response)


def test_parsed_turn_is_what_the_next_recorded_request_replays() -> None:
    """Our parsed reply serialises as ellmer re-sent it, except that we keep thinking blocks.

    (ellmer drops thinking blocks when replaying; Anthropic needs them when thinking
    precedes tool use, so they are preserved here.)
    """
    provider = AnthropicProvider("m", api_key="k", cache="none")
    checked = 0
    for first, second in itertools.pairwise(ALL):
        if first["source"] != second["source"] or second["index"] != first["index"] + 1:
            continue
        if "structured" in first["source"]:
            continue  # ellmer turns its forced structured-output tool call into text
        before = first["request"]["json"]["messages"]
        after = second["request"]["json"]["messages"]
        if len(after) <= len(before) or after[len(before)]["role"] != "assistant":
            continue
        if any(b["type"].startswith(("server_", "web_")) for b in after[len(before)]["content"]):
            continue  # server-tool blocks (web_fetch) have no content type here
        turn = provider._parse(json.dumps(first["response"]["json"]).encode(), 0.0).turn()
        request = ModelRequest(None, (turn,))
        [sent] = provider._build_body(request, stream=False)["messages"]
        replayed = [b for b in sent["content"] if b["type"] != "thinking"]
        assert replayed == after[len(before)]["content"]
        checked += 1
    assert checked >= 3


def test_tool_results_lead_the_user_message_and_thinking_is_replayed() -> None:
    turns = (
        Turn("user", (ContentText("weather?"),)),
        Turn(
            "assistant",
            (
                ContentThinking("plan", signature="sig"),
                ContentThinking("", redacted="opaque"),
                ContentThinking("from another provider"),
                ContentText("checking"),
                ContentToolRequest("t1", "w", {"city": "Paris"}),
                ContentToolRequest("t2", "w", {"city": "Rome"}),
            ),
        ),
        Turn(
            "user",
            (
                ContentText("also"),
                ContentToolResult("t1", {"temp": 21}),
                ContentToolResult("t2", error="boom"),
            ),
        ),
        Turn("user", (ContentText("  "),)),
    )
    tools = (
        ToolSpec("w", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
    )
    body = AnthropicProvider("m", api_key="k")._build_body(
        ModelRequest("S", turns, tools), stream=False
    )
    assert body["system"] == [
        {"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "5m"}}
    ]
    _user, assistant, results = body["messages"]
    assert assistant["content"][:2] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert [b["type"] for b in assistant["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    # Consecutive user turns merge (roles must alternate); results come first.
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": '{"temp":21}', "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": "Tool calling failed with error boom",
            "is_error": True,
        },
        {"type": "text", "text": "also"},
        {
            "type": "text",
            "text": "[empty string]",
            "cache_control": {"type": "ephemeral", "ttl": "5m"},
        },
    ]
    assert body["max_tokens"] == 4096
    assert body["tools"][0]["input_schema"]["properties"] == {"city": {"type": "string"}}


def test_reasoning_effort_is_sent_as_output_config_effort() -> None:
    provider = AnthropicProvider("m", api_key="k", params={"reasoning_effort": "xhigh"})
    request = ModelRequest(None, (Turn("user", (ContentText("x"),)),), (), {})
    body = provider._build_body(request, stream=False)
    assert body["output_config"] == {"effort": "xhigh"}
    assert "reasoning_effort" not in body
    # An explicit output_config keeps its own effort and its other keys.
    explicit = {"reasoning_effort": "low", "output_config": {"effort": "max", "format": "x"}}
    request = ModelRequest(None, (Turn("user", (ContentText("x"),)),), (), explicit)
    assert provider._build_body(request, stream=False)["output_config"] == {
        "effort": "max",
        "format": "x",
    }


def test_params_and_options() -> None:
    provider = AnthropicProvider(
        "m", api_key="k", max_tokens=100, cache="none", params={"seed": 1, "temperature": 0.2}
    )
    request = ModelRequest(
        None, (Turn("user", (ContentText("x"),)),), (), {"reasoning_tokens": 1024, "top_k": 5}
    )
    body = provider._build_body(request, stream=True)
    assert body["max_tokens"] == 100
    assert "seed" not in body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["top_k"] == 5
    assert body["temperature"] == 0.2
    assert "cache_control" not in body["messages"][0]["content"][0]
    with pytest.raises(ValueError, match="cache"):
        AnthropicProvider("m", api_key="k", cache="forever")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicProvider("m", api_key="k", max_tokens=0)


def test_key_from_env_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-xyz")
    provider = AnthropicProvider(model="claude")
    assert provider._session._headers["x-api-key"] == "sk-ant-secret-xyz"
    assert "sk-ant-secret-xyz" not in repr(provider) + repr(provider.with_model("other"))
