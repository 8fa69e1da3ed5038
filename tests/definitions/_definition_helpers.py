"""Helpers shared by the definition tests: real Tool objects and minimal file text."""

from __future__ import annotations

from pathlib import Path

from deputy_runtime.tools import Tool

#: The minimal valid file of the behaviour cases ("MIN").
MIN = "version: 1\nname: reviewer\ndescription: Reviews text\nprompt: Read carefully\n"


def make_tool(name: str) -> Tool:
    """A real read-only tool that counts its calls (its state is shared by reference)."""
    calls: list[dict[str, object]] = []

    def function(**arguments: object) -> str:
        calls.append(arguments)
        return f"{name} called {len(calls)} time(s)"

    return Tool(name, f"The {name} tool", {"type": "object"}, function, read_only=True)


def write(path: Path, text: str) -> Path:
    """Write ``text`` as UTF-8 bytes exactly (no newline translation)."""
    path.write_bytes(text.encode("utf-8"))
    return path
