"""A filesystem-style MCP server for examples/mcp_delegation.py (MCP SDK 2.x).

Serves the files under its working directory, read-only: ``list_files`` and
``read_file``; paths outside the directory are refused. ``whoami`` reports the process id,
so the example can show which server answered.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("files")
ROOT = Path.cwd().resolve()
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def list_files() -> list[str]:
    """Every file under the served directory, relative to it, sorted."""
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file())


@server.tool(annotations=READ_ONLY)
def read_file(path: str) -> str:
    """The text of ``path`` (relative to the served directory)."""
    target = (ROOT / path).resolve()
    if not target.is_relative_to(ROOT):
        raise ValueError(f"{path!r} is outside the served directory")
    return target.read_text(encoding="utf-8")


@server.tool(annotations=READ_ONLY)
def whoami() -> int:
    """This server's process id."""
    return os.getpid()


if __name__ == "__main__":
    server.run()
