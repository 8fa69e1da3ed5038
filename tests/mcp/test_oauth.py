"""HTTP servers that need authorization: the protocol's OAuth flow with client credentials,
against a real loopback server (``servers/guarded.py``: resource server and token endpoint
in one process, started as a subprocess), and credentials from ``.mcp.json``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deputy_runtime.errors import McpConfigError, McpStartError
from deputy_runtime.mcp import McpHttp, McpOAuth, McpServer, load_mcp_config
from deputy_runtime.tools import invoke_tool
from tests.mcp._mcp_helpers import SERVERS, free_port, listening_server

pytestmark = pytest.mark.anyio

SECRET = "s3cret-for-the-test"
#: What ``whoami`` returns (the SDK wraps a str result as structured content).
AUTHORISED = {"result": "authorised"}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The guarded server's base URL and the file listing the tokens it issued."""
    directory = tmp_path_factory.mktemp("guarded")
    port, tokens = free_port(), directory / "tokens.txt"
    tokens.touch()
    argv = [sys.executable, str(SERVERS / "guarded.py"), str(port)]
    env = {"CLIENT_ID": "deputy", "CLIENT_SECRET": SECRET, "TOKENS_FILE": str(tokens),
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    with listening_server(argv, port, directory / "server.log", env):
        yield f"http://127.0.0.1:{port}", tokens


def _issued(tokens: Path) -> int:
    return len(tokens.read_text().split())


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_client_credentials_get_a_token_once_per_session(
    guarded: tuple[str, Path], method: str
) -> None:
    base, tokens = guarded
    before = _issued(tokens)
    oauth = McpOAuth(
        client_id="deputy", client_secret=SECRET, issuer=base, token_endpoint_auth_method=method
    )
    server = McpServer("guarded", McpHttp(url=f"{base}/mcp", oauth=oauth))
    async with server.session() as session:
        [whoami] = [t for t in session.tools() if t.name.endswith("whoami")]
        assert await invoke_tool(whoami, {}) == AUTHORISED
        assert await invoke_tool(whoami, {}) == AUTHORISED
    # One token for the session: the second call reused it.
    assert _issued(tokens) == before + 1


async def test_without_credentials_the_server_refuses_to_start(
    guarded: tuple[str, Path],
) -> None:
    base, _ = guarded
    server = McpServer("guarded", McpHttp(url=f"{base}/mcp"))
    with pytest.raises(McpStartError, match="guarded"):
        async with server.session():
            pass


async def test_a_wrong_secret_is_a_start_error_that_never_shows_the_secret(
    guarded: tuple[str, Path],
) -> None:
    base, tokens = guarded
    before = _issued(tokens)
    wrong = "not-the-secret-value"
    oauth = McpOAuth(client_id="deputy", client_secret=wrong, issuer=base)
    server = McpServer("guarded", McpHttp(url=f"{base}/mcp", oauth=oauth))
    with pytest.raises(McpStartError) as caught:
        async with server.session():
            pass
    assert wrong not in str(caught.value)
    assert _issued(tokens) == before


async def test_credentials_go_only_to_the_named_issuer(guarded: tuple[str, Path]) -> None:
    base, tokens = guarded
    before = _issued(tokens)
    # The server's metadata names another issuer: no token request is made.
    oauth = McpOAuth(client_id="deputy", client_secret=SECRET, issuer="http://127.0.0.1:9")
    server = McpServer("guarded", McpHttp(url=f"{base}/mcp", oauth=oauth))
    with pytest.raises(McpStartError):
        async with server.session():
            pass
    assert _issued(tokens) == before


async def test_mcp_json_oauth_expands_the_secret_from_the_environment(
    guarded: tuple[str, Path], tmp_path: Path
) -> None:
    base, _ = guarded
    path = tmp_path / ".mcp.json"
    entry = {
        "type": "http",
        "url": f"{base}/mcp",
        "oauth": {"clientId": "deputy", "clientSecret": "${NOTES_SECRET}", "issuer": base},
    }
    path.write_text(json.dumps({"mcpServers": {"guarded": entry}}))
    [(name, config)] = load_mcp_config(path, env={"NOTES_SECRET": SECRET}).items()
    assert isinstance(config, McpHttp)
    assert config.oauth is not None
    assert config.oauth.client_secret == SECRET
    assert SECRET not in repr(config)
    assert SECRET not in json.dumps(config.describe())
    async with McpServer(name, config).session() as session:
        [whoami] = [t for t in session.tools() if t.name.endswith("whoami")]
        assert await invoke_tool(whoami, {}) == AUTHORISED


@pytest.mark.parametrize(
    ("oauth", "message"),
    [
        ({"clientId": "x", "issuer": "http://a"}, r"oauth: needs 'clientSecret'"),
        ({"clientId": "x", "clientSecret": "y", "issuer": "ftp://a"}, r"issuer .* is invalid"),
        (
            {"clientId": "x", "clientSecret": "y", "issuer": "http://a", "grant": "password"},
            r"grant",
        ),
        (
            {
                "clientId": "x",
                "clientSecret": "y",
                "issuer": "http://a",
                "tokenEndpointAuthMethod": "private_key_jwt",
            },
            r"token_endpoint_auth_method must be one of",
        ),
        ({"clientId": "x", "clientSecret": "${MISSING}", "issuer": "http://a"}, r"MISSING"),
        ("token", r"oauth: expected an object"),
    ],
)
def test_bad_oauth_entries_name_the_field(tmp_path: Path, oauth: object, message: str) -> None:
    path = tmp_path / ".mcp.json"
    entry = {"type": "http", "url": "http://127.0.0.1:1/mcp", "oauth": oauth}
    path.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    with pytest.raises(McpConfigError, match=message):
        load_mcp_config(path, env={})


def test_an_authorization_header_and_oauth_contradict() -> None:
    oauth = McpOAuth(client_id="x", client_secret="y", issuer="http://a")
    with pytest.raises(McpConfigError, match="contradict"):
        McpHttp(url="http://a/mcp", headers={"Authorization": "Bearer t"}, oauth=oauth)


async def test_a_bearer_header_from_the_environment_reaches_the_server(
    guarded: tuple[str, Path], tmp_path: Path
) -> None:
    import httpx

    base, _ = guarded
    # A token the host got elsewhere, given to the server as a static bearer header.
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{base}/token", data={"grant_type": "client_credentials"}, auth=("deputy", SECRET)
        )
    token = answer.json()["access_token"]
    path = tmp_path / ".mcp.json"
    entry = {"type": "http", "url": f"{base}/mcp",
             "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}}  # fmt: skip
    path.write_text(json.dumps({"mcpServers": {"guarded": entry}}))
    [(name, config)] = load_mcp_config(path, env={"NOTES_TOKEN": token}).items()
    assert token not in repr(config)
    async with McpServer(name, config).session() as session:
        [whoami] = [t for t in session.tools() if t.name.endswith("whoami")]
        assert await invoke_tool(whoami, {}) == AUTHORISED
