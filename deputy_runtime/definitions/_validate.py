"""Checking definition files the way a run will use them, reporting every problem.

Reading a file already checks everything the file alone decides. Validation adds what a
run would only find out later, as warnings: a ``provider/model`` spec whose provider is
not registered (with the closest registered name), and MCP tool names whose server no
configuration supplies.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable
from pathlib import Path

import msgspec

from ..errors import DefinitionFileError
from ._discovery import collect_agent_definitions, definition_format
from ._files import check_path_argument, read_definition_text
from ._format import definition_from_yaml
from ._markdown_read import read_markdown_file
from ._mcp import split_tool_names
from ._model import AgentDefinition
from ._problems import DefinitionProblem, ProblemLog, Severity
from ._registry import SkillRegistry, ToolRegistry, check_skill_registry, check_tool_registry

__all__ = ["ValidationReport", "definition_warnings", "validate_definitions"]


class ValidationReport(msgspec.Struct, frozen=True):
    """What :func:`validate_definitions` found: ``files`` read, every problem in order,
    and the definitions that loaded (by file)."""

    files: int
    problems: tuple[DefinitionProblem, ...]
    definitions: tuple[tuple[Path, AgentDefinition], ...] = ()

    @property
    def errors(self) -> tuple[DefinitionProblem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[DefinitionProblem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.WARNING)


def validate_definitions(
    paths: Iterable[str | Path],
    tools: ToolRegistry | None = None,
    skills: SkillRegistry | None = None,
    *,
    known_mcp_servers: Collection[str] | None = None,
) -> ValidationReport:
    """Check definition files and directories; report every problem of every file.

    A directory is read as discovery reads it (top level, YAML and ``.md`` files); a file
    by its extension (``.md``/``.markdown`` markdown, anything else YAML). Names resolve
    through ``tools`` and ``skills`` exactly as when a host loads the files. On top of the
    readers' own problems, each definition that loads gets the warnings of
    :func:`definition_warnings`. A path that does not exist is an error problem.

    Args:
        paths: Definition files and directories.
        tools: Registry key -> Tool, for the files' ``tools`` names.
        skills: Registry key -> Skill or approved skill path.
        known_mcp_servers: The MCP servers a configuration supplies (``None``: none);
            MCP tool names of any other server get a warning.

    Returns:
        How many files were read, every problem (warnings and errors) and each definition
        that loaded with its file.

    Raises:
        DefinitionFileError: An argument has the wrong type.
    """
    problems: list[DefinitionProblem] = []
    loaded: list[tuple[Path, AgentDefinition]] = []
    files = 0
    known = frozenset(known_mcp_servers or ())
    for raw in paths:
        path = check_path_argument(raw)
        tool_registry = check_tool_registry(tools, path)
        skill_registry = check_skill_registry(skills, path)
        if path.is_dir():
            collection = collect_agent_definitions(
                path, tool_registry, skill_registry, markdown=True
            )
            files += collection.files
            problems.extend(collection.problems)
            found = [(collection.sources[n], d) for n, d in collection.definitions.items()]
        else:
            files += 1
            log = ProblemLog(path)
            definition = _read_file(path, tool_registry, skill_registry, log)
            problems.extend(log.items)
            found = [] if definition is None else [(path, definition)]
        for file, definition in found:
            problems.extend(definition_warnings(definition, file, known_mcp_servers=known))
            loaded.append((file, definition))
    return ValidationReport(files, tuple(problems), tuple(loaded))


def _read_file(
    file: Path, tools: ToolRegistry, skills: SkillRegistry, log: ProblemLog
) -> AgentDefinition | None:
    try:
        if definition_format(file) == "markdown":
            return read_markdown_file(file, tools, skills, log)
        return definition_from_yaml(read_definition_text(file), file, tools, skills, log)
    except DefinitionFileError as exc:
        log.record_raised(exc)
        return None


def definition_warnings(
    definition: AgentDefinition,
    path: Path,
    *,
    known_mcp_servers: Collection[str] = (),
) -> list[DefinitionProblem]:
    """Warnings about what a run would trip over later: an unregistered provider in a
    ``provider/model`` spec, and MCP tool names of servers not in ``known_mcp_servers``
    (nor in the definition's own ``mcp_servers``)."""
    found = []
    model_problem = _model_problem(definition.model)
    if model_problem is not None:
        found.append(_warning(path, "model", model_problem))
    mcp, _ = split_tool_names(definition.mcp_tools or ())
    supplied = set(known_mcp_servers) | set(definition.mcp_servers or ())
    missing: dict[str, list[str]] = {}
    for name in mcp:
        if name.server not in supplied:
            missing.setdefault(name.server, []).append(name.name)
    for server, names in missing.items():
        found.append(
            _warning(
                path,
                "tools",
                f"tools: no MCP server named {server!r} is configured, so "
                f"{', '.join(names)} cannot resolve yet; they resolve when the host attaches "
                f"an MCP server called {server!r}",
            )
        )
    return found


def _model_problem(model: str) -> str | None:
    from ..chat import is_provider_name, provider_names  # lazily: the chat layer is large

    provider, slash, _ = model.partition("/")
    if not slash or is_provider_name(provider):
        return None
    known = provider_names()
    close = difflib.get_close_matches(provider.strip().lower().replace("-", "_"), known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"model: unknown provider {provider!r} in {model!r}; {hint}registered providers: "
        f"{', '.join(known)} (a plugin can register more)"
    )


def _warning(path: Path, key: str, message: str) -> DefinitionProblem:
    return DefinitionProblem(path, _key_line(path, key), key, message, Severity.WARNING)


def _key_line(path: Path, key: str) -> int | None:
    """The line of the top-level ``key`` in the file, to point a warning at it."""
    try:
        text = read_definition_text(path, markdown=definition_format(path) == "markdown")
    except DefinitionFileError:  # pragma: no cover - the file was just read successfully
        return None
    match = re.search(rf"^{re.escape(key)}[ \t]*:", text, re.MULTILINE)
    return None if match is None else text.count("\n", 0, match.start()) + 1
