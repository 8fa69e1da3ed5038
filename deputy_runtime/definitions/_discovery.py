"""Discovery: every definition file at the top of one directory, all valid or none.

Top level only, ``.yaml``/``.yml`` in any case (and ``.md`` when asked), hidden files
skipped, sorted by name in code point order so the result never depends on the locale.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ..errors import DefinitionFileError
from ._files import check_path_argument, read_definition_text
from ._format import definition_from_yaml
from ._markdown_read import read_markdown_file
from ._model import AgentDefinition
from ._problems import DefinitionProblem, ProblemLog, Severity, WarningCallback
from ._registry import SkillRegistry, ToolRegistry, check_skill_registry, check_tool_registry

__all__ = [
    "FORMAT_BY_SUFFIX",
    "DefinitionCollection",
    "agent_definitions",
    "candidate_names",
    "collect_agent_definitions",
    "definition_format",
    "read_one",
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
    except (OSError, ValueError) as exc:
        raise DefinitionFileError(
            f"Could not list the directory: {_os_reason(exc)}", path=directory
        ) from None
    return sorted(
        name for name in names if not name.startswith(".") and name.lower().endswith(suffixes)
    )


class DefinitionCollection(msgspec.Struct, frozen=True):
    """What :func:`collect_agent_definitions` found in one directory.

    ``definitions`` maps canonical names to the definitions that loaded (a name two files
    define is left out, and both files get an error); ``problems`` holds every warning and
    error, in file order; ``files`` is the number of files read; ``sources`` maps each
    loaded name to its file.
    """

    definitions: Mapping[str, AgentDefinition]
    problems: tuple[DefinitionProblem, ...]
    files: int
    sources: Mapping[str, Path] = msgspec.field(default_factory=dict)

    @property
    def errors(self) -> tuple[DefinitionProblem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[DefinitionProblem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.WARNING)


def agent_definitions(
    path: str | Path = ".deputy/agents",
    tools: ToolRegistry | None = None,
    skills: SkillRegistry | None = None,
    *,
    markdown: bool = False,
    on_warning: WarningCallback | None = None,
) -> dict[str, AgentDefinition]:
    """Read every definition file in a directory; map canonical names to them.

    Reads top-level ``*.yaml``/``*.yml`` files (any case; hidden files skipped; also ``*.md``
    agent files when ``markdown=True``) in code point order of their names. All valid or
    none: any invalid file aborts the whole discovery. Hosts that load big shared
    collections and prefer the files that load over none use
    :func:`collect_agent_definitions`.

    Args:
        path: The directory.
        tools: Registry key -> Tool, for the files' ``tools`` names.
        skills: Registry key -> Skill or approved skill path.
        markdown: Also read ``*.md`` agent files.
        on_warning: Called with each warning (markdown files only); without it each is
            issued as a Python warning of category :class:`DefinitionWarning`. Warnings
            are delivered once every file has loaded.

    Returns:
        Canonical name -> definition (``{}`` for a missing directory); it can be passed
        straight to a :class:`~deputy_runtime.LeadAgent` as its subagents.

    Raises:
        DefinitionFileError: A file is invalid, two files have the same canonical name, or
            ``path`` is not a directory; the error names the file(s).
    """
    directory, tool_registry, skill_registry, names = _discover(path, tools, skills, markdown)
    result: dict[str, AgentDefinition] = {}
    origin: dict[str, str] = {}
    logs = []
    for name in names:
        file = directory / name
        log = ProblemLog(file)
        definition = read_one(file, tool_registry, skill_registry, log, markdown=markdown)
        logs.append(log)
        if definition.name in result:
            raise DefinitionFileError(
                f"Duplicate AgentDefinition names: {definition.name!r} is defined by both "
                f"{origin[definition.name]} and {name}; names must be unique after "
                "lowercasing",
                path=directory,
            )
        result[definition.name] = definition
        origin[definition.name] = name
    for log in logs:
        log.deliver(on_warning)
    return result


def collect_agent_definitions(
    path: str | Path = ".deputy/agents",
    tools: ToolRegistry | None = None,
    skills: SkillRegistry | None = None,
    *,
    markdown: bool = False,
) -> DefinitionCollection:
    """Read every definition file in a directory like :func:`agent_definitions`, but keep
    going past bad files: return the definitions that load plus every problem found.

    For hosts that load big shared collections, where one broken file should not take
    the others down. Each bad file gets all of its problems (not only the first); two
    files with the same canonical name both get an error naming the other, and neither
    is loaded (which one is meant cannot be known).

    Args:
        path: The directory.
        tools: Registry key -> Tool, for the files' ``tools`` names.
        skills: Registry key -> Skill or approved skill path.
        markdown: Also read ``*.md`` agent files.

    Returns:
        The definitions that loaded, every problem (warnings and errors, in file order),
        the number of files read and each loaded definition's file; an empty collection
        for a missing directory.

    Raises:
        DefinitionFileError: A problem with the arguments or the directory itself (a
            registry of the wrong type, a path that is a file, an unreadable directory).
    """
    directory, tool_registry, skill_registry, names = _discover(path, tools, skills, markdown)
    loaded: dict[str, tuple[str, AgentDefinition]] = {}
    duplicates: dict[str, list[str]] = {}
    problems: list[DefinitionProblem] = []
    for name in names:
        file = directory / name
        log = ProblemLog(file)
        try:
            definition = read_one(file, tool_registry, skill_registry, log, markdown=markdown)
        except DefinitionFileError as exc:
            log.record_raised(exc)
        else:
            if definition.name in loaded or definition.name in duplicates:
                duplicates.setdefault(definition.name, [loaded.pop(definition.name)[0]])
                duplicates[definition.name].append(name)
            else:
                loaded[definition.name] = (name, definition)
        problems.extend(log.items)
    for agent, files in duplicates.items():
        for name in files:
            others = ", ".join(other for other in files if other != name)
            problems.append(
                DefinitionProblem(
                    directory / name,
                    None,
                    "name",
                    f"duplicate agent name {agent!r}: also defined by {others} in the same "
                    "directory; names must be unique after lowercasing, so none of these "
                    "files was loaded",
                    Severity.ERROR,
                )
            )
    definitions = {agent: definition for agent, (_, definition) in loaded.items()}
    sources = {agent: directory / name for agent, (name, _) in loaded.items()}
    return DefinitionCollection(definitions, tuple(problems), len(names), sources)


def read_one(
    file: Path,
    tools: ToolRegistry,
    skills: SkillRegistry,
    log: ProblemLog,
    *,
    markdown: bool,
) -> AgentDefinition:
    """Read one file (markdown by its ``.md`` extension when ``markdown``, else YAML),
    recording every problem in ``log`` and raising the first error."""
    if markdown and file.name.lower().endswith(_MARKDOWN_SUFFIX):
        return read_markdown_file(file, tools, skills, log)
    text = read_definition_text(file)
    return definition_from_yaml(text, file, tools, skills, log)


def _discover(
    path: object, tools: object, skills: object, markdown: bool
) -> tuple[Path, ToolRegistry, SkillRegistry, list[str]]:
    """The checked directory and registries, and the names of the files to read."""
    directory = check_path_argument(path)
    tool_registry = check_tool_registry(tools, directory)
    skill_registry = check_skill_registry(skills, directory)
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return directory, tool_registry, skill_registry, []
    except (OSError, ValueError) as exc:
        raise DefinitionFileError(
            f"Could not inspect the directory: {_os_reason(exc)}", path=directory
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise DefinitionFileError(
            "Expected a directory of definition files, but the path is a file; use "
            "agent_definition_read() for a single file",
            path=directory,
        )
    names = candidate_names(directory, markdown=markdown)
    return directory, tool_registry, skill_registry, names


def _os_reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)
