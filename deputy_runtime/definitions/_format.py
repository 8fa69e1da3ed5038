"""YAML definition files, format versions 1 and 2: reading and writing one file.

A file is one mapping: ``version: 1`` plus the fields of :class:`AgentDefinition`. Tools
and skills are registry keys. Reading loads no code, connects nothing and builds no agent.

Version 2 is version 1 plus ``output_schema``, ``output_retries`` and ``compact_at``; a
version-1 file never holds them, so every reader of version 1 still reads every version-1
file the same way, and a version-2 file is refused by a reader that only knows version 1
instead of being run without its schema or its compaction threshold. The writer writes
version 1 unless the definition has an output schema or a ``compact_at``.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from ..errors import DefinitionError, DefinitionFileError
from ._files import check_path_argument, install_atomically, read_definition_text
from ._mcp import is_mcp_name, mcp_name_problem
from ._model import FIELD_NAMES, AgentDefinition, DefinitionFieldError, permission_mode_value
from ._problems import ProblemLog
from ._registry import (
    REGISTRY_KEY_PATTERN,
    SkillRegistry,
    ToolRegistry,
    check_skill_registry,
    check_tool_registry,
    registry_key,
)
from ._yaml import Marks, YAMLProblem, dump_yaml, load_yaml

__all__ = [
    "FORMAT_FIELDS",
    "FORMAT_VERSIONS",
    "V2_FIELDS",
    "agent_definition_read",
    "agent_definition_write",
    "definition_from_yaml",
    "definition_to_yaml",
]

#: Fields only a format-2 file may hold (written after the format-1 fields).
V2_FIELDS: Final = ("output_schema", "output_retries", "compact_at")
#: Keys a format-1 file may hold, in the order they are written. MCP tool names are
#: written in ``tools`` (the definition keeps them apart, in ``mcp_tools``).
FORMAT_FIELDS: Final = (
    "version",
    *(field for field in FIELD_NAMES if field not in ("mcp_tools", "hooks", "color", *V2_FIELDS)),
)
#: The format versions this reader understands.
FORMAT_VERSIONS: Final = (1, 2)
_ALL_FIELDS: Final = (*FORMAT_FIELDS, *V2_FIELDS)
_REQUIRED: Final = ("name", "description", "prompt")
_STRING_LISTS: Final = ("disallowed_tools", "memory", "mcp_servers")
_YAML11 = "YAML 1.1 reads unquoted yes/no/on/off/true/false as booleans and 123 as a number"


def _kind(value: object) -> str:
    """How a YAML value reads back, in the file's own terms."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"the date {value.isoformat()}"
    if isinstance(value, str):
        shown = (
            repr(value) if len(value) <= 60 else f"{value[:40]!r}... ({len(value):,} characters)"
        )
        return f"the string {shown}"
    return "a sequence" if isinstance(value, list) else "a mapping"


def _quote_hint(value: object) -> str:
    scalar = isinstance(value, (bool, int, float, datetime.date))
    return f"; put it in quotes to make it a string ({_YAML11})" if scalar else ""


class _Reader:
    """Turns one loaded YAML record into an AgentDefinition, pointing errors at lines."""

    def __init__(
        self,
        path: Path,
        marks: Marks,
        tools: ToolRegistry,
        skills: SkillRegistry,
        log: ProblemLog | None = None,
    ) -> None:
        self.path = path
        self.marks = marks
        self.tools = tools
        self.skills = skills
        self.log = ProblemLog(path) if log is None else log

    def attempt(self, read: Any, *args: Any, default: Any = None) -> Any:
        """``read(*args)``, or ``default`` after recording its error: every independent
        problem of a file is reported, not only the first."""
        try:
            return read(*args)
        except DefinitionFileError as exc:
            self.log.error(exc)
            return default

    def fail(self, message: str, at: object = None) -> DefinitionFileError:
        mark = self.marks.get(at) if at is not None else None
        line, column = mark if mark is not None else (None, None)
        return DefinitionFileError(message, path=self.path, line=line, column=column)

    def definition(self, record: object) -> AgentDefinition:
        if not isinstance(record, dict):
            what = "the file is empty" if record is None else f"it holds {_kind(record)}"
            raise self.fail(
                "Expected a mapping containing only documented fields (version: 1, name, "
                f"description, prompt, ...), but {what}"
            )
        self.check_keys(record)
        self.attempt(self.check_version, record)
        missing = [field for field in _REQUIRED if field not in record]
        if missing:
            self.log.error(
                self.fail(
                    f"Required fields: name, description, prompt; missing: {', '.join(missing)}"
                )
            )
        fields: dict[str, Any] = {}
        for field in ("name", "description", "prompt", "model", "initial_prompt"):
            if field in record:
                nullable = field == "initial_prompt"
                fields[field] = self.attempt(self.string, record, field, nullable)
        tools = self.references(record, "tools", self.tools)
        fields["tools"] = [item for item in tools if not isinstance(item, str)]
        mcp_tools = [item for item in tools if isinstance(item, str)]
        if mcp_tools:
            fields["mcp_tools"] = mcp_tools
        fields["skills"] = self.references(record, "skills", self.skills)
        for field in _STRING_LISTS:
            if field in record:
                fields[field] = self.attempt(self.strings, record, field)
        if "max_requests" in record:
            fields["max_requests"] = self.attempt(self.max_requests, record["max_requests"])
        for field in ("permission_mode", "params", *V2_FIELDS):
            if field in record:
                fields[field] = record[field]
        if "permission_mode" in record:
            # Checked here too, so a bad mode is reported with the file's other problems
            # rather than only once they are fixed.
            self.attempt(self.permission_mode, record["permission_mode"])
        self.log.raise_first_error()
        try:
            return AgentDefinition(**fields)
        except DefinitionFieldError as exc:
            raise self.fail(f"{exc.field}: {exc.problem}", exc.field) from None
        except DefinitionError as exc:  # pragma: no cover - every field error names its field
            raise self.fail(str(exc)) from None

    def check_keys(self, record: dict[Any, Any]) -> None:
        version_2 = record.get("version") == 2 and type(record.get("version")) is int
        for key in record:
            if key in FORMAT_FIELDS or (version_2 and key in V2_FIELDS):
                continue
            if key in V2_FIELDS:
                hint = (
                    f"{key} is part of format version 2; write 'version: 2' to use it "
                    "(a format-1 file never holds it)"
                )
            elif key == "sub_agents":
                hint = "nested subagents are not part of the format; define each in its own file"
            else:
                allowed = _ALL_FIELDS if version_2 else FORMAT_FIELDS
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else ""
                hint = f"{hint} Allowed fields: {', '.join(allowed)}".strip()
            self.log.error(self.fail(f"Unknown field {key!r}; {hint}", ("key", key)))

    def check_version(self, record: dict[str, Any]) -> None:
        if "version" not in record:
            raise self.fail("Missing 'version: 1'; add it as the first line of the file")
        version = record["version"]
        if type(version) is not int or version not in FORMAT_VERSIONS:
            if isinstance(version, str):
                fix = "write it without quotes: version: 1"
            else:
                fix = (
                    "this reader understands format versions 1 and 2 (version: 1, or "
                    "version: 2 for a definition with an output_schema or compact_at)"
                )
            raise self.fail(
                f"version must be the integer 1 or 2, got {_kind(version)}; {fix}", "version"
            )

    def string(self, record: dict[str, Any], field: str, nullable: bool) -> str | None:
        value = record[field]
        if isinstance(value, str) or (value is None and nullable):
            return value
        if value is None:
            fix = (
                "omit the field to use the lead's model"
                if field == "model"
                else f"give {field} a non-empty string"
            )
            raise self.fail(f"{field} may not be null; {fix}", field)
        raise self.fail(
            f"{field}: expected a string, got {_kind(value)}{_quote_hint(value)}", field
        )

    def items(self, record: dict[str, Any], field: str) -> list[str]:
        value = record[field]
        if isinstance(value, str):
            return [value]  # a single string is shorthand for a one-element sequence
        if not isinstance(value, list):
            raise self.fail(
                f"{field}: expected a sequence of strings (or one string), got {_kind(value)}",
                field,
            )
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(
                    f"{field}: item {index + 1} is {_kind(item)}, expected a non-empty "
                    f"string{_quote_hint(item)}",
                    (field, index),
                )
        return value

    def references(self, record: dict[str, Any], field: str, registry: Mapping[str, Any]) -> Any:
        """The registry objects ``field`` names; for ``tools``, MCP names stay strings
        (they resolve against MCP servers, not the registry). Every bad entry is recorded."""
        if field not in record:
            return ()
        if record[field] is None:
            self.log.error(self.fail(f"{field} may not be null; write {field}: [] for none", field))
            return ()
        keys = self.attempt(self.items, record, field, default=[])
        seen: set[str] = set()
        result = []
        for index, key in enumerate(keys):
            at = (field, index) if isinstance(record[field], list) else field
            if field == "tools" and is_mcp_name(key) and key not in seen:
                problem = mcp_name_problem(key)
                if problem is not None:
                    self.log.error(self.fail(f"tools: {problem}", at))
                seen.add(key)
                result.append(key)
                continue
            if key in seen or key not in registry:
                self.log.error(
                    self.fail(self.reference_problem(field, key, key in seen, registry), at)
                )
                continue
            seen.add(key)
            result.append(registry[key])
        return result

    def reference_problem(
        self, field: str, key: str, duplicate: bool, registry: Mapping[str, Any]
    ) -> str:
        if duplicate:
            return f"Unknown or duplicate {field} references: {key!r} is listed twice"
        if not REGISTRY_KEY_PATTERN.match(key):
            return (
                f"Unknown or duplicate {field} references: {key!r} is not a registry key; keys "
                "are a letter followed by letters, digits, '_', '.' or '-' (e.g. 'read_file')"
            )
        known = sorted(registry)
        same_case = [k for k in known if k.lower() == key.lower()]
        if same_case:
            hint = f"keys are case-sensitive; did you mean {same_case[0]!r}?"
        elif known:
            hint = f"the {field} registry has: {', '.join(known)}"
        else:
            hint = f"no {field} registry was passed, so the file may not name any {field}"
        return f"Unknown or duplicate {field} references: {key!r} is not a registry key; {hint}"

    def strings(self, record: dict[str, Any], field: str) -> list[str] | None:
        return None if record[field] is None else self.items(record, field)

    def permission_mode(self, value: object) -> object:
        try:
            return permission_mode_value(value)
        except DefinitionFieldError as exc:
            raise self.fail(f"{exc.field}: {exc.problem}", "permission_mode") from None

    def max_requests(self, value: object) -> object:
        if value is None or (type(value) is int and value >= 0):
            return value
        raise self.fail(
            f"max_requests: expected a non-negative integer (e.g. 10) or null, got {_kind(value)}",
            "max_requests",
        )


def definition_from_yaml(
    text: str,
    path: Path,
    tools: ToolRegistry,
    skills: SkillRegistry,
    log: ProblemLog | None = None,
) -> AgentDefinition:
    """Parse format-1 or format-2 YAML ``text`` (read from ``path``) with checked registries.

    Every independent problem is recorded in ``log``; the first is raised.
    """
    try:
        record, marks = load_yaml(text)
    except YAMLProblem as problem:
        line, column = problem.mark or (None, None)
        raise DefinitionFileError(problem.message, path=path, line=line, column=column) from None
    return _Reader(path, marks, tools, skills, log).definition(record)


def agent_definition_read(
    path: str | Path, tools: ToolRegistry | None = None, skills: SkillRegistry | None = None
) -> AgentDefinition:
    """Read one YAML definition file (format version 1 or 2), resolving names via the registries.

    Args:
        path: The YAML file.
        tools: Registry key -> Tool, for the file's ``tools`` names (case-sensitive).
        skills: Registry key -> Skill or approved skill path, for its ``skills`` names.

    Returns:
        The definition the file describes.

    Raises:
        DefinitionFileError: Any problem, with ``path`` (and ``line`` and ``column`` where
            known); the registries are checked before the file is touched.
    """
    file = check_path_argument(path)
    tool_registry = check_tool_registry(tools, file)
    skill_registry = check_skill_registry(skills, file)
    return definition_from_yaml(read_definition_text(file), file, tool_registry, skill_registry)


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


def definition_to_yaml(
    definition: AgentDefinition, path: Path, tools: ToolRegistry, skills: SkillRegistry
) -> bytes:
    """The canonical bytes of ``definition`` (format 2 when it has an output schema, else
    format 1), verified to read back equal."""
    if not isinstance(definition, AgentDefinition):
        raise DefinitionFileError(
            f"Expected an AgentDefinition to write, got {type(definition).__name__}", path=path
        )
    if definition.hooks is not None:
        raise DefinitionFileError(
            "hooks (Claude Code command hooks) cannot be written to a YAML definition file: "
            "keep the agent in markdown, or drop them with definition.replace(hooks=None)",
            path=path,
        )
    if definition.color is not None:
        raise DefinitionFileError(
            "color cannot be written to a YAML definition file (the format has no such "
            "field): keep the agent in markdown, or drop it with "
            "definition.replace(color=None)",
            path=path,
        )
    if isinstance(definition.output_schema, type):
        raise DefinitionFileError(
            f"output_schema is the Python type {definition.output_schema.__qualname__}, which "
            "a definition file cannot hold: give the definition a JSON Schema mapping "
            "instead (msgspec.json.schema(type) is a start), or keep it in Python",
            path=path,
        )
    structured = definition.output_schema is not None
    compacted = definition.compact_at is not None
    record: dict[str, Any] = {"version": 2 if structured or compacted else 1}
    v2 = (V2_FIELDS[:2] if structured else ()) + (V2_FIELDS[2:] if compacted else ())
    for field in FORMAT_FIELDS[1:] + v2:
        value = getattr(definition, field)
        if field == "tools":
            value = [registry_key("tools", tool, tools, path) for tool in value]
            value += list(definition.mcp_tools or ())
        elif field == "skills":
            value = [registry_key("skills", skill, skills, path) for skill in value]
        elif field == "params":
            if value is None:
                continue  # omitted so that deputy itself can read the file
            value = _thaw(value)
        elif field == "output_schema":
            value = _thaw(value)
        elif isinstance(value, tuple):
            value = list(value)
        record[field] = value
    # Literal block scalars read best; if one would not read back exactly, quote instead.
    for literal in (True, False):
        text = dump_yaml(record, literal=literal)
        try:
            if definition_from_yaml(text, path, tools, skills) == definition:
                return text.encode("utf-8")
        except (DefinitionFileError, UnicodeEncodeError):
            pass
    raise DefinitionFileError(
        "The definition could not be written so that it reads back identically (round-trip "
        "check failed); check its strings for unpaired surrogates or unusual line breaks",
        path=path,
    )


def agent_definition_write(
    definition: AgentDefinition,
    path: str | Path,
    tools: ToolRegistry | None = None,
    skills: SkillRegistry | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``definition`` as a canonical YAML file, atomically: format version 1, or
    version 2 when it has an ``output_schema`` (a JSON Schema mapping; a Python type
    cannot be written) or a ``compact_at``.

    The text is checked to read back equal before it is written; the file is UTF-8 with LF
    line endings, at most 1 MiB. On any failure the destination is unchanged and no
    temporary file remains.

    Args:
        definition: The definition to write.
        path: The destination file.
        tools: The registry whose keys name the definition's tools; each tool must match
            exactly one entry, by identity.
        skills: The registry whose keys name its skills (Skill objects by identity, skill
            paths by equality).
        overwrite: Replace an existing file; without it an existing file (even one created
            concurrently) is never replaced.

    Returns:
        The path written.

    Raises:
        DefinitionFileError: A tool or skill has no single registry entry, the file exists
            and ``overwrite`` is false, or the write failed.
    """
    file = check_path_argument(path)
    tool_registry = check_tool_registry(tools, file)
    skill_registry = check_skill_registry(skills, file)
    if not isinstance(overwrite, bool):
        raise DefinitionFileError(f"overwrite must be True or False, got {overwrite!r}", path=file)
    data = definition_to_yaml(definition, file, tool_registry, skill_registry)
    return install_atomically(file, data, overwrite)
