"""A small MCP server for examples/mcp_agent.py, written with the MCP SDK (2.x).

``search_notes`` says it is read-only; ``add_note`` says it writes (not destructive);
``forget_all`` says nothing, so the runtime treats it as writing. The notes live in memory.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
NOTES = ["buy milk", "call the plumber about the milk pipe", "renew passport"]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search_notes(word: str) -> list[str]:
    """The notes that contain ``word``."""
    return [note for note in NOTES if word.lower() in note.lower()]


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def add_note(text: str) -> str:
    """Add a note."""
    NOTES.append(text)
    return f"{len(NOTES)} notes"


@server.tool()
def forget_all() -> str:
    """Forget every note."""
    NOTES.clear()
    return "forgotten"


if __name__ == "__main__":
    print("notes server ready", file=sys.stderr, flush=True)  # kept, never shown
    server.run()
