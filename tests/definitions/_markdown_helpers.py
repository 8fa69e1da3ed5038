"""Shared helpers for the markdown agent file tests: byte-exact files and real registries."""

from __future__ import annotations

from pathlib import Path

from deputy_runtime.skills import Skill
from deputy_runtime.tools import Tool

# The tool names found in Claude Code and AgentLane agent files, as a host would register them.
TOOL_NAMES = (
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Bash",
    "Grep",
    "Glob",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "NotebookEdit",
    "read",
    "grep",
    "find",
    "write",
    "patch",
    "bash",
)


def make_tool(name: str) -> Tool:
    """A real, callable tool (the tests never run it)."""

    def function() -> str:
        return name

    return Tool(name, f"The {name} tool.", {"type": "object", "properties": {}}, function)


def tool_registry() -> dict[str, Tool]:
    return {name: make_tool(name) for name in TOOL_NAMES}


def skill_registry() -> dict[str, Skill | str]:
    return {
        "api-style": Skill("api-style", "House API style.", "Use nouns for resources."),
        "sql-review": "/srv/skills/sql-review",
    }


def write_bytes(directory: Path, data: bytes, name: str = "agent.md") -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


def agent_file(directory: Path, text: str, name: str = "agent.md") -> Path:
    """Write ``text`` as UTF-8 without any newline translation."""
    return write_bytes(directory, text.encode("utf-8"), name)
