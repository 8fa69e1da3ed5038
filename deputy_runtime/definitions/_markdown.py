"""Markdown agent files (Claude Code ``.claude/agents/*.md`` style).

A markdown agent file is YAML frontmatter between ``---`` fences plus a body that becomes
the agent's prompt. Splitting, line handling, YAML typing, coercion and truncation follow
the common agent-file readers so real files load the same way; the keys map onto
:class:`AgentDefinition` fields as ``docs/markdown-format.md`` lists them. Reading has the
YAML reader's safety rules (regular files only, 1 MiB, non-blocking open, no code
execution, tools and skills only through registries) and every problem is a
:class:`~deputy_runtime.errors.DefinitionFileError` naming the file and, where known, the
line. The work is split over ``_frontmatter`` (fences and YAML), ``_markdown_read`` (keys
to fields and reading one file), ``_markdown_write`` (rendering) and ``_discovery``
(directories); this module is the public face.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._discovery import agent_definitions
from ._files import check_path_argument
from ._markdown_read import agent_definition_from_markdown
from ._markdown_write import agent_definition_to_markdown
from ._model import AgentDefinition
from ._problems import WarningCallback

__all__ = [
    "agent_definition_from_markdown",
    "agent_definition_to_markdown",
    "claude_agent_definitions",
]


def claude_agent_definitions(
    project_dir: str | os.PathLike[str] = ".",
    tools: Mapping[str, Any] | None = None,
    skills: Mapping[str, Any] | None = None,
    *,
    on_warning: WarningCallback | None = None,
) -> dict[str, AgentDefinition]:
    """Discover Claude Code's project agents: every file in ``<project_dir>/.claude/agents``.

    Uses :func:`agent_definitions` with ``markdown=True`` (top level only, hidden files
    skipped, sorted by name, any invalid file aborts; warnings go to ``on_warning`` once
    every file has loaded).

    Args:
        project_dir: The project whose ``.claude/agents`` directory is read.
        tools: Registry key -> Tool.
        skills: Registry key -> Skill or approved skill path.
        on_warning: Called with each warning; without it each is issued as a Python
            warning of category :class:`DefinitionWarning`.

    Returns:
        Canonical name -> definition (``{}`` when the directory is missing).

    Raises:
        DefinitionFileError: A file is invalid or two files share a name.
    """
    directory = check_path_argument(project_dir) / ".claude" / "agents"
    return agent_definitions(directory, tools, skills, markdown=True, on_warning=on_warning)
