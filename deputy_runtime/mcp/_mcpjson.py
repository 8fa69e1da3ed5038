"""Reading a Claude Code style ``.mcp.json`` file.

The file is ``{"mcpServers": {name: {...}}}``, or the server map alone (``{name: {...}}``,
as plugins write it). Each server has a ``type``: ``stdio`` (the
default when the entry has a ``command``), ``http`` or its alias ``streamable-http``.
``sse`` is refused: MCP deprecated that transport and the SDK's streamable HTTP client is
what this runtime speaks. Unknown keys are refused too, naming them, because an ignored
key (an auth helper, say) would make a server behave differently than its file says.

``${VAR}`` and ``${VAR:-default}`` are expanded, as Claude Code does, in ``command``,
``args``, ``env`` values, ``cwd``, ``url`` and ``headers`` values; a variable that is not
set and has no default is an error naming it. ``${CLAUDE_PLUGIN_ROOT}`` is the folder that
holds the file (a plugin's root, where its ``.mcp.json`` lives) unless the environment sets
it. A relative ``cwd`` is relative to the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..errors import McpConfigError
from ._config import McpConfig, McpHttp, McpOAuth, McpStdio, check_server_name

__all__ = ["PLUGIN_ROOT_VARIABLE", "expand_env", "load_mcp_config", "parse_mcp_config"]

#: The variable a plugin's ``.mcp.json`` names its own folder by.
PLUGIN_ROOT_VARIABLE = "CLAUDE_PLUGIN_ROOT"

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_STDIO_KEYS = frozenset({"type", "command", "args", "env", "cwd"})
_HTTP_KEYS = frozenset({"type", "url", "headers", "oauth"})
#: ``oauth`` of an HTTP server: client credentials (the .mcp.json spelling, camelCase).
_OAUTH_KEYS = frozenset({"clientId", "clientSecret", "issuer", "scope", "tokenEndpointAuthMethod"})
_HTTP_TYPES = frozenset({"http", "streamable-http"})


def expand_env(text: str, env: Mapping[str, str], where: str) -> str:
    """``text`` with ``${VAR}`` / ``${VAR:-default}`` replaced from ``env``."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        raise McpConfigError(
            f"{where}: environment variable {name} is not set (use ${{{name}:-default}} "
            "for a default)"
        )

    return _VAR.sub(replace, text) if "${" in text else text


def load_mcp_config(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> dict[str, McpConfig]:
    """The servers of the ``.mcp.json`` file at ``path``, by name, in file order.

    Nothing is returned unless every server is valid.

    Args:
        path: The ``.mcp.json`` file; a relative ``cwd`` in it is relative to its folder.
        env: What ``${VAR}`` expands from (``os.environ`` when ``None``).

    Returns:
        Each server's name mapped to its :class:`McpStdio` or :class:`McpHttp`
        configuration.

    Raises:
        McpConfigError: The file cannot be read, is not valid JSON, or a server entry is
            invalid (unknown type or key, bad field, unset variable); the message names
            the file, the server and the field.
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise McpConfigError(f"{file}: cannot read: {exc.strerror or exc}", path=file) from exc
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise McpConfigError(f"{file}: not valid JSON: {exc}", path=file) from exc
    variables = dict(os.environ if env is None else env)
    variables.setdefault(PLUGIN_ROOT_VARIABLE, str(file.resolve().parent))
    return parse_mcp_config(data, source=file, env=variables)


def parse_mcp_config(data: Any, *, source: Path, env: Mapping[str, str]) -> dict[str, McpConfig]:
    """The servers of already-decoded ``.mcp.json`` data (a plugin manifest's inline
    ``mcpServers``, say).

    ``data`` is ``{"mcpServers": {...}}`` or the server map itself; a map that mixes
    servers with other keys is refused, naming the keys that are not servers.

    Args:
        data: The decoded JSON.
        source: The file it came from: named in errors, and a relative ``cwd`` is
            relative to its folder.
        env: What ``${VAR}`` expands from (``CLAUDE_PLUGIN_ROOT`` included, when set).

    Returns:
        Each server's name mapped to its configuration, in order.

    Raises:
        McpConfigError: A server entry is invalid; the message names the file, the
            server and the field.
    """
    servers_map = _server_map(data, source)
    servers: dict[str, McpConfig] = {}
    for name, entry in servers_map.items():
        where = f"{source}: server {name!r}"
        try:
            check_server_name(name, "name")
            servers[name] = _server(entry, where, source.parent, env)
        except McpConfigError as exc:
            message = str(exc) if str(exc).startswith(where) else f"{where}: {exc}"
            raise McpConfigError(message, server=str(name), path=source) from None
    return servers


def _server_map(data: Any, source: Path) -> dict[str, Any]:
    expected = 'an object with an "mcpServers" object, or the servers by name'
    if not isinstance(data, dict):
        raise McpConfigError(
            f"{source}: expected {expected}, got {type(data).__name__}", path=source
        )
    if "mcpServers" in data:
        wrapped = data["mcpServers"]
        others = sorted(str(k) for k in data if k not in ("mcpServers", "$schema"))
        if not isinstance(wrapped, dict):
            raise McpConfigError(
                f'{source}: "mcpServers" must be an object of servers by name, got '
                f"{type(wrapped).__name__}",
                path=source,
            )
        if others:
            raise McpConfigError(
                f'{source}: unknown top-level key(s) {", ".join(others)} beside "mcpServers"',
                path=source,
            )
        return wrapped
    not_servers = sorted(str(k) for k, v in data.items() if not isinstance(v, dict))
    if not_servers:
        raise McpConfigError(
            f"{source}: expected {expected}; {', '.join(not_servers)} is not a server object",
            path=source,
        )
    return data


def _server(entry: Any, where: str, base: Path, env: Mapping[str, str]) -> McpConfig:
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: expected an object, got {type(entry).__name__}")
    kind = entry.get("type", "stdio" if "command" in entry else None)
    if kind == "sse":
        raise McpConfigError(
            f"{where}: type 'sse' is not supported (MCP deprecated the SSE transport); use "
            "type 'http' with the server's streamable HTTP endpoint"
        )
    if kind == "stdio":
        _refuse_unknown(entry, _STDIO_KEYS, where)
        return _stdio(entry, where, base, env)
    if kind in _HTTP_TYPES:
        _refuse_unknown(entry, _HTTP_KEYS, where)
        return _http(entry, where, env)
    if kind is None:
        raise McpConfigError(f"{where}: needs a 'command' (stdio) or a 'type' and 'url' (http)")
    raise McpConfigError(
        f"{where}: type {kind!r} is unknown: expected 'stdio', 'http' or 'streamable-http'"
    )


def _refuse_unknown(entry: dict[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in known)
    if unknown:
        raise McpConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; expected only "
            + ", ".join(sorted(known))
        )


def _string(value: Any, where: str, env: Mapping[str, str]) -> str:
    if not isinstance(value, str):
        raise McpConfigError(f"{where} must be a string, got {type(value).__name__}")
    return expand_env(value, env, where)


def _strings(value: Any, where: str, env: Mapping[str, str]) -> list[str]:
    if not isinstance(value, list):
        raise McpConfigError(f"{where} must be a list of strings")
    return [_string(v, f"{where}[{i}]", env) for i, v in enumerate(value)]


def _string_map(value: Any, where: str, env: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise McpConfigError(f"{where} must be an object of strings")
    return {str(k): _string(v, f"{where}[{k!r}]", env) for k, v in value.items()}


def _stdio(entry: dict[str, Any], where: str, base: Path, env: Mapping[str, str]) -> McpStdio:
    if "command" not in entry:
        raise McpConfigError(f"{where}: type 'stdio' needs a 'command'")
    cwd = entry.get("cwd")
    if cwd is not None:
        cwd = str(base / _string(cwd, f"{where}: cwd", env))
    return McpStdio(
        command=_string(entry["command"], f"{where}: command", env),
        args=tuple(_strings(entry.get("args", []), f"{where}: args", env)),
        env=_string_map(entry.get("env", {}), f"{where}: env", env),
        cwd=cwd,
    )


def _http(entry: dict[str, Any], where: str, env: Mapping[str, str]) -> McpHttp:
    if "url" not in entry:
        raise McpConfigError(f"{where}: type {entry['type']!r} needs a 'url'")
    return McpHttp(
        url=_string(entry["url"], f"{where}: url", env),
        headers=_string_map(entry.get("headers", {}), f"{where}: headers", env),
        oauth=_oauth(entry["oauth"], f"{where}: oauth", env) if "oauth" in entry else None,
    )


def _oauth(entry: Any, where: str, env: Mapping[str, str]) -> McpOAuth:
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: expected an object, got {type(entry).__name__}")
    _refuse_unknown(entry, _OAUTH_KEYS, where)
    for key in ("clientId", "clientSecret", "issuer"):
        if key not in entry:
            raise McpConfigError(f"{where}: needs {key!r}")
    scope = entry.get("scope")
    method = entry.get("tokenEndpointAuthMethod", "client_secret_basic")
    return McpOAuth(
        client_id=_string(entry["clientId"], f"{where}: clientId", env),
        # A secret is written as ${VARIABLE} and expanded here, never stored in the file.
        client_secret=_string(entry["clientSecret"], f"{where}: clientSecret", env),
        issuer=_string(entry["issuer"], f"{where}: issuer", env),
        scope=None if scope is None else _string(scope, f"{where}: scope", env),
        token_endpoint_auth_method=_string(method, f"{where}: tokenEndpointAuthMethod", env),
    )
