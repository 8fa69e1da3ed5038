"""Reading markdown agent files: frontmatter keys to AgentDefinition fields.

Coercion and truncation follow the common agent-file readers, so a file loads here as it
does elsewhere: scalars are ``str()``-then-stripped, name lists are a comma string or a
list with duplicates dropped, the description is cut at 1024 code points after stripping,
and the body at 1000 lines plus a pointer line naming the file. Claude Code's keys map
onto AgentDefinition fields (:data:`READ_KEYS`, :data:`PERMISSION_MODE_NAMES`). Where a
lenient reader would silently default a wrong-typed value, this module raises
DefinitionFileError with the file and line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .._outputschema import SchemaProblem, output_schema_value
from ..errors import DefinitionError, DefinitionFileError
from ._claude_tools import (
    CLAUDE_CODE_TOOLS,
    ClaudeToolResolution,
    ClaudeToolStatus,
    resolve_claude_tool,
)
from ._files import check_path_argument, read_definition_text
from ._frontmatter import MAX_BODY_LINES, MAX_DESCRIPTION_LENGTH, Frontmatter, parse_frontmatter
from ._mcp import is_mcp_name, mcp_name_problem
from ._model import AgentDefinition, DefinitionFieldError, agent_definition, color_value
from ._problems import ProblemLog, WarningCallback
from ._registry import (
    REGISTRY_KEY_PATTERN,
    SkillRegistry,
    ToolRegistry,
    check_skill_registry,
    check_tool_registry,
)

__all__ = [
    "PERMISSION_MODE_NAMES",
    "READ_KEYS",
    "ParsedMarkdown",
    "agent_definition_from_markdown",
    "build_definition",
    "parse_markdown",
    "read_markdown_file",
]

#: Frontmatter keys that are read; every other key is ignored, as Claude Code ignores
#: keys it does not know (``output_schema``, ``output_retries`` and ``compact_at`` are this
#: runtime's own, spelled as in a YAML definition).
READ_KEYS = (
    "name",
    "description",
    "model",
    "model_args",
    "tools",
    "disallowedTools",
    "skills",
    "mcpServers",
    "permissionMode",
    "maxTurns",
    "initialPrompt",
    "hooks",
    "effort",
    "color",
    "output_schema",
    "output_retries",
    "compact_at",
)

#: Claude Code's ``effort`` levels, read into the definition's params as
#: ``reasoning_effort`` (each provider sends it as its own reasoning-effort field).
EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")

#: Frontmatter keys Claude Code honours and this runtime does not (yet), with why: a file
#: that sets one loads with a warning naming what it loses, never silently.
UNHONOURED_KEYS = {
    "memory": "there is no persistent agent memory here",
    "background": "delegations always run in the lead's turn here",
    "isolation": "there is no worktree isolation here",
}

#: Claude Code permission modes, and this package's own mode names, -> permission modes.
#: Nothing here asks a person for permission: ``dontAsk`` (deny what is not pre-approved)
#: and ``auto`` (a classifier approves) both come down to the listed tools under the
#: ``standard`` rules; the lead's ceiling still applies.
PERMISSION_MODE_NAMES = {
    "default": "standard",
    "acceptEdits": "standard",
    "dontAsk": "standard",
    "auto": "standard",
    "plan": "plan",
    "bypassPermissions": "full",
    "standard": "standard",
    "readonly": "readonly",
    "full": "full",
}

#: The name of the ``ask_user`` tool, which a file without ``tools`` does not get.
_ASK_USER = "ask_user"

# AgentDefinition field -> frontmatter key, for pointing errors at a line.
_FIELD_KEYS = {
    "name": "name",
    "description": "description",
    "model": "model",
    "params": "model_args",
    "tools": "tools",
    "skills": "skills",
    "disallowed_tools": "disallowedTools",
    "mcp_servers": "mcpServers",
    "mcp_tools": "tools",
    "permission_mode": "permissionMode",
    "max_requests": "maxTurns",
    "initial_prompt": "initialPrompt",
    "hooks": "hooks",
    "color": "color",
    "output_schema": "output_schema",
    "output_retries": "output_retries",
    "compact_at": "compact_at",
}


@dataclass(frozen=True)
class ParsedMarkdown:
    """An agent file's fields before tool and skill names are resolved (used by convert).

    ``tool_names`` is ``None`` when the file has no ``tools`` key (every registry tool);
    it holds registry names only (MCP names are in ``fields["mcp_tools"]``, and entries
    that only narrow what the agent may do are already dropped, with a warning).
    ``truncated`` maps ``"prompt"`` to the body's line count and ``"description"`` to its
    length when the reading rules cut them (at 1000 lines and 1024 characters). ``log``
    holds the warnings (and any errors) found so far.
    """

    path: Path
    frontmatter: Frontmatter
    fields: dict[str, Any]
    tool_names: tuple[str, ...] | None
    skill_names: tuple[str, ...]
    ignored_keys: tuple[str, ...] = field(default=())
    truncated: dict[str, int] = field(default_factory=dict)
    log: ProblemLog | None = None


def parse_markdown(
    text: str, path: Path, log: ProblemLog | None = None, *, check: bool = True
) -> ParsedMarkdown:
    """Split, load and coerce an agent file's text; names are not resolved yet.

    Every independent problem is recorded in ``log`` (one is made if none is given);
    then the first error, if any, is raised, unless ``check`` is false: then
    :func:`build_definition` raises it, after recording the name problems too.
    """
    log = ProblemLog(path) if log is None else log
    fm = parse_frontmatter(text, path, log)
    try:
        parsed = _coerce(fm, path, log)
    except RecursionError:  # str() of a deeply nested value
        raise DefinitionFileError("frontmatter is nested too deeply", path=path) from None
    if check:
        log.raise_first_error()
    return parsed


_T = TypeVar("_T")


def _attempt(log: ProblemLog, read: Callable[[], _T], default: _T) -> _T:
    """``read()``, or ``default`` after recording its DefinitionFileError in ``log``."""
    try:
        return read()
    except DefinitionFileError as exc:
        log.error(exc)
        return default


def _coerce(fm: Frontmatter, path: Path, log: ProblemLog) -> ParsedMarkdown:
    data = fm.data
    values: dict[str, Any] = {
        "name": _name(fm, path),
        "description": _attempt(log, lambda: _description(fm, path, log), ""),
        "prompt": _attempt(log, lambda: _prompt(fm, path), ""),
        "model": _model(data.get("model")),
    }
    readers: dict[str, tuple[str, Callable[[], Any]]] = {
        "model_args": ("params", lambda: _model_args(fm, path)),
        "disallowedTools": ("disallowed_tools", lambda: _disallowed(fm, path, log)),
        "mcpServers": ("mcp_servers", lambda: _optional_names(fm, path, "mcpServers")),
        "permissionMode": ("permission_mode", lambda: _permission_mode(fm, path)),
        "maxTurns": ("max_requests", lambda: _max_turns(fm, path)),
        "initialPrompt": ("initial_prompt", lambda: _initial_prompt(fm, path)),
        "hooks": ("hooks", lambda: _hooks(fm, path, log)),
        "output_schema": ("output_schema", lambda: _output_schema(fm, path)),
        "output_retries": ("output_retries", lambda: fm.data["output_retries"]),
        "compact_at": ("compact_at", lambda: fm.data["compact_at"]),
    }
    for key, (target, read) in readers.items():
        if key in data:
            values[target] = _attempt(log, read, None)
    if "color" in data:
        color = _color(fm, log)
        if color is not None:
            values["color"] = color
    if "effort" in data:
        effort = _attempt(log, lambda: _effort(fm, path), None)
        params = values.get("params")
        if effort is not None and (params is None or "reasoning_effort" not in params):
            # model_args naming reasoning_effort itself is the more specific setting.
            values["params"] = {**(params or {}), "reasoning_effort": effort}
    tool_names: tuple[str, ...] | None = None
    if "tools" in data:
        empty: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        tool_names, mcp_tools = _attempt(log, lambda: _tool_entries(fm, path, log), empty)
        if mcp_tools:
            values["mcp_tools"] = mcp_tools
    skill_value = data.get("skills")
    skill_names: tuple[str, ...] = ()
    if skill_value is not None:
        skill_names = _attempt(log, lambda: _names(fm, path, "skills", skill_value), ())
    ignored = tuple(str(key) for key in data if key not in READ_KEYS)
    for key in ignored:
        if key in UNHONOURED_KEYS:
            log.warn(
                f"{key}: Claude Code's {key!r} is not honoured here "
                f"({UNHONOURED_KEYS[key]}); the agent runs without it",
                line=fm.line(key),
                field=key,
            )
    truncated = _truncated(fm)
    if "prompt" in truncated:
        log.warn(
            f"the body has {truncated['prompt']} lines; only the first {MAX_BODY_LINES} are "
            "read (followed by a note pointing at this file); shorten the body to at most "
            f"{MAX_BODY_LINES} lines to keep all of it",
            line=fm.body_line,
            field="prompt",
        )
    return ParsedMarkdown(path, fm, values, tool_names, skill_names, ignored, truncated, log)


def _truncated(fm: Frontmatter) -> dict[str, int]:
    """What :func:`_description` and :func:`_prompt` cut, with the original size."""
    truncated = {}
    description = _text(fm.data.get("description")) or ""
    if len(description) > MAX_DESCRIPTION_LENGTH:
        truncated["description"] = len(description)
    lines = len(fm.body.strip().splitlines())
    if lines > MAX_BODY_LINES:
        truncated["prompt"] = lines
    return truncated


def build_definition(
    parsed: ParsedMarkdown, tool_registry: ToolRegistry, skill_registry: SkillRegistry
) -> AgentDefinition:
    """Resolve tool and skill names through the registries and validate the definition.

    Every unknown name is recorded in the parse's log; the first error is raised.
    """
    fm, path = parsed.frontmatter, parsed.path
    log = parsed.log if parsed.log is not None else ProblemLog(path)
    if parsed.tool_names is None:
        # Every host tool but ask_user: asking a person is for agents that name it.
        tool_objects = tuple(t for t in tool_registry.values() if t.name != _ASK_USER)
    else:
        names = _claude_code_names(fm, parsed.tool_names, tool_registry, log)
        tool_objects = _resolve(fm, path, "tools", names, tool_registry, log)
    skill_objects = _resolve(fm, path, "skills", parsed.skill_names, skill_registry, log)
    log.raise_first_error()
    try:
        # Two registry keys may name one object; it is still one tool (or skill).
        return agent_definition(
            tools=tuple(dict.fromkeys(tool_objects)),
            skills=tuple(dict.fromkeys(skill_objects)),
            **parsed.fields,
        )
    except DefinitionFileError:
        raise
    except DefinitionError as exc:
        raise _field_error(exc, parsed) from None


def _field_error(exc: DefinitionError, parsed: ParsedMarkdown) -> DefinitionFileError:
    fm, path = parsed.frontmatter, parsed.path
    if not isinstance(exc, DefinitionFieldError):
        return DefinitionFileError(str(exc), path=path)
    if exc.field == "prompt":
        return DefinitionFileError(f"body (prompt): {exc.problem}", path=path, line=fm.body_line)
    key = _FIELD_KEYS.get(exc.field, exc.field)
    problem = exc.problem
    if exc.field == "name" and not _text(fm.data.get("name")):
        problem += f" (the file has no 'name', so its file name {path.stem!r} was used)"
    label = key if key == exc.field else f"{key} ({exc.field})"
    return DefinitionFileError(f"{label}: {problem}", path=path, line=fm.line(key))


def _text(value: Any) -> str | None:
    """Scalar coercion: null stays None, anything else is ``str()`` stripped."""
    return None if value is None else str(value).strip()


def _name(fm: Frontmatter, path: Path) -> str:
    # A missing or blank name falls back to the file's stem, which is stable across reads.
    return _text(fm.data.get("name")) or path.stem


def _description(fm: Frontmatter, path: Path, log: ProblemLog) -> str:
    text = _text(fm.data.get("description"))
    if not text:
        raise DefinitionFileError(
            "description is required: add 'description: <when the lead should use this "
            "agent>' to the frontmatter",
            path=path,
            line=fm.line("description") or 1,
        )
    if len(text) <= MAX_DESCRIPTION_LENGTH:
        return text
    # Strip, cut at 1024 code points, and strip what the cut leaves at
    # the end, so that the result is a description a markdown file can carry again.
    cut = text[:MAX_DESCRIPTION_LENGTH].rstrip()
    log.warn(
        f"the description has {len(text):,} characters; only the first "
        f"{MAX_DESCRIPTION_LENGTH:,} are kept, so its end was removed, which may include "
        "routing examples (such as <example> blocks) the lead's model would have used to "
        f"pick this agent; shorten it to at most {MAX_DESCRIPTION_LENGTH:,} characters",
        line=fm.line("description"),
        field="description",
    )
    return cut


def _prompt(fm: Frontmatter, path: Path) -> str:
    body = fm.body.strip()
    if not body:
        raise DefinitionFileError(
            "the body is empty: the text after the closing '---' is the agent's prompt",
            path=path,
            line=fm.body_line,
        )
    lines = body.splitlines()
    if len(lines) <= MAX_BODY_LINES:
        return body
    head = "\n".join(lines[:MAX_BODY_LINES]).strip()
    return (
        f"{head}\n\n[Instructions truncated after {MAX_BODY_LINES} lines. Read the full "
        f"agent definition at {path.resolve()} for the rest.]"
    )


def _model(value: Any) -> str:
    text = _text(value)
    if not text or text.lower() == "inherit":
        return "inherit"
    return text


def _model_args(fm: Frontmatter, path: Path) -> dict[str, Any] | None:
    value = fm.data["model_args"]
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DefinitionFileError(
            f"model_args must be a mapping of model parameters (e.g. 'temperature: 0.2'), "
            f"got {_kind(value)}",
            path=path,
            line=fm.line("model_args"),
        )
    return {str(key): item for key, item in value.items()}


def _color(fm: Frontmatter, log: ProblemLog) -> str | None:
    """The agent's colour; one that is not a known colour is a warning, not an error (it
    only changes how the views show the agent)."""
    value = fm.data["color"]
    try:
        return color_value(value)
    except DefinitionFieldError as exc:
        log.warn(
            f"color must be {exc.problem.removeprefix('expected ')}; the agent is shown "
            "without a colour",
            line=fm.line("color"),
            field="color",
        )
        return None


def _effort(fm: Frontmatter, path: Path) -> str | None:
    value = fm.data["effort"]
    if value is None:
        return None
    level = value.strip().lower() if isinstance(value, str) else None
    if level not in EFFORT_LEVELS:
        raise DefinitionFileError(
            f"effort must be one of {', '.join(EFFORT_LEVELS)}, got {_kind(value)}",
            path=path,
            line=fm.line("effort"),
        )
    return level


def _kind(value: Any) -> str:
    if value is None:
        return "an empty value (null)"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _names(fm: Frontmatter, path: Path, key: str, value: Any) -> tuple[str, ...]:
    """A name list: a comma string or a list; str()-strip, drop empties and exact
    duplicates (first kept). Any other type is an error naming the key."""
    if isinstance(value, str):
        items: list[Any] = split_names(value)
    elif isinstance(value, list):
        items = value
    else:
        hint = "; omit the key to give the agent every host tool" if key == "tools" else ""
        raise DefinitionFileError(
            f"{key} must be a list of names or a comma-separated string, got "
            f"{_kind(value)}{hint} (write [] for none)",
            path=path,
            line=fm.line(key),
        )
    names: dict[str, None] = {}  # an ordered set: linear even for huge lists
    for index, item in enumerate(items):
        if isinstance(item, dict | list):
            what = "an inline configuration" if key == "mcpServers" else _kind(item)
            raise DefinitionFileError(
                f"{key} entries must be names, got {what}; the host builds servers and "
                "tools, files only name them",
                path=path,
                line=fm.line(key, index),
            )
        name = str(item).strip()
        if name:
            names.setdefault(name)
    return tuple(names)


def split_names(text: str) -> list[str]:
    """Split a comma-separated name list on the commas outside parentheses, so that
    ``Read, Agent(a, b)`` is two entries (an unclosed parenthesis runs to the end)."""
    items: list[str] = []
    depth = start = 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char == "," and not depth:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return items


# A Claude Code permission entry: a tool name with a pattern in parentheses.
_PATTERN_ENTRY = re.compile(r"(?P<tool>[A-Za-z][A-Za-z0-9_.-]*)\s*\((?P<args>.*)\)\Z", re.DOTALL)
#: Claude Code's tools that start subagents; deputy subagents never start subagents.
SUBAGENT_TOOLS = ("Agent", "Task")


def _subagent_note(entry: str) -> str:
    return (
        f"{entry!r} lets this agent start subagents (Claude Code's Agent tool); deputy "
        "subagents never start subagents (only the lead has delegate_to_agent), so the "
        "entry has no effect beyond what already holds and was dropped"
    )


def _tool_entries(
    fm: Frontmatter, path: Path, log: ProblemLog
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``tools`` entries as (registry names, MCP names).

    ``Agent(type, ...)`` and ``Task(type)`` only narrow which subagents the agent may
    start, and deputy subagents start none: dropped with a warning. Any other
    ``Tool(pattern)`` would grant a whole tool where the file grants part of it, so it is
    an error. Malformed MCP names are errors; each problem is recorded in ``log``.
    """
    names: list[str] = []
    mcp: list[str] = []
    for name in _names(fm, path, "tools", fm.data["tools"]):
        line = _item_line(fm, "tools", name)
        pattern = _PATTERN_ENTRY.match(name)
        if pattern is not None and pattern["tool"] in SUBAGENT_TOOLS:
            log.warn(f"tools: {_subagent_note(name)}", line=line, field="tools")
        elif pattern is not None:
            tool = pattern["tool"]
            log.error(
                DefinitionFileError(
                    f"tools: {name!r} grants {tool} only for arguments matching "
                    f"{pattern['args']!r}; deputy cannot limit a tool's arguments, so "
                    f"accepting it would grant all of {tool}, more than the file asks for. "
                    f"Name the tool ({tool}) and let the host's permissions or hooks decide "
                    "what it may do, or remove the entry",
                    path=path,
                    line=line,
                ),
                "tools",
            )
        elif is_mcp_name(name):
            problem = mcp_name_problem(name)
            if problem is None:
                mcp.append(name)
            else:
                log.error(DefinitionFileError(f"tools: {problem}", path=path, line=line), "tools")
        else:
            names.append(name)
    return tuple(names), tuple(mcp)


def _claude_code_names(
    fm: Frontmatter, names: tuple[str, ...], registry: Mapping[str, Any], log: ProblemLog
) -> tuple[str, ...]:
    """``names`` with Claude Code's tool names mapped through :data:`CLAUDE_CODE_TOOLS`:
    a mapped tool the registry holds replaces the name; one it lacks is dropped with a
    warning naming both, so the agent loads without it and the reader knows what is
    missing. Other names pass through unchanged (an unknown one is an error later)."""
    kept = []
    for name in names:
        resolution = resolve_claude_tool(name, registry)
        if resolution is None:
            kept.append(name)
        elif resolution.status is ClaudeToolStatus.HONOURED:
            kept.append(resolution.deputy_name)
        else:
            line = _item_line(fm, "tools", name)
            log.warn(f"tools: {_dropped_note(resolution)}", line=line, field="tools")
    return tuple(kept)


def _dropped_note(resolution: ClaudeToolResolution) -> str:
    if resolution.claude_name in SUBAGENT_TOOLS:
        return _subagent_note(resolution.claude_name)
    return (
        f"{resolution.claude_name!r} is Claude Code's {resolution.claude_name} tool, which "
        f"maps to deputy's {resolution.deputy_name!r}; this host has no "
        f"{resolution.deputy_name!r} tool, so {resolution.claude_name} was dropped and the "
        "agent runs without it (a plugin can register the tool)"
    )


def _disallowed(fm: Frontmatter, path: Path, log: ProblemLog) -> tuple[str, ...] | None:
    """``disallowedTools``; a ``Tool(pattern)`` entry disallows the whole tool (narrower
    than the pattern asks, never wider), with a warning."""
    names = _optional_names(fm, path, "disallowedTools")
    if names is None:
        return None
    result: dict[str, None] = {}
    for name in names:
        pattern = _PATTERN_ENTRY.match(name)
        if pattern is not None:
            tool = pattern["tool"]
            log.warn(
                f"disallowedTools: {name!r} denies {tool} only for arguments matching "
                f"{pattern['args']!r}; deputy cannot match a tool's arguments, so all of "
                f"{tool} is disallowed (narrower than the file asks); write {tool!r} to "
                "silence this warning",
                line=_item_line(fm, "disallowedTools", name),
                field="disallowedTools",
            )
            name = tool
        result.setdefault(name)
        # Claude Code's name also denies the deputy tool it maps to: a deny list only
        # ever widens, so the literal name stays denied as well.
        mapped = CLAUDE_CODE_TOOLS.get(name)
        if mapped is not None:
            result.setdefault(mapped)
    return tuple(result)


def _optional_names(fm: Frontmatter, path: Path, key: str) -> tuple[str, ...] | None:
    value = fm.data[key]
    return None if value is None else _names(fm, path, key, value)


def _permission_mode(fm: Frontmatter, path: Path) -> str | None:
    value = fm.data["permissionMode"]
    if value is None:
        return None
    mode = PERMISSION_MODE_NAMES.get(str(value).strip()) if isinstance(value, str) else None
    if mode is None:
        known = ", ".join(PERMISSION_MODE_NAMES)
        raise DefinitionFileError(
            f"permissionMode {value!r} has no deputy equivalent; use one of {known}",
            path=path,
            line=fm.line("permissionMode"),
        )
    return mode


def _max_turns(fm: Frontmatter, path: Path) -> int | None:
    value = fm.data["maxTurns"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionFileError(
            f"maxTurns must be a whole number of model requests, got {_kind(value)}",
            path=path,
            line=fm.line("maxTurns"),
        )
    return value


def _hooks(fm: Frontmatter, path: Path, log: ProblemLog) -> Any:
    """The file's command hooks, checked as they will run; hooks that cannot run here (a
    ``prompt`` hook, an unknown event) are warnings."""
    from ..command_hooks import command_hooks  # it builds on the runtime, which needs us

    value = fm.data["hooks"]
    if value is None:
        return None
    line = fm.line("hooks")
    warnings: list[str] = []
    try:
        command_hooks(value, path, warnings=warnings)
    except DefinitionFileError as exc:
        raise DefinitionFileError(f"hooks: {exc.reason}", path=path, line=line) from None
    for warning in warnings:
        log.warn(warning.split(": warning: ", 1)[-1], line=line, field="hooks")
    return value


def _output_schema(fm: Frontmatter, path: Path) -> Any:
    """The file's output schema, checked here so its problem is reported with the file's
    others (the definition checks it again, as it checks every field)."""
    value = fm.data["output_schema"]
    try:
        output_schema_value(value)
    except SchemaProblem as exc:
        raise DefinitionFileError(
            f"output_schema: {exc.problem}", path=path, line=fm.line("output_schema")
        ) from None
    return value


def _initial_prompt(fm: Frontmatter, path: Path) -> str | None:
    value = fm.data["initialPrompt"]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        raise DefinitionFileError(
            f"initialPrompt must be text, got {_kind(value)}",
            path=path,
            line=fm.line("initialPrompt"),
        )
    return str(value)


def _resolve(
    fm: Frontmatter,
    path: Path,
    key: str,
    names: tuple[str, ...],
    registry: Mapping[str, Any],
    log: ProblemLog,
) -> tuple[Any, ...]:
    """The registry objects for ``names``; every malformed name is an error, and all the
    unknown ones are one error listing them (at the first one's line)."""
    objects = []
    unknown: list[str] = []
    for name in names:
        if not REGISTRY_KEY_PATTERN.match(name):
            log.error(
                DefinitionFileError(
                    f"{key}: {name!r} is not a registry name; names are a letter followed by "
                    "letters, digits, '_', '.' or '-'",
                    path=path,
                    line=_item_line(fm, key, name),
                ),
                key,
            )
        elif name not in registry:
            unknown.append(name)
        else:
            objects.append(registry[name])
    if unknown:
        known = ", ".join(sorted(registry)) or f"none (the {key} registry is empty)"
        what = (
            f"{key[:-1]} {unknown[0]!r}"
            if len(unknown) == 1
            else f"{key} " + ", ".join(repr(name) for name in unknown)
        )
        log.error(
            DefinitionFileError(
                f"unknown {what} in {key}; known names (case-sensitive): {known}",
                path=path,
                line=_item_line(fm, key, unknown[0]),
            ),
            key,
        )
    return tuple(objects)


def _item_line(fm: Frontmatter, key: str, name: str) -> int | None:
    value = fm.data.get(key)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if str(item).strip() == name:
                return fm.line(key, index)
    return fm.line(key)


def agent_definition_from_markdown(
    path: str | os.PathLike[str],
    tools: Mapping[str, Any] | None = None,
    skills: Mapping[str, Any] | None = None,
    *,
    on_warning: WarningCallback | None = None,
) -> AgentDefinition:
    """Read a markdown agent file (YAML frontmatter + prompt body) into an AgentDefinition.

    The file names registry keys, never code or paths. Without a ``tools`` key the agent
    gets every tool in ``tools`` (the host decides what "inherit" offers); ``tools: []``
    gives none. ``disallowedTools`` is kept on the definition and removes tools whenever the
    agent is built. MCP tool names (``mcp__server__tool``) go to ``mcp_tools``.

    What the file gets away with (an unquoted ``: `` in a value, ``Agent(...)`` entries in
    ``tools``, a description cut at 1024 characters, ...) is reported as
    :class:`DefinitionProblem` warnings. Warnings are only delivered for a file that loads.

    Args:
        path: The ``.md`` file.
        tools: The host's tool registry, registry key -> Tool.
        skills: The host's skill registry, registry key -> Skill or approved skill path.
        on_warning: Called with each warning; without it each is issued as a Python
            warning of category :class:`DefinitionWarning`.

    Returns:
        The definition the file describes.

    Raises:
        DefinitionFileError: The first thing wrong with the file (with path and, where
            known, line), including a file without frontmatter or a name missing from a
            registry.
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
