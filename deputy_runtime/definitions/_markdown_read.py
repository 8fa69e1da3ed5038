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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DefinitionError, DefinitionFileError
from ._files import check_path_argument, read_definition_text
from ._frontmatter import MAX_BODY_LINES, MAX_DESCRIPTION_LENGTH, Frontmatter, parse_frontmatter
from ._model import AgentDefinition, DefinitionFieldError, agent_definition
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
]

#: Frontmatter keys that are read; every other key (``color``, ``hooks``, ...) is ignored,
#: as Claude Code ignores keys it does not know.
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
)

#: Claude Code permission modes, and this package's own mode names, -> permission modes.
PERMISSION_MODE_NAMES = {
    "default": "standard",
    "acceptEdits": "standard",
    "plan": "plan",
    "bypassPermissions": "full",
    "standard": "standard",
    "readonly": "readonly",
    "full": "full",
}

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
    "permission_mode": "permissionMode",
    "max_requests": "maxTurns",
    "initial_prompt": "initialPrompt",
}


@dataclass(frozen=True)
class ParsedMarkdown:
    """An agent file's fields before tool and skill names are resolved (used by convert).

    ``tool_names`` is ``None`` when the file has no ``tools`` key (every registry tool).
    ``truncated`` maps ``"prompt"`` to the body's line count and ``"description"`` to its
    length when the reading rules cut them (at 1000 lines and 1024 characters).
    """

    path: Path
    frontmatter: Frontmatter
    fields: dict[str, Any]
    tool_names: tuple[str, ...] | None
    skill_names: tuple[str, ...]
    ignored_keys: tuple[str, ...] = field(default=())
    truncated: dict[str, int] = field(default_factory=dict)


def parse_markdown(text: str, path: Path) -> ParsedMarkdown:
    """Split, load and coerce an agent file's text; names are not resolved yet."""
    fm = parse_frontmatter(text, path)
    try:
        return _coerce(fm, path)
    except RecursionError:  # str() of a deeply nested value
        raise DefinitionFileError("frontmatter is nested too deeply", path=path) from None


def _coerce(fm: Frontmatter, path: Path) -> ParsedMarkdown:
    data = fm.data
    values: dict[str, Any] = {
        "name": _name(fm, path),
        "description": _description(fm, path),
        "prompt": _prompt(fm, path),
        "model": _model(data.get("model")),
    }
    if "model_args" in data:
        values["params"] = _model_args(fm, path)
    if "disallowedTools" in data:
        values["disallowed_tools"] = _optional_names(fm, path, "disallowedTools")
    if "mcpServers" in data:
        values["mcp_servers"] = _optional_names(fm, path, "mcpServers")
    if "permissionMode" in data:
        values["permission_mode"] = _permission_mode(fm, path)
    if "maxTurns" in data:
        values["max_requests"] = _max_turns(fm, path)
    if "initialPrompt" in data:
        values["initial_prompt"] = _initial_prompt(fm, path)
    tool_names = None if "tools" not in data else _names(fm, path, "tools", data["tools"])
    skill_value = data.get("skills")
    skill_names = () if skill_value is None else _names(fm, path, "skills", skill_value)
    ignored = tuple(str(key) for key in data if key not in READ_KEYS)
    return ParsedMarkdown(path, fm, values, tool_names, skill_names, ignored, _truncated(fm))


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
    """Resolve tool and skill names through the registries and validate the definition."""
    fm, path = parsed.frontmatter, parsed.path
    if parsed.tool_names is None:
        tool_objects = tuple(tool_registry.values())
    else:
        tool_objects = _resolve(fm, path, "tools", parsed.tool_names, tool_registry)
    skill_objects = _resolve(fm, path, "skills", parsed.skill_names, skill_registry)
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


def _description(fm: Frontmatter, path: Path) -> str:
    text = _text(fm.data.get("description"))
    if not text:
        raise DefinitionFileError(
            "description is required: add 'description: <when the lead should use this "
            "agent>' to the frontmatter",
            path=path,
            line=fm.line("description") or 1,
        )
    # Strip first, then cut at 1024 code points (a trailing space may survive the cut).
    return text[:MAX_DESCRIPTION_LENGTH]


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
        items: list[Any] = value.split(",")
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
    fm: Frontmatter, path: Path, key: str, names: tuple[str, ...], registry: Mapping[str, Any]
) -> tuple[Any, ...]:
    objects = []
    for name in names:
        if not REGISTRY_KEY_PATTERN.match(name):
            raise DefinitionFileError(
                f"{key}: {name!r} is not a registry name; names are a letter followed by "
                "letters, digits, '_', '.' or '-' (Claude Code permission patterns such as "
                "'Bash(git:*)' are not supported: name the tool and let the host's permissions "
                "decide what it may do)",
                path=path,
                line=_item_line(fm, key, name),
            )
        if name not in registry:
            known = ", ".join(sorted(registry)) or f"none (the {key} registry is empty)"
            raise DefinitionFileError(
                f"unknown {key[:-1]} {name!r} in {key}; known names (case-sensitive): {known}",
                path=path,
                line=_item_line(fm, key, name),
            )
        objects.append(registry[name])
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
) -> AgentDefinition:
    """Read a markdown agent file (YAML frontmatter + prompt body) into an AgentDefinition.

    The file names registry keys, never code or paths. Without a ``tools`` key the agent
    gets every tool in ``tools`` (the host decides what "inherit" offers); ``tools: []``
    gives none. ``disallowedTools`` is kept on the definition and removes tools whenever the
    agent is built.

    Args:
        path: The ``.md`` file.
        tools: The host's tool registry, registry key -> Tool.
        skills: The host's skill registry, registry key -> Skill or approved skill path.

    Returns:
        The definition the file describes.

    Raises:
        DefinitionFileError: Anything wrong with the file (with path and, where known,
            line), including a file without frontmatter or a name missing from a registry.
    """
    file = check_path_argument(path)
    tool_registry = check_tool_registry(tools, file)
    skill_registry = check_skill_registry(skills, file)
    parsed = parse_markdown(read_definition_text(file, markdown=True), file)
    return build_definition(parsed, tool_registry, skill_registry)
