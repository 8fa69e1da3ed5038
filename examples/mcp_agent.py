"""An agent using an MCP server's tools under a read-only permission mode.

Loads ``examples/mcp.json`` (a Claude Code style file; ``${PYTHON}`` is expanded), starts
the notes server over stdio, and gives its tools to an agent in ``readonly`` mode. The
scripted model searches (a read-only tool: allowed), then tries to add a note (a writing
tool: refused by the permission mode, like any built-in write tool), then answers. The
server's start, calls and stop arrive as events; its process is reaped when the session
closes.

    python examples/mcp_agent.py [asyncio|trio]

Needs the ``mcp`` extra. Offline: the model is a ``scripted`` responder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio

from deputy_runtime import Agent, Permissions, chat
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call
from deputy_runtime.mcp import McpEvent, McpServer, McpStderrLine, load_mcp_config

HERE = Path(__file__).resolve().parent


def model(request: ModelRequest) -> Any:
    results = [
        c for turn in request.turns for c in turn.contents if isinstance(c, ContentToolResult)
    ]
    if not results:
        return tool_call("mcp__notes__search_notes", {"word": "milk"})
    if len(results) == 1:
        return tool_call("mcp__notes__add_note", {"text": "buy more milk"})
    return reply("Found the milk notes; adding one was not allowed in readonly mode.")


def show(event: McpEvent) -> None:
    if not isinstance(event, McpStderrLine):
        print(f"  event {type(event).__name__}: server={event.server}")


async def main() -> None:
    configs = load_mcp_config(HERE / "mcp.json", env={**os.environ, "PYTHON": sys.executable})
    server = McpServer("notes", configs["notes"], on_event=show)
    async with server.session() as session:
        for t in session.tools():
            print(f"  tool {t.name}: read_only={t.read_only} destructive={t.destructive}")
        agent = Agent(
            chat("scripted", script=[model, model, model]),
            tools=session.tools(),
            permissions=Permissions(mode="readonly"),
        )
        result = await agent.run("What do my notes say about milk?")
        for turn in result.turns:
            for content in turn.contents:
                if isinstance(content, ContentToolResult):
                    print(f"  result: {content.error or content.value}")
        print(f"  answer: {result.response}")
    print(f"  server stderr (captured): {session.stderr_lines}")


if __name__ == "__main__":
    for backend in sys.argv[1:] or ["asyncio", "trio"]:
        print(f"[{backend}]")
        anyio.run(main, backend=backend)
