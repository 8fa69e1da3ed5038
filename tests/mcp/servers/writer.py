"""An MCP server whose tools write, written with the MCP SDK.

``append`` writes to the file named by ``NOTES_FILE``; ``tracked_write`` records how many
calls overlap (so a test can prove callers were serialised); ``grow`` adds a tool and
announces the new tool list. Run as ``python writer.py [stdio|http PORT]``.
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("writer")
STATE = {"active": 0, "max_active": 0, "calls": 0}


class Overlap(TypedDict):
    calls: int
    max_active: int
    pid: int


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def append(text: str) -> str:
    """Append a line to the notes file."""
    with open(os.environ["NOTES_FILE"], "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return f"appended {len(text)} characters"


@server.tool()
def unannotated(text: str) -> str:
    """A tool that says nothing about what it does."""
    return text


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def wipe() -> str:
    """Empty the notes file."""
    open(os.environ["NOTES_FILE"], "w").close()
    return "wiped"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def tracked_write(pause: float = 0.05, wait_for: int = 1) -> Overlap:
    """Hold a write open and report the most calls seen running at once.

    The call lasts ``pause`` seconds, and first waits (up to 30 s) until ``wait_for``
    calls are running, so a test can make two calls overlap without relying on timing.
    """
    STATE["active"] += 1
    STATE["calls"] += 1
    STATE["max_active"] = max(STATE["max_active"], STATE["active"])
    try:
        with anyio.move_on_after(30):
            while STATE["active"] < wait_for:
                await anyio.sleep(0.005)
        await anyio.sleep(pause)
    finally:
        STATE["active"] -= 1
    return {"calls": STATE["calls"], "max_active": STATE["max_active"], "pid": os.getpid()}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and tell the client the tool list changed."""

    def added() -> str:
        return f"{name} is here"

    server.add_tool(added, name=name, description="A tool added at run time.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
