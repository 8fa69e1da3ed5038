"""Agent Skills: named instructions an agent loads on demand, plus the tools they bring.

An agent given skills lists their names and descriptions in its system prompt and gets a
``load_skill`` tool that returns a skill's instructions only when the model asks for them,
so unused skills cost no context. Skill paths named in a definition are resolved through
the host's registry and loaded (``skill_load``) only when an agent is built.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from .tools._tool import Tool

__all__ = ["Skill"]


class Skill(msgspec.Struct, frozen=True, eq=False):
    """A loaded skill. Compares by identity, like tools."""

    name: str
    description: str
    instructions: str
    tools: tuple[Tool, ...] = ()
    path: Path | None = None
