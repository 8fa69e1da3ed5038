"""Discovery: every definition file at the top of one directory, all valid or none.

Top level only, ``.yaml``/``.yml`` in any case (and ``.md`` when asked), hidden files
skipped, sorted by name in code point order so the result never depends on the locale.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import DefinitionFileError
from ._files import check_path_argument, read_definition_text
from ._format import definition_from_yaml
from ._markdown_read import agent_definition_from_markdown
from ._model import AgentDefinition
from ._registry import SkillRegistry, ToolRegistry, check_skill_registry, check_tool_registry

__all__ = [
    "FORMAT_BY_SUFFIX",
    "agent_definitions",
    "candidate_names",
    "definition_format",
]

#: The format of a single named definition file by its extension, compared in lower case
#: (used by the command line's validate and convert). Directory discovery is narrower: it
#: reads ``.md`` but not ``.markdown``, the agent-directory convention.
FORMAT_BY_SUFFIX = {".yaml": "yaml", ".yml": "yaml", ".md": "markdown", ".markdown": "markdown"}

_YAML_SUFFIXES = (".yaml", ".yml")
_MARKDOWN_SUFFIX = ".md"


def definition_format(path: Path) -> str | None:
    """``"yaml"`` or ``"markdown"`` by the extension of ``path`` (any case), else ``None``."""
    return FORMAT_BY_SUFFIX.get(path.suffix.lower())


def candidate_names(directory: Path, *, markdown: bool) -> list[str]:
    """Names of the entries discovery reads in ``directory``, in code point order."""
    suffixes = (*_YAML_SUFFIXES, _MARKDOWN_SUFFIX) if markdown else _YAML_SUFFIXES
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise DefinitionFileError(
            f"Could not list the directory: {exc.strerror or exc}", path=directory
        ) from None
    return sorted(
        name for name in names if not name.startswith(".") and name.lower().endswith(suffixes)
    )


def agent_definitions(
    path: str | Path = ".deputy/agents",
    tools: ToolRegistry | None = None,
    skills: SkillRegistry | None = None,
    *,
    markdown: bool = False,
) -> dict[str, AgentDefinition]:
    """Read every definition file in a directory; map canonical names to them.

    Reads top-level ``*.yaml``/``*.yml`` files (any case; hidden files skipped; also ``*.md``
    agent files when ``markdown=True``) in code point order of their names. All valid or
    none: any invalid file aborts the whole discovery.

    Args:
        path: The directory.
        tools: Registry key -> Tool, for the files' ``tools`` names.
        skills: Registry key -> Skill or approved skill path.
        markdown: Also read ``*.md`` agent files.

    Returns:
        Canonical name -> definition (``{}`` for a missing directory); it can be passed
        straight to a :class:`~deputy_runtime.LeadAgent` as its subagents.

    Raises:
        DefinitionFileError: A file is invalid, two files have the same canonical name, or
            ``path`` is not a directory; the error names the file(s).
    """
    directory = check_path_argument(path)
    tool_registry = check_tool_registry(tools, directory)
    skill_registry = check_skill_registry(skills, directory)
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise DefinitionFileError(
            f"Could not inspect the directory: {exc.strerror or exc}", path=directory
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise DefinitionFileError(
            "Expected a directory of definition files, but the path is a file; use "
            "agent_definition_read() for a single file",
            path=directory,
        )
    result: dict[str, AgentDefinition] = {}
    origin: dict[str, str] = {}
    for name in candidate_names(directory, markdown=markdown):
        file = directory / name
        if markdown and name.lower().endswith(_MARKDOWN_SUFFIX):
            definition = agent_definition_from_markdown(file, tool_registry, skill_registry)
        else:
            text = read_definition_text(file)
            definition = definition_from_yaml(text, file, tool_registry, skill_registry)
        if definition.name in result:
            raise DefinitionFileError(
                f"Duplicate AgentDefinition names: {definition.name!r} is defined by both "
                f"{origin[definition.name]} and {name}; names must be unique after "
                "lowercasing",
                path=directory,
            )
        result[definition.name] = definition
        origin[definition.name] = name
    return result
