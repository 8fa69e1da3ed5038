"""The bearer gate in front of ``mcp-serve --http`` and its address rule, as properties.

The gate is called as the ASGI app it is, with an app behind it that records what got
through: only a request carrying one of the configured tokens, exactly, reaches it.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime._cli.leadsetup import UsageError
from deputy_runtime._cli.mcphttp import BearerGate
from deputy_runtime._cli.mcpserve import parse_address

TOKENS = ("first-token-0123456789", "second-token-abcdefghij")
_HEADER_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


async def _through(gate_tokens: tuple[str, ...], headers: list[tuple[bytes, bytes]]) -> int:
    """The status the gate answers with (200: the request reached the app)."""
    reached: list[str] = []
    sent: list[MutableMapping[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "method": "POST", "headers": headers}
    await BearerGate(app, gate_tokens)(scope, receive, send)
    status = int(sent[0]["status"])
    assert (status == 200) == (reached == ["/mcp"])
    return status


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=80, deadline=None)
@given(
    value=st.one_of(
        _HEADER_TEXT,
        _HEADER_TEXT.map(lambda t: f"Bearer {t}"),
        st.sampled_from(TOKENS).map(lambda t: f"Bearer {t}x"),
        st.sampled_from(TOKENS).map(lambda t: f"Basic {t}"),
        st.sampled_from(TOKENS).map(lambda t: f"Bearer {t[:-1]}"),
    )
)
def test_only_a_configured_token_gets_through(backend: str, value: str) -> None:
    headers = [(b"authorization", value.encode("latin-1"))]
    status = anyio.run(_through, TOKENS, headers, backend=backend)
    scheme, _, token = value.strip().partition(" ")
    expected = 200 if scheme.lower() == "bearer" and token.strip() in TOKENS else 401
    assert status == expected


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=20, deadline=None)
@given(token=st.sampled_from(TOKENS), scheme=st.sampled_from(["Bearer", "bearer", "BEARER"]))
def test_each_configured_token_gets_through(backend: str, token: str, scheme: str) -> None:
    headers = [(b"authorization", f"{scheme} {token}".encode())]
    assert anyio.run(_through, TOKENS, headers, backend=backend) == 200


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_no_header_is_refused(backend: str) -> None:
    assert anyio.run(_through, TOKENS, [], backend=backend) == 401


@given(host=st.sampled_from(["127.0.0.1", "localhost", "::1", "example.org"]), port=st.integers())
def test_addresses_parse_or_are_refused_by_name(host: str, port: int) -> None:
    shown = f"[{host}]" if ":" in host else host
    text = f"{shown}:{port}"
    if 1 <= port <= 65535:
        assert parse_address(text) == (host, port)
    else:
        with pytest.raises(UsageError, match=r"^--http .*: expected HOST:PORT"):
            parse_address(text)
