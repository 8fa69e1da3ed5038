"""A read-only MCP server with structured output, written with the MCP SDK.

Run as ``python reader.py [stdio|http PORT]``.
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("reader")
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
BOOKS = {"dune": 1965, "emma": 1815, "ulysses": 1922}


class Book(TypedDict):
    title: str
    year: int


class Whoami(TypedDict):
    pid: int
    token: str


@server.tool(annotations=READ_ONLY)
def lookup(title: str) -> Book:
    """The year a book was first published."""
    if title not in BOOKS:
        raise ValueError(f"unknown book {title!r}")
    return {"title": title, "year": BOOKS[title]}


@server.tool(annotations=READ_ONLY)
def whoami() -> Whoami:
    """This server's process id and the token it was started with."""
    return {"pid": os.getpid(), "token": os.environ.get("SERVER_TOKEN", "")}


@server.tool(name="shout.loud", annotations=READ_ONLY)
def shout(text: str) -> str:
    """Upper-case text (its name is not a valid runtime tool name as it stands)."""
    return text.upper()


if __name__ == "__main__":
    print("reader server starting", file=sys.stderr, flush=True)
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
