"""MCP server configurations: how to reach a server, validated when built.

Two transports: :class:`McpStdio` runs the server as a subprocess speaking JSON-RPC on
its standard input and output; :class:`McpHttp` talks to a running server over MCP's
streamable HTTP. Both are frozen values that check every field when constructed, so a
configuration that exists is one that can be tried. :class:`McpLimits` holds the host's
timeouts and size bounds, kept apart because a ``.mcp.json`` file never sets them.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import msgspec

from ..errors import McpConfigError

__all__ = [
    "SERVER_NAME_PATTERN",
    "McpConfig",
    "McpHttp",
    "McpLimits",
    "McpOAuth",
    "McpStdio",
    "check_server_name",
]

#: Server names: letters, digits, ``-`` and single ``_`` between them, at most 32 characters.
#: A ``__`` inside a name would make ``mcp__<server>__<tool>`` ambiguous.
SERVER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*\Z")
_SERVER_NAME_MAX = 32
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


def check_server_name(name: object, where: str = "server name") -> str:
    """``name`` if it is a valid server name, else :class:`McpConfigError` saying why."""
    if not isinstance(name, str) or not name:
        raise McpConfigError(f"{where} must be a non-empty string, got {name!r}")
    if len(name) > _SERVER_NAME_MAX or not SERVER_NAME_PATTERN.match(name):
        raise McpConfigError(
            f"{where} {name!r} is invalid: expected 1-{_SERVER_NAME_MAX} letters, digits, '-' "
            "and single '_' between them (tools are named mcp__<server>__<tool>, so '__' "
            "cannot appear in a server name)",
            server=name,
        )
    return name


def _check_text(value: object, field: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise McpConfigError(f"{field} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise McpConfigError(f"{field} must not be empty")
    if "\x00" in value:
        raise McpConfigError(f"{field} must not contain a NUL character")
    return value


class McpStdio(msgspec.Struct, frozen=True, kw_only=True):
    """A server started as a subprocess: ``command`` with ``args``.

    ``env`` is added to a minimal inherited environment (``HOME``, ``PATH``, ``USER``, ...,
    as the MCP SDK does), so a server never sees the host's API keys unless they are passed
    on purpose. ``cwd`` is its working directory (the host's when ``None``).
    """

    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None

    def __post_init__(self) -> None:
        _check_text(self.command, "McpStdio.command")
        if isinstance(self.args, str) or not isinstance(self.args, tuple | list):
            raise McpConfigError("McpStdio.args must be a list of strings")
        for i, arg in enumerate(self.args):
            _check_text(arg, f"McpStdio.args[{i}]", empty=True)
        msgspec.structs.force_setattr(self, "args", tuple(self.args))
        if not isinstance(self.env, dict):
            raise McpConfigError("McpStdio.env must be a mapping of names to strings")
        for key, value in self.env.items():
            if not isinstance(key, str) or not _ENV_NAME.match(key):
                raise McpConfigError(
                    f"McpStdio.env key {key!r} is invalid: expected letters, digits and '_', "
                    "not starting with a digit"
                )
            _check_text(value, f"McpStdio.env[{key!r}]", empty=True)
        if self.cwd is not None:
            _check_text(self.cwd, "McpStdio.cwd")

    @property
    def transport(self) -> str:
        """``"stdio"``."""
        return "stdio"

    def __repr__(self) -> str:
        # env values are often API keys: only their names are shown.
        return (
            f"McpStdio(command={self.command!r}, args={self.args!r}, "
            f"env={_redacted(self.env)}, cwd={self.cwd!r})"
        )

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs (env values left out).

        Returns:
            ``transport``, ``command``, ``args``, ``cwd`` and ``env`` as the sorted list
            of the variable names only.
        """
        return {
            "transport": "stdio",
            "command": self.command,
            "args": list(self.args),
            "env": sorted(self.env),
            "cwd": self.cwd,
        }


class McpOAuth(msgspec.Struct, frozen=True, kw_only=True):
    """OAuth client credentials for a server that needs a token (the protocol's flow).

    On the first request the server answers 401; the client then discovers the server's
    authorization server (the protected-resource metadata, then the authorization
    server's metadata), asks its token endpoint for a token with the ``client_credentials``
    grant, and sends it as a bearer token from then on (a new one when it expires). Tokens
    are kept in memory for the session only.

    Attributes:
        client_id: The client's id at the authorization server.
        client_secret: Its secret (never shown: ``repr`` and ``describe`` leave it out).
        issuer: The authorization server's issuer identifier; a server pointing anywhere
            else is refused, so credentials only go where they belong.
        scope: Space-separated scopes to ask for (``None``: the server's default).
        token_endpoint_auth_method: ``"client_secret_basic"`` (default) or
            ``"client_secret_post"``.
    """

    client_id: str
    client_secret: str
    issuer: str
    scope: str | None = None
    token_endpoint_auth_method: str = "client_secret_basic"

    def __post_init__(self) -> None:
        _check_text(self.client_id, "McpOAuth.client_id")
        _check_text(self.client_secret, "McpOAuth.client_secret")
        _check_text(self.issuer, "McpOAuth.issuer")
        parts = urlsplit(self.issuer)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise McpConfigError(
                f"McpOAuth.issuer {self.issuer!r} is invalid: expected an http:// or "
                "https:// URL with a host"
            )
        if self.scope is not None:
            _check_text(self.scope, "McpOAuth.scope")
        if self.token_endpoint_auth_method not in _TOKEN_AUTH_METHODS:
            raise McpConfigError(
                "McpOAuth.token_endpoint_auth_method must be one of "
                f"{', '.join(sorted(_TOKEN_AUTH_METHODS))}, got "
                f"{self.token_endpoint_auth_method!r}"
            )

    def __repr__(self) -> str:
        return (
            f"McpOAuth(client_id={self.client_id!r}, client_secret='***', issuer={self.issuer!r})"
        )

    def describe(self) -> dict[str, Any]:
        """Plain data for manifests and logs: everything but the secret.

        Returns:
            ``client_id``, ``issuer``, ``scope`` and ``token_endpoint_auth_method``.
        """
        return {
            "client_id": self.client_id,
            "issuer": self.issuer,
            "scope": self.scope,
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
        }


_TOKEN_AUTH_METHODS = frozenset({"client_secret_basic", "client_secret_post"})


class McpHttp(msgspec.Struct, frozen=True, kw_only=True):
    """A running server reached over streamable HTTP at ``url`` (``http`` or ``https``).

    ``headers`` go with every request (typically ``Authorization: Bearer ...``);
    ``oauth`` gets tokens by the protocol's OAuth flow instead (:class:`McpOAuth`).
    """

    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    oauth: McpOAuth | None = None

    def __post_init__(self) -> None:
        _check_text(self.url, "McpHttp.url")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise McpConfigError(
                f"McpHttp.url {self.url!r} is invalid: expected an http:// or https:// URL "
                "with a host"
            )
        if not isinstance(self.headers, dict):
            raise McpConfigError("McpHttp.headers must be a mapping of names to strings")
        for key, value in self.headers.items():
            if not isinstance(key, str) or not _HEADER_NAME.match(key):
                raise McpConfigError(f"McpHttp.headers key {key!r} is not a valid header name")
            _check_text(value, f"McpHttp.headers[{key!r}]", empty=True)
            if "\r" in value or "\n" in value:
                raise McpConfigError(f"McpHttp.headers[{key!r}] must not contain a line break")
        if self.oauth is not None:
            if not isinstance(self.oauth, McpOAuth):
                raise McpConfigError(
                    f"McpHttp.oauth must be an McpOAuth, got {type(self.oauth).__name__}"
                )
            if any(key.lower() == "authorization" for key in self.headers):
                raise McpConfigError(
                    "McpHttp: an Authorization header and oauth contradict each other; keep one"
                )

    @property
    def transport(self) -> str:
        """``"http"``."""
        return "http"

    def __repr__(self) -> str:
        # Header values carry credentials (Authorization): only their names are shown.
        oauth = "" if self.oauth is None else f", oauth={self.oauth!r}"
        return (
            f"McpHttp(url={_url_without_secrets(self.url)!r}, "
            f"headers={_redacted(self.headers)}{oauth})"
        )

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs (header values left out).

        Returns:
            ``transport``, ``url`` without credentials or query, and ``headers`` as the
            sorted list of the header names only.
        """
        described: dict[str, Any] = {
            "transport": "http",
            "url": _url_without_secrets(self.url),
            "headers": sorted(self.headers),
        }
        if self.oauth is not None:
            described["oauth"] = self.oauth.describe()
        return described


McpConfig: TypeAlias = McpStdio | McpHttp
"""How to reach one server: an :class:`McpStdio` subprocess or an :class:`McpHttp` URL."""


def _redacted(values: dict[str, str]) -> str:
    return "{" + ", ".join(f"{key!r}: '***'" for key in values) + "}"


def _url_without_secrets(url: str) -> str:
    """``url`` without a ``user:password@`` part and without its query (tokens live there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


class McpLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Timeouts (seconds) and size bounds for one server.

    * ``start_timeout``: spawn or connect, the MCP handshake and the first tool listing.
    * ``call_timeout``: one tool call (or a tool-list refresh).
    * ``close_grace``: after its input closes, how long a stdio server may take to exit
      before it gets SIGTERM; ``terminate_grace``: how long after SIGTERM before SIGKILL.
    * ``max_message_bytes``: the largest message the server may send (one stdio line, one
      HTTP SSE event); a larger one ends the session.
    * ``stderr_lines``: how many of the server's last stderr lines are kept, and
      ``stderr_line_chars`` how long each may be (longer lines are cut).
    """

    start_timeout: float = 30.0
    call_timeout: float = 120.0
    close_grace: float = 2.0
    terminate_grace: float = 2.0
    max_message_bytes: int = 8 * 1024 * 1024
    stderr_lines: int = 200
    stderr_line_chars: int = 2000

    def __post_init__(self) -> None:
        for field in ("start_timeout", "call_timeout", "close_grace", "terminate_grace"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise McpConfigError(f"McpLimits.{field} must be a positive number, got {value!r}")
        for field in ("max_message_bytes", "stderr_lines", "stderr_line_chars"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise McpConfigError(f"McpLimits.{field} must be a positive integer, got {value!r}")
