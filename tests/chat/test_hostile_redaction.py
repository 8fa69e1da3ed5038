"""Credentials never leave a provider: not through reprs of URLs that carry them, not
through servers that echo them back in error bodies or garbage, not even in part where a
message is cut short."""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deputy_runtime import Agent, Chat
from deputy_runtime.chat import AssistantTurn
from deputy_runtime.chat._anthropic import AnthropicProvider
from deputy_runtime.chat._http import error_from_response
from deputy_runtime.chat._openai import OpenAIProvider
from deputy_runtime.chat._redact import Redactor, display_url
from deputy_runtime.errors import AuthenticationError, ProviderError
from tests.chat.hostile import KEY, OK, make, outcome
from tests.chat.loopback import LoopbackServer, Reply, Seen

pytestmark = pytest.mark.anyio

URL_SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
keys = st.text(alphabet=URL_SAFE, min_size=8, max_size=48)
any_keys = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="\x7f"),
    min_size=8,
    max_size=48,
)
# Text around an echoed key, from characters no key above uses, so a leak cannot hide in it.
filler = st.text(alphabet=" !#$%&()*+,/:;<=>?@[]^`{|}\n", max_size=700)


def url_forms(key: str) -> list[str]:
    quoted = urllib.parse.quote(key, safe="")
    return [
        f"http://user:{quoted}@127.0.0.1:9/v1",
        f"http://{quoted}@127.0.0.1:9/v1",
        f"http://{quoted}:x@127.0.0.1:9/v1",
        f"http://127.0.0.1:9/v1?api-key={quoted}",
        f"http://127.0.0.1:9/openai?api-version=2024-10-21&key={quoted}",
        f"https://gateway.example/v1?token={quoted}#frag",
    ]


@settings(max_examples=150, deadline=None)
@given(key=any_keys, index=st.integers(0, 5))
def test_credentials_in_base_url_never_appear_in_reprs(key: str, index: int) -> None:
    def shown(cls: Any, url: str) -> str:
        provider = cls("model-x", api_key="k" * 12, base_url=url)
        return repr(provider) + repr(provider.with_model("y")) + repr(provider._session)

    url = url_forms(key)[index]
    for cls in (OpenAIProvider, AnthropicProvider):
        # A key that is part of the repr anyway ('127.0.0.1', 'model-x') proves nothing.
        assume(key not in shown(cls, url_forms("placeholder-value")[index]))
        text = shown(cls, url)
        assert key not in text
        assert urllib.parse.quote(key, safe="") not in text
        assert "***" in text


def test_display_url_keeps_what_is_not_secret() -> None:
    assert display_url("https://u:p@host:8443/v1?api-version=1&key=s") == (
        "https://***@host:8443/v1?api-version=***&key=***"
    )
    assert display_url("http://localhost:11434/v1") == "http://localhost:11434/v1"


@settings(max_examples=300, deadline=None)
@given(
    key=any_keys,
    before=filler,
    after=filler,
    shape=st.sampled_from(["text", "json-message", "json-detail", "json-nested"]),
    status=st.sampled_from([400, 401, 403, 404, 429, 500, 503]),
)
def test_an_echoed_key_is_masked_in_error_messages_and_bodies(
    key: str, before: str, after: str, shape: str, status: int
) -> None:
    echoed = before + key + after
    if shape == "text":
        body = echoed.encode()
    elif shape == "json-message":
        body = json.dumps({"error": {"message": echoed, "type": "auth"}}).encode()
    elif shape == "json-detail":
        body = json.dumps({"detail": echoed}).encode()
    else:
        body = json.dumps({"error": {"message": {"why": [echoed]}, "code": echoed}}).encode()
    error = error_from_response("openai", status, body, Redactor([key]))
    shown = str(error) + repr(error.body) + repr(error.args)
    assert key not in shown
    assert json.dumps(key)[1:-1] not in shown
    # Masked before the message is cut to length: no leading part of the key survives.
    assert key[:6] not in shown


@settings(max_examples=150, deadline=None)
@given(key=keys, cut=st.integers(0, 260))
def test_an_excerpt_of_a_malformed_response_never_holds_part_of_a_key(key: str, cut: int) -> None:
    data = " " * cut + key + " " * 50
    shown = Redactor([key]).excerpt(data)
    assert key[:4] not in shown


def echo(status: int, kind: str, content_type: str) -> Any:
    """A server that answers with ``status`` and echoes the credentials it received."""

    def reply(seen: Seen) -> Reply:
        sent = seen.headers.get("authorization") or seen.headers.get("x-api-key") or ""
        text = f"invalid credentials {sent!r} for {seen.path}"
        if content_type == "json":
            if kind == "openai":
                body: Any = {"error": {"message": text, "type": "invalid_api_key"}}
            else:
                body = {"type": "error", "error": {"type": "authentication_error", "message": text}}
            return Reply.json(body, status)
        return Reply(status, {"content-type": "text/plain"}, text.encode())

    return reply


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("content_type", ["json", "text"])
async def test_a_key_echoed_in_a_401_body_is_masked_in_the_agent_result(
    kind: str, content_type: str
) -> None:
    with LoopbackServer(echo(401, kind, content_type)) as server:
        provider = make(kind, server.url)
        try:
            result = await Agent(Chat(provider)).run("go")
        finally:
            await provider.aclose()
    sent = server.requests[0].headers
    assert KEY in (sent.get("authorization", "") + sent.get("x-api-key", ""))  # it was sent
    assert result.stop_reason == "provider_error"
    assert result.error is not None
    assert "HTTP 401" in result.error
    assert KEY not in result.error
    assert "***" in result.error


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_url_credentials_echoed_back_are_masked(kind: str, stream: bool) -> None:
    secret = "q-secret-value-7788"
    with LoopbackServer(echo(403, kind, "json")) as server:
        url = server.url.replace("http://", f"http://svc:{secret}@")
        cls = OpenAIProvider if kind == "openai" else AnthropicProvider
        provider = cls("m", api_key=KEY, base_url=f"{url}/v1?api-key={secret}&v=2")
        result = await outcome(provider, stream)
    assert isinstance(result, AuthenticationError)
    # The query travels after the endpoint path, not glued into it.
    assert server.requests[0].path.endswith(f"?api-key={secret}&v=2")
    endpoint = "/chat/completions" if kind == "openai" else "/messages"
    assert server.requests[0].path.split("?")[0] == "/v1" + endpoint
    shown = str(result) + repr(result.body) + repr(provider)
    basic = base64.b64encode(f"svc:{secret}".encode()).decode()
    assert basic in repr(server.requests[0].headers)  # httpx sent the user info as Basic auth
    for leaked in (secret, KEY, basic):
        assert leaked not in shown


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_key_echoed_in_a_malformed_200_is_masked(kind: str, stream: bool) -> None:
    # The key straddles the point where the excerpt of the body is cut.
    garbage = ("x" * 190 + KEY + "x" * 100).encode()
    reply = (
        Reply(200, {"content-type": "text/event-stream"}, chunks=[b"data: " + garbage + b"\n\n"])
        if stream
        else Reply(200, {"content-type": "application/json"}, garbage)
    )
    with LoopbackServer([reply]) as server:
        result = await outcome(make(kind, server.url), stream)
    assert isinstance(result, ProviderError)
    assert "malformed" in str(result)
    assert KEY[:6] not in str(result)


async def test_a_secret_header_echoed_back_is_masked(kind: str) -> None:
    gateway = "gw-token-55aa66bb"
    with LoopbackServer(
        lambda seen: Reply.json(
            {"error": {"message": f"gateway rejected {seen.headers.get('x-gateway-token')}"}}, 401
        )
    ) as server:
        result = await outcome(
            make(kind, server.url, headers={"x-gateway-token": gateway}), stream=False
        )
    assert isinstance(result, AuthenticationError)
    assert gateway not in str(result) + repr(result.body)


async def test_a_valid_response_is_not_altered_by_redaction(kind: str) -> None:
    """Redaction applies to errors only: a reply that happens to hold the key is kept."""
    body = json.loads(json.dumps(OK[kind]).replace("Hi there!", f"your key is {KEY}"))
    with LoopbackServer([Reply.json(body)]) as server:
        result = await outcome(make(kind, server.url), stream=False)
    assert isinstance(result, AssistantTurn)
    assert result.text == f"your key is {KEY}"


@pytest.mark.parametrize("url", ["http://[bad/v1", "http://h:99999/v1", "http://h:abc/v1"])
def test_an_invalid_base_url_is_a_value_error_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match="base_url is not a valid URL"):
        OpenAIProvider("m", api_key=KEY, base_url=url)


@pytest.mark.parametrize("status", [200, 401, 500])
async def test_a_body_nested_past_the_parsers_depth_is_a_typed_error(
    kind: str, status: int
) -> None:
    """Deep nesting exhausts a recursive parser; it must not escape as RecursionError."""
    deep = b'{"error": {"message": ' + b"[" * 5000 + KEY.encode() + b"]" * 5000 + b"}}"
    shallow_enough = b'{"error": {"message": ' + b"[" * 900 + b'"' + KEY.encode() + b'"'
    shallow_enough += b"]" * 900 + b"}}"
    for body in (deep, shallow_enough):
        reply = Reply(status, {"content-type": "application/json"}, body)
        with LoopbackServer([reply] * 3) as server:
            result = await outcome(make(kind, server.url), stream=False)
        assert isinstance(result, ProviderError)
        assert KEY not in str(result)
