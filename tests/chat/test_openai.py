"""OpenAI Chat Completions against a loopback server replaying recorded exchanges.

For every recorded exchange the test rebuilds the ModelRequest it came from, lets the
provider send it to a real socket, checks the bytes the server received against the
recorded request, and checks the parsed turn against the recorded response. Streaming
replays the same response as SSE in random chunk sizes (and one byte at a time).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from deputy_runtime.chat import (
    AssistantTurn,
    OllamaProvider,
    OpenAICompatibleProvider,
    OpenAIProvider,
    StreamDelta,
)
from tests.chat.loopback import (
    LoopbackServer,
    Reply,
    load_exchanges,
    normalise_openai,
    openai_expected,
    openai_replayable,
    openai_request,
    openai_sse,
    turn_summary,
)

pytestmark = pytest.mark.anyio

EXCHANGES = [
    e
    for e in load_exchanges("chat_completions.jsonl")
    + load_exchanges("chat_completions_history_text.jsonl")
    if openai_replayable(e["request"]["json"])
]
ALL_RESPONSES = load_exchanges("chat_completions.jsonl") + load_exchanges(
    "chat_completions_history_text.jsonl"
)


def _id(e: dict[str, Any]) -> str:
    return f"{e['source'].rsplit('/', 1)[-1]}#{e['index']}@{e.get('commit', 'head')[:7]}"


def _expected(e: dict[str, Any]) -> dict[str, Any]:
    return {**openai_expected(e["response"]["json"]), "thinking": []}


def _provider(server: LoopbackServer, model: str, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(model, api_key="sk-test-key", base_url=server.url + "/v1", **kw)


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_id)
async def test_complete_sends_recorded_request_and_parses_recorded_response(
    exchange: dict[str, Any],
) -> None:
    recorded = exchange["request"]["json"]
    with LoopbackServer([Reply.json(exchange["response"]["json"])]) as server:
        async with _provider(server, recorded["model"], max_retries=0) as provider:
            turn = await provider.complete(openai_request(recorded))
    [seen] = server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == "Bearer sk-test-key"
    assert normalise_openai(seen.json) == normalise_openai(recorded)
    assert turn_summary(turn) == _expected(exchange)
    assert turn.usage.requests == 1
    assert turn.duration is not None
    assert turn.duration > 0


@pytest.mark.parametrize("exchange", ALL_RESPONSES, ids=_id)
async def test_every_recorded_response_parses(exchange: dict[str, Any]) -> None:
    # Includes the image and PDF exchanges whose requests our content types cannot build.
    provider = OpenAIProvider("m", api_key="k")
    raw = json.dumps(exchange["response"]["json"]).encode()
    assert turn_summary(provider._parse(raw, 0.0)) == _expected(exchange)


STREAM_CASES = [(e, "random") for e in EXCHANGES] + [
    (e, 1) for e in EXCHANGES if e["source"].endswith("openai-tool.yml")
]


@pytest.mark.parametrize(
    ("exchange", "sizes"), STREAM_CASES, ids=[f"{_id(e)}-{s}" for e, s in STREAM_CASES]
)
async def test_stream_replays_recorded_response_in_any_chunking(
    exchange: dict[str, Any], sizes: int | str
) -> None:
    recorded = exchange["request"]["json"]
    response = exchange["response"]["json"]
    reply = Reply.sse(openai_sse(response), sizes=sizes, seed=exchange["index"])  # type: ignore[arg-type]
    with LoopbackServer([reply]) as server:
        async with _provider(server, recorded["model"], max_retries=0) as provider:
            items = [x async for x in provider.stream(openai_request(recorded))]
    [seen] = server.requests
    sent = seen.json
    assert sent.pop("stream") is True
    assert sent.pop("stream_options") == {"include_usage": True}
    expected_body = dict(recorded)
    expected_body.pop("stream")
    assert normalise_openai(sent) == normalise_openai(expected_body)
    *deltas, turn = items
    assert isinstance(turn, AssistantTurn)
    assert all(isinstance(d, StreamDelta) for d in deltas)
    assert "".join(d.text for d in deltas) == turn.text
    assert turn_summary(turn) == _expected(exchange)


def _chains() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    key = lambda e: (e["source"], e.get("commit", ""))  # noqa: E731
    pairs = []
    for _, group in itertools.groupby(sorted(EXCHANGES, key=key), key=key):
        ordered = sorted(group, key=lambda e: e["index"])
        pairs += [
            (a, b)
            for a, b in itertools.pairwise(ordered)
            if b["index"] == a["index"] + 1 and _replayed_faithfully(a, b)
        ]
    return pairs


def _replayed_faithfully(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether k+1 continues k's conversation and re-sends k's reply as it was returned.

    (Old ellmer versions re-sent scalar arguments boxed in lists.)
    """
    before = first["request"]["json"]["messages"]
    if second["request"]["json"]["messages"][: len(before)] != before:
        return False
    calls = first["response"]["json"]["choices"][0]["message"].get("tool_calls") or []
    sent = {
        c["id"]: json.loads(c["function"]["arguments"])
        for m in second["request"]["json"]["messages"]
        for c in m.get("tool_calls") or []
    }
    return all(sent.get(c["id"]) == json.loads(c["function"]["arguments"]) for c in calls)


CHAINS = _chains()


@pytest.mark.parametrize(("first", "second"), CHAINS, ids=[_id(b) for _, b in CHAINS])
def test_parsed_turn_is_what_the_next_recorded_request_replays(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    """The assistant turn we parse from exchange k serialises as ellmer sent it in k+1."""
    provider = OpenAIProvider("m", api_key="k")
    turn = provider._parse(json.dumps(first["response"]["json"]).encode(), 0.0)
    next_request = openai_request(second["request"]["json"])
    n_prev = len(openai_request(first["request"]["json"]).turns)
    assert next_request.turns[n_prev] == turn.turn()


def test_chains_exist() -> None:
    assert len(CHAINS) >= 10


async def test_compatible_and_ollama_use_their_base_url_and_key_rules() -> None:
    exchange = next(e for e in EXCHANGES if e["source"].endswith("openai-tool.yml"))
    recorded = exchange["request"]["json"]
    replies = [Reply.json(exchange["response"]["json"]) for _ in range(2)]
    with LoopbackServer(replies) as server:
        compat = OpenAICompatibleProvider(
            model="local", base_url=server.url + "/v1", params={"max_tokens": 64}
        )
        ollama = OllamaProvider(model="llama3.2", base_url=server.url + "/v1")
        for provider in (compat, ollama):
            turn = await provider.complete(openai_request(recorded))
            assert turn_summary(turn) == _expected(exchange)
            await provider.aclose()
    first, second = server.requests
    assert "authorization" not in first.headers  # no key configured, none sent
    assert first.json["max_tokens"] == 64
    assert "max_completion_tokens" not in first.json
    assert (first.json["model"], second.json["model"]) == ("local", "llama3.2")
    assert (compat.name, ollama.name) == ("openai_compatible", "ollama")


def test_ollama_defaults_without_network() -> None:
    provider = OllamaProvider(model="qwen3")
    assert provider.base_url == "http://localhost:11434/v1"
    assert provider.name == "ollama"
    assert provider.model == "qwen3"


def test_openai_compatible_requires_base_url() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAICompatibleProvider(model="x")


async def test_with_model_shares_client_and_settings() -> None:
    with LoopbackServer([Reply.json(EXCHANGES[0]["response"]["json"])] * 2) as server:
        async with httpx.AsyncClient() as client:
            base = _provider(server, "a", client=client, params={"temperature": 0.5})
            other = base.with_model("b")
            assert other.model == "b"
            assert base.model == "a"
            assert other._session is base._session
            await base.complete(openai_request(EXCHANGES[0]["request"]["json"]))
            await other.complete(openai_request(EXCHANGES[0]["request"]["json"]))
            assert base._session.client() is client
    models = [s.json["model"] for s in server.requests]
    assert models == ["a", "b"]
    assert all(
        s.json["temperature"] == EXCHANGES[0]["request"]["json"]["temperature"]
        for s in server.requests
    )


def test_api_key_never_in_repr_and_read_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-secret")
    provider = OpenAIProvider(model="gpt-x")
    assert provider._session._headers["authorization"] == "Bearer sk-from-env-secret"
    for text in (repr(provider), repr(provider._session), str(vars(provider))):
        assert "sk-from-env-secret" not in text


async def test_missing_key_is_a_clear_error_without_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deputy_runtime.errors import AuthenticationError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = OpenAIProvider(model="gpt-x", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await provider.complete(openai_request(EXCHANGES[0]["request"]["json"]))


def test_strict_only_for_strict_compatible_schemas() -> None:
    from deputy_runtime.chat import ModelRequest, ToolSpec

    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "required": []}
    strict = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "string"}}},
        "required": ["a"],
        "additionalProperties": False,
    }
    request = ModelRequest(None, (), (ToolSpec("l", "", loose), ToolSpec("s", "", strict)))
    body = OpenAIProvider("m", api_key="k")._build_body(request, stream=False)
    assert [t["function"]["strict"] for t in body["tools"]] == [False, True]


def test_params_are_renamed_and_passed_through() -> None:
    from deputy_runtime.chat import ModelRequest

    provider = OpenAIProvider("m", api_key="k", params={"temperature": 1, "max_tokens": 10})
    request = ModelRequest(
        None,
        (),
        (),
        {"max_tokens": 20, "stop_sequences": ["X"], "top_k": 3, "user": "u1", "temperature": None},
    )
    body = provider._build_body(request, stream=False)
    assert body["max_completion_tokens"] == 20
    assert body["stop"] == ["X"]
    assert body["user"] == "u1"
    assert "top_k" not in body
    assert "temperature" not in body


@pytest.mark.parametrize(("effort", "sent"), [("low", "low"), ("xhigh", "xhigh"), ("max", "xhigh")])
def test_reasoning_effort_is_sent_with_openais_level_names(effort: str, sent: str) -> None:
    from deputy_runtime.chat import ModelRequest

    provider = OpenAIProvider("m", api_key="k", params={"reasoning_effort": effort})
    body = provider._build_body(ModelRequest(None, (), ()), stream=False)
    assert body["reasoning_effort"] == sent


HEAD = [e for e in EXCHANGES if "commit" not in e]  # the current cassettes


@pytest.mark.parametrize("cls", [OpenAICompatibleProvider, OllamaProvider])
@pytest.mark.parametrize("exchange", HEAD, ids=_id)
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_compatible_providers_replay_recorded_exchanges(
    cls: type[OpenAIProvider], exchange: dict[str, Any], stream: bool
) -> None:
    recorded = exchange["request"]["json"]
    response = exchange["response"]["json"]
    reply = Reply.sse(openai_sse(response)) if stream else Reply.json(response)
    with LoopbackServer([reply]) as server:
        provider = cls(model=recorded["model"], base_url=server.url + "/v1", max_retries=0)
        try:
            if stream:
                turn = [x async for x in provider.stream(openai_request(recorded))][-1]
            else:
                turn = await provider.complete(openai_request(recorded))
        finally:
            await provider.aclose()
    sent = server.requests[0].json
    sent.pop("stream_options", None)
    assert sent.pop("stream") is stream
    expected = {k: v for k, v in recorded.items() if k != "stream"}
    assert normalise_openai(sent) == normalise_openai(expected)
    assert isinstance(turn, AssistantTurn)
    assert turn_summary(turn) == _expected(exchange)
