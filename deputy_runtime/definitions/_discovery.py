"""Discovery: every definition file at the top of one directory, all valid or none.

Top level only, ``.yaml``/``.yml`` in any case (and ``.md`` when asked), hidden files
skipped, sorted by name in code point order so the result never depends on the locale.
A Claude Code plugin root, a folder of plugins or a marketplace is read as its plugins'
``agents`` (see ``_plugins``): agents named ``plugin:agent``, never its README.
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
from ._plugins import PluginFolder, find_plugins, namespaced, plugin_skills
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
    directory, tool_registry, entries = _discover(path, tools, skills, markdown)
    result: dict[str, AgentDefinition] = {}
    origin: dict[str, str] = {}
    logs = []
    for entry in entries:
        file, name = entry.file, entry.label
        log = ProblemLog(file)
        definition = entry.read(tool_registry, log)
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
    directory, tool_registry, entries = _discover(path, tools, skills, markdown)
    loaded: dict[str, tuple[str, AgentDefinition]] = {}
    duplicates: dict[str, list[str]] = {}
    problems: list[DefinitionProblem] = []
    for entry in entries:
        file, name = entry.file, entry.label
        log = ProblemLog(file)
        try:
            definition = entry.read(tool_registry, log)
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
    return DefinitionCollection(definitions, tuple(problems), len(entries), sources)


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


class _Entry:
    """One file discovery reads: where, what errors call it, and how to read it."""

    __slots__ = ("file", "label", "markdown", "plugin", "skills")

    def __init__(
        self,
        file: Path,
        label: str,
        skills: SkillRegistry,
        *,
        markdown: bool,
        plugin: PluginFolder | None = None,
    ) -> None:
        self.file = file
        self.label = label
        self.skills = skills
        self.markdown = markdown
        self.plugin = plugin

    def read(self, tools: ToolRegistry, log: ProblemLog) -> AgentDefinition:
        definition = read_one(self.file, tools, self.skills, log, markdown=self.markdown)
        return definition if self.plugin is None else namespaced(definition, self.plugin, log)


def _discover(
    path: object, tools: object, skills: object, markdown: bool
) -> tuple[Path, ToolRegistry, list[_Entry]]:
    """The checked directory and tool registry, and the files to read.

    A plugin root, a folder of plugins or a marketplace gives its plugins' agent files
    (markdown, each plugin's skills in front of the host's); any other directory its
    top-level definition files.
    """
    directory = check_path_argument(path)
    tool_registry = check_tool_registry(tools, directory)
    skill_registry = check_skill_registry(skills, directory)
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return directory, tool_registry, []
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
    plugins = find_plugins(directory)
    if plugins is not None:
        entries = []
        for plugin in plugins:
            own = check_skill_registry(plugin_skills(plugin, skill_registry), directory)
            entries += [
                _Entry(f, _label(f, directory), own, markdown=True, plugin=plugin)
                for f in plugin.agent_files
            ]
        return directory, tool_registry, entries
    names = candidate_names(directory, markdown=markdown)
    entries = [_Entry(directory / n, n, skill_registry, markdown=markdown) for n in names]
    return directory, tool_registry, entries


def _label(file: Path, directory: Path) -> str:
    try:
        return file.relative_to(directory).as_posix()
    except ValueError:
        return str(file)


def _os_reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)
