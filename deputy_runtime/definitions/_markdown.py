"""Markdown agent files (Claude Code ``.claude/agents/*.md`` and AgentLane style).

A markdown agent file is YAML frontmatter between ``---`` fences plus a body that becomes
the agent's prompt. Splitting, line handling, YAML typing, coercion and truncation follow
AgentLane so real files load the same way; the keys map onto :class:`AgentDefinition` as
DESIGN 3.2 fixes. Reading has the YAML reader's safety rules (regular files only, 1 MiB,
non-blocking open, no code execution, tools and skills only through registries) and every
problem is a :class:`~deputy_runtime.errors.DefinitionFileError` naming the file and,
where known, the line. The work is split over ``_frontmatter`` (fences and YAML),
``_markdown_read`` (keys to fields) and ``_markdown_write`` (rendering); this module is
the public face.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._files import check_path_argument, read_definition_text
from ._markdown_read import build_definition, parse_markdown
from ._markdown_write import agent_definition_to_markdown
from ._model import AgentDefinition
from ._problems import ProblemLog, WarningCallback
from ._registry import check_skill_registry, check_tool_registry

__all__ = [
    "agent_definition_from_markdown",
    "agent_definition_to_markdown",
    "claude_agent_definitions",
    "read_markdown_file",
]


def agent_definition_from_markdown(
    path: str | os.PathLike[str],
    tools: Mapping[str, Any] | None = None,
    skills: Mapping[str, Any] | None = None,
    *,
    on_warning: WarningCallback | None = None,
) -> AgentDefinition:
    """Read a markdown agent file (YAML frontmatter + prompt body) into an AgentDefinition.

    ``tools`` and ``skills`` are the host's registries: the file names registry keys, never
    code or paths. Without a ``tools`` key the agent gets every tool in ``tools`` (the host
    decides what "inherit" offers); ``tools: []`` gives none; a name missing from the
    registry is an error. ``disallowedTools`` is kept on the definition and removes tools
    whenever the agent is built. MCP tool names (``mcp__server__tool``) go to
    ``mcp_tools``. Raises DefinitionFileError (with path and line) for the first thing
    wrong with the file, including a file without frontmatter.

    What the file gets away with (see ``docs/definitions-leniency.md``) is reported as
    :class:`DefinitionProblem` warnings, each passed to ``on_warning``; without a callback
    each is issued as a Python warning of category ``DefinitionWarning``. Warnings are
    only delivered for a file that loads.
    """
    file = check_path_argument(path)
    tool_registry = check_tool_registry(tools, file)
    skill_registry = check_skill_registry(skills, file)
    log = ProblemLog(file)
    definition = read_markdown_file(file, tool_registry, skill_registry, log)
    log.deliver(on_warning)
    return definition


def read_markdown_file(
    file: Path, tools: Mapping[str, Any], skills: Mapping[str, Any], log: ProblemLog
) -> AgentDefinition:
    """Read one markdown file with checked registries, recording every problem in ``log``
    and raising the first error."""
    parsed = parse_markdown(read_definition_text(file, markdown=True), file, log, check=False)
    return build_definition(parsed, tools, skills)


def claude_agent_definitions(
    project_dir: str | os.PathLike[str] = ".",
    tools: Mapping[str, Any] | None = None,
    skills: Mapping[str, Any] | None = None,
    *,
    on_warning: WarningCallback | None = None,
) -> dict[str, AgentDefinition]:
    """Discover Claude Code's project agents: every file in ``<project_dir>/.claude/agents``.

    Uses :func:`agent_definitions` with ``markdown=True`` (top level only, hidden files
    skipped, sorted by name, any invalid file aborts; warnings go to ``on_warning``). A
    missing directory gives ``{}``.
    """
    from ._discovery import agent_definitions  # lazy: discovery imports this module

    directory = check_path_argument(project_dir) / ".claude" / "agents"
    return agent_definitions(directory, tools, skills, markdown=True, on_warning=on_warning)
