"""The protocol's OAuth flow for HTTP servers, with client credentials.

:class:`~deputy_runtime.mcp.McpOAuth` says who the client is; this module turns it into
the SDK's ``client_credentials`` provider (an ``httpx`` auth flow: on a 401 it discovers
the authorization server, asks for a token and retries with it). Tokens live in memory,
one store per session, so nothing is written anywhere and a new session starts afresh.
"""

from __future__ import annotations

from typing import Literal, cast

from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ._config import McpOAuth

__all__ = ["oauth_auth"]


class _MemoryTokens(TokenStorage):
    """One session's tokens and client information, in memory only."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


def oauth_auth(url: str, oauth: McpOAuth) -> ClientCredentialsOAuthProvider:
    """The auth flow getting tokens for the server at ``url`` with ``oauth``'s credentials."""
    method = cast(
        Literal["client_secret_basic", "client_secret_post"], oauth.token_endpoint_auth_method
    )
    return ClientCredentialsOAuthProvider(
        server_url=url,
        storage=_MemoryTokens(),
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        token_endpoint_auth_method=method,
        scope=oauth.scope,
        issuer=oauth.issuer,
    )
