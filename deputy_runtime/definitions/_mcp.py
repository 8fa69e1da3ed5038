"""MCP tool names in definitions: ``mcp__<server>__<tool>`` and ``mcp__<server>``.

Claude Code names the tools of an MCP server ``mcp__<server>__<tool>``; ``mcp__<server>``
alone grants every tool of that server. Definition files may name them in ``tools`` and
``disallowedTools``. They are not looked up in the host's tool registry: they resolve
against the MCP servers the host attaches when a subagent is bound, which is why the
runtime calls :func:`split_tool_names` at binding time and reports a server nobody
attached with :func:`missing_mcp_server_message`.

Wildcard rules: ``mcp__<server>__*`` is the same as ``mcp__<server>`` (the whole server);
no other ``*`` is accepted (``mcp__*``, ``mcp__git*__x``, ``mcp__s__get_*``), because a
pattern could grant tools of servers or names the file never mentions. The server is the
text between ``mcp__`` and the next ``__``; the tool is everything after it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final

import msgspec

__all__ = [
    "MCP_PREFIX",
    "McpToolName",
    "is_mcp_name",
    "mcp_name_problem",
    "missing_mcp_server_message",
    "parse_mcp_name",
    "split_tool_names",
    "unknown_mcp_servers",
]

MCP_PREFIX: Final = "mcp__"
_PART: Final = r"[A-Za-z0-9][A-Za-z0-9_.-]*?"
_NAME: Final = re.compile(
    rf"mcp__(?P<server>{_PART})(?:__(?P<tool>\*|[A-Za-z0-9][A-Za-z0-9_.-]*))?\Z"
)


class McpToolName(msgspec.Struct, frozen=True):
    """A parsed MCP tool name: ``tool`` is ``None`` for the whole server."""

    name: str
    server: str
    tool: str | None


def is_mcp_name(name: str) -> bool:
    """Whether ``name`` is written as an MCP tool name (starts with ``mcp__``)."""
    return name.startswith(MCP_PREFIX)


def parse_mcp_name(name: str) -> McpToolName | None:
    """The parts of a valid MCP name, or ``None`` if ``name`` is not one."""
    match = _NAME.match(name)
    if match is None or "__" in match["server"]:
        return None
    tool = match["tool"]
    return McpToolName(name, match["server"], None if tool in (None, "*") else tool)


def mcp_name_problem(name: str) -> str | None:
    """Why ``name`` (which starts with ``mcp__``) is not a valid MCP name, or ``None``."""
    if parse_mcp_name(name) is not None:
        return None
    if "*" in name:
        return (
            f"{name!r} is a wildcard pattern; only 'mcp__<server>' or 'mcp__<server>__*' "
            "(every tool of one server) and exact 'mcp__<server>__<tool>' names are "
            "accepted, because a pattern could grant tools the file never names"
        )
    return (
        f"{name!r} is not an MCP tool name; expected 'mcp__<server>__<tool>' or "
        "'mcp__<server>' (letters, digits, '_', '.' or '-')"
    )


def split_tool_names(names: Iterable[str]) -> tuple[tuple[McpToolName, ...], tuple[str, ...]]:
    """Split tool names into MCP names (parsed) and the rest, each in their given order.

    Args:
        names: Tool names, MCP names (``mcp__server__tool``, ``mcp__server``) among them.

    Returns:
        The parsed MCP names and the other names.

    Raises:
        ValueError: A name starts with ``mcp__`` but is not a valid MCP name (definitions
            never hold one: their readers reject it with the file and line).
    """
    mcp: list[McpToolName] = []
    rest: list[str] = []
    for name in names:
        if not is_mcp_name(name):
            rest.append(name)
            continue
        parsed = parse_mcp_name(name)
        if parsed is None:
            raise ValueError(mcp_name_problem(name))
        mcp.append(parsed)
    return tuple(mcp), tuple(rest)


def unknown_mcp_servers(names: Iterable[str], known: Collection[str]) -> tuple[str, ...]:
    """The servers ``names`` (MCP names) refer to that are not in ``known``, in order."""
    mcp, _ = split_tool_names(names)
    return tuple(dict.fromkeys(n.server for n in mcp if n.server not in known))


def missing_mcp_server_message(server: str, agent: str | None = None) -> str:
    """The error for a definition naming tools of an MCP server nobody attached.

    Args:
        server: The MCP server's name.
        agent: The definition's name, if known.

    Returns:
        The message, saying how to attach the server or drop its names.
    """
    who = f"agent {agent!r} names" if agent else "the definition names"
    return (
        f"no MCP server named {server!r}: {who} its tools (mcp__{server}__...); attach it "
        f"with an MCP server called {server!r} in the host's configuration, or remove "
        f"those names from tools"
    )
