"""``validate --mcp-tools``: check the MCP tool names definitions use against the servers.

A name such as ``mcp__git__stauts`` is only known to be wrong once the server ``git`` has
said which tools it has, so this starts every configured server a definition names (each
once, all at the same time), lists its tools and closes it. A server that cannot be
started is one problem per definition that names it; a tool the server does not list is
one problem naming the closest tool it does list.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ..definitions import AgentDefinition, DefinitionProblem, Severity, parse_mcp_name

__all__ = ["check_mcp_tools"]


def check_mcp_tools(
    definitions: Sequence[tuple[Path, AgentDefinition]], servers: Mapping[str, Any]
) -> list[DefinitionProblem]:
    """Start the servers ``definitions`` name and report their unknown tool names.

    Args:
        definitions: The definitions that loaded, with their files.
        servers: The configured servers by name (from ``.mcp.json``).

    Returns:
        One error problem per tool name the server does not list, or per definition whose
        server could not be started; in the definitions' order.
    """
    wanted = sorted(
        {
            parsed.server
            for _, d in definitions
            for name in d.mcp_tools or ()
            if (parsed := parse_mcp_name(name)) is not None and parsed.server in servers
        }
    )
    if not wanted:
        return []
    listed = anyio.run(_list_all, {name: servers[name] for name in wanted})
    problems: list[DefinitionProblem] = []
    for path, definition in definitions:
        for name in definition.mcp_tools or ():
            parsed = parse_mcp_name(name)
            if parsed is None or parsed.server not in listed:
                continue
            tools = listed[parsed.server]
            if isinstance(tools, str):  # the server's start error
                message = f"tools: {name}: MCP server {parsed.server!r} could not be started "
                problems.append(_problem(path, name, message + f"to check it: {tools}"))
            elif parsed.tool is not None and parsed.tool != "*" and parsed.tool not in tools:
                problems.append(_problem(path, name, _unknown(name, parsed.server, tools)))
    return problems


def _unknown(name: str, server: str, tools: tuple[str, ...]) -> str:
    tool = name.split("__", 2)[2]
    close = difflib.get_close_matches(tool, tools, n=1)
    hint = f"; did you mean mcp__{server}__{close[0]}?" if close else ""
    offered = ", ".join(tools) or "none"
    return f"tools: MCP server {server!r} has no tool {tool!r}{hint} (it lists: {offered})"


def _problem(path: Path, name: str, message: str) -> DefinitionProblem:
    return DefinitionProblem(
        path=path, line=_line_of(path, name), field="tools", message=message,
        severity=Severity.ERROR,
    )  # fmt: skip


def _line_of(path: Path, text: str) -> int | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((i for i, line in enumerate(lines, 1) if text in line), None)


async def _list_all(servers: Mapping[str, Any]) -> dict[str, tuple[str, ...] | str]:
    """Each server's tool names (without the ``mcp__server__`` prefix), or why it could
    not be started."""
    found: dict[str, tuple[str, ...] | str] = {}

    async def one(name: str, config: Any) -> None:
        from ..mcp import McpServer

        server = McpServer(name, config)
        try:
            async with server.session() as session:
                prefix = server.tool_prefix
                found[name] = tuple(sorted(t.name.removeprefix(prefix) for t in session.tools()))
        except Exception as exc:  # every start failure is reported, none is fatal
            found[name] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    async with anyio.create_task_group() as tg:
        for name, config in servers.items():
            tg.start_soon(one, name, config)
    return found
