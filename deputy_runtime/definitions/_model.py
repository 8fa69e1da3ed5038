"""The AgentDefinition value: what a subagent is, validated and normalised once, at the boundary.

A definition is built fresh into a subagent on every delegation, so it is a frozen value
that can be shared freely. Tools and skills are kept by reference (a tool with state shares
that state wherever the definition is used); every other field is plain immutable data.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import msgspec

from .._modes import PERMISSION_MODES
from .._outputschema import SchemaProblem, output_retries_value, output_schema_value
from ..errors import DefinitionError
from ..skills import Skill
from ..tools import Tool
from ._mcp import mcp_name_problem

__all__ = [
    "FIELD_NAMES",
    "MAX_PARAM_INT",
    "MAX_REQUESTS_LIMIT",
    "NAME_PATTERN",
    "PERMISSION_MODES",
    "AgentDefinition",
    "DefinitionFieldError",
    "agent_definition",
    "color_value",
    "compact_at_value",
    "permission_mode_value",
]

#: A canonical agent name (after trimming and lowercasing); a plugin's agents are
#: namespaced by the plugin (``plugin:agent``).
NAME_PATTERN: Final = re.compile(r"^[a-z][a-z0-9_-]*(?::[a-z][a-z0-9_-]*)?\Z")
#: Largest ``max_requests``: the int32 maximum, so every reader of the file can hold it.
MAX_REQUESTS_LIMIT: Final = 2**31 - 1
#: Largest magnitude of an integer model parameter: 18 decimal digits, what a definition
#: file can hold (larger ints cannot be written so that they read back).
MAX_PARAM_INT: Final = 10**18 - 1
#: The fields of AgentDefinition, in order.
FIELD_NAMES: Final = (
    "name",
    "description",
    "prompt",
    "tools",
    "model",
    "skills",
    "disallowed_tools",
    "memory",
    "mcp_servers",
    "initial_prompt",
    "max_requests",
    "permission_mode",
    "params",
    "mcp_tools",
    "hooks",
    "color",
    "output_schema",
    "output_retries",
    "compact_at",
)
#: The colours an agent may be shown in (Claude Code's ``color`` values).
AGENT_COLORS: Final = (
    "red",
    "blue",
    "green",
    "yellow",
    "purple",
    "orange",
    "pink",
    "cyan",
    "magenta",
)
_MAX_PARAMS_DEPTH = 16
_UNHASHED = ("params", "hooks", "output_schema")


class DefinitionFieldError(DefinitionError):
    """A DefinitionError that knows which field failed (``field``), for file readers."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.problem = message


def _type_name(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _text(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise DefinitionFieldError(field, f"expected a non-empty string, got {_type_name(value)}")
    if not value.strip():
        raise DefinitionFieldError(field, "expected a non-empty string, got a blank one")
    return value


def _optional_text(field: str, value: object) -> str | None:
    return None if value is None else _text(field, value)


def color_value(value: object) -> str | None:
    """``value`` as a definition's colour (trimmed, lowercased); DefinitionFieldError
    when it is none of :data:`AGENT_COLORS`."""
    if value is None:
        return None
    color = value.strip().lower() if isinstance(value, str) else None
    if color not in AGENT_COLORS:
        raise DefinitionFieldError(
            "color", f"expected one of {', '.join(AGENT_COLORS)}, got {value!r}"
        )
    return color


def _name(value: object) -> str:
    if not isinstance(value, str):
        raise DefinitionFieldError("name", f"expected a string, got {_type_name(value)}")
    name = value.strip().lower()
    if not NAME_PATTERN.match(name):
        suggestion = re.sub(r"[^a-z0-9_-]+", "-", name[:200]).strip("-_")
        example = suggestion if NAME_PATTERN.match(suggestion) else "code_reviewer"
        raise DefinitionFieldError(
            "name",
            f"{value!r} is not a valid agent name; expected a letter followed by letters, "
            f"digits, '_' or '-' (e.g. {example!r}), optionally after a plugin's name and "
            "':' ('plugin:agent'); it is trimmed and lowercased first",
        )
    return name


def _sequence(field: str, value: object, item: str) -> Sequence[object]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise DefinitionFieldError(
            field,
            f"expected a list or tuple of {item}, got {_type_name(value)}"
            + ("; wrap a single value in a list" if isinstance(value, (str, Tool, Skill)) else ""),
        )
    return value


def _tools(value: object) -> tuple[Tool, ...]:
    items = _sequence("tools", value, "Tool objects")
    seen: dict[str, int] = {}
    for index, tool in enumerate(items):
        if not isinstance(tool, Tool):
            raise DefinitionFieldError(
                "tools", f"item {index} is {_type_name(tool)}, expected a Tool object"
            )
        if tool.name in seen:
            raise DefinitionFieldError(
                "tools",
                f"items {seen[tool.name]} and {index} are both named {tool.name!r}; a model "
                "cannot tell them apart, so each tool name may appear once",
            )
        seen[tool.name] = index
    return tuple(items)  # type: ignore[arg-type]  # checked above


def _skills(value: object) -> tuple[Skill | str, ...]:
    items = _sequence("skills", value, "Skill objects or skill paths")
    for index, skill in enumerate(items):
        if isinstance(skill, str):
            if not skill.strip():
                raise DefinitionFieldError(
                    "skills", f"item {index} is an empty skill path; expected a directory path"
                )
        elif not isinstance(skill, Skill):
            raise DefinitionFieldError(
                "skills",
                f"item {index} is {_type_name(skill)}, expected a Skill or a skill path string",
            )
    return tuple(items)  # type: ignore[arg-type]  # checked above


def _strings(field: str, value: object, *, lower: bool = False) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = _sequence(field, value, "strings")
    result: dict[str, None] = {}  # an ordered set: de-duplicates, keeps first occurrence
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise DefinitionFieldError(
                field, f"item {index} is {_type_name(item)}, expected a non-empty string"
            )
        text = item.strip()
        if not text:
            raise DefinitionFieldError(field, f"item {index} is blank, expected a non-empty string")
        result[text.lower() if lower else text] = None
    return tuple(result)


def _mcp_tools(value: object) -> tuple[str, ...] | None:
    names = _strings("mcp_tools", value)
    for index, name in enumerate(names or ()):
        if not name.startswith("mcp__"):
            problem: str | None = f"{name!r} is not an MCP tool name (they start with 'mcp__')"
        else:
            problem = mcp_name_problem(name)
        if problem is not None:
            raise DefinitionFieldError("mcp_tools", f"item {index}: {problem}")
    return names


def _max_requests(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        hint = " (a whole number)" if isinstance(value, float) else ""
        raise DefinitionFieldError(
            "max_requests", f"expected an int{hint} or None, got {_type_name(value)} {value!r}"
        )
    if not 0 <= value <= MAX_REQUESTS_LIMIT:
        raise DefinitionFieldError(
            "max_requests",
            f"expected a non-negative int of at most {MAX_REQUESTS_LIMIT}, got {value}",
        )
    return int(value)


def permission_mode_value(value: object) -> str | None:
    """``value`` as a definition's permission mode; DefinitionFieldError when it is none."""
    if value is None or (isinstance(value, str) and value in PERMISSION_MODES):
        return value
    raise DefinitionFieldError(
        "permission_mode",
        f"Invalid permission mode {value!r}; expected one of {', '.join(PERMISSION_MODES)}, "
        "or leave it out to inherit the lead's mode",
    )


def _freeze_param(where: str, value: object, depth: int) -> object:
    """Deep-copy a JSON-like value into read-only form (dict -> mappingproxy, list -> tuple)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_PARAM_INT:
        raise DefinitionFieldError(
            _field_of(where),
            f"{where} is an integer of more than {len(str(MAX_PARAM_INT))} digits; definition "
            "files hold plain decimal integers of at most that many digits",
        )
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DefinitionFieldError(
                _field_of(where), f"{where} is {value!r}; expected a finite number"
            )
        return value
    if depth >= _MAX_PARAMS_DEPTH:
        raise DefinitionFieldError(_field_of(where), f"{where} is nested too deeply")
    if isinstance(value, Mapping):
        return _freeze_mapping(where, value, depth + 1)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze_param(f"{where}[{i}]", v, depth + 1) for i, v in enumerate(value))
    raise DefinitionFieldError(
        _field_of(where),
        f"{where} is {_type_name(value)}; expected a JSON value (null, bool, number, string, "
        f"list or mapping){_date_hint(value)}",
    )


def _date_hint(value: object) -> str:
    # YAML turns an unquoted 2024-01-01 into a date, which is no JSON value; say how to
    # keep the text the file meant.
    if not isinstance(value, datetime.date):
        return ""
    return f"; YAML reads an unquoted {value} as a date, so quote it to keep it as text: '{value}'"


def _freeze_mapping(where: str, value: Mapping[Any, Any], depth: int) -> Mapping[str, Any]:
    frozen: dict[str, object] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise DefinitionFieldError(
                _field_of(where), f"{where} has key {key!r}; expected non-empty string keys"
            )
        frozen[key] = _freeze_param(f"{where}[{key!r}]", item, depth)
    return MappingProxyType(frozen)


def _field_of(where: str) -> str:
    """The field a nested value belongs to (``params[...]`` -> ``params``)."""
    return where.split("[", 1)[0]


def _hooks(value: object) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DefinitionFieldError(
            "hooks",
            "expected Claude Code's hooks map (event name -> list of {matcher, hooks}) or "
            f"None, got {_type_name(value)}",
        )
    return _freeze_mapping("hooks", value, 0)


def _output_schema(value: object) -> Mapping[str, Any] | type | None:
    try:
        return output_schema_value(value)
    except SchemaProblem as exc:
        raise DefinitionFieldError("output_schema", exc.problem) from None


def _output_retries(value: object, schema: object) -> int | None:
    try:
        return output_retries_value(value, schema)
    except SchemaProblem as exc:
        raise DefinitionFieldError("output_retries", exc.problem) from None


def compact_at_value(value: object) -> float | None:
    """``value`` as a definition's ``compact_at``: ``None`` or a number above 0 and at
    most 1 (ints are taken as floats); DefinitionFieldError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DefinitionFieldError(
            "compact_at",
            f"expected a fraction of the context window above 0 and at most 1 (e.g. 0.7) "
            f"or None, got {value!r}",
        )
    if not 0 < value <= 1:
        raise DefinitionFieldError(
            "compact_at",
            f"expected a fraction of the context window above 0 and at most 1 (e.g. 0.7), "
            f"got {value!r}",
        )
    return float(value)


def _params(value: object) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DefinitionFieldError(
            "params",
            f"expected a mapping of model parameters (e.g. {{'temperature': 0.2}}) or None, "
            f"got {_type_name(value)}",
        )
    return _freeze_mapping("params", value, 0)


class AgentDefinition(msgspec.Struct, frozen=True):
    """A subagent: name, description for the lead's model, system prompt, tools and limits.

    Immutable; constructing it validates and normalises every field exactly as
    :func:`agent_definition` does (names trimmed and lowercased, string lists trimmed and
    de-duplicated), raising :class:`~deputy_runtime.errors.DefinitionError` naming the
    field. ``tools`` and ``skills`` are kept by reference. ``None`` and ``()`` differ for
    ``disallowed_tools``, ``memory`` and ``mcp_servers``. ``params`` holds model parameters
    (such as ``temperature``) as a read-only mapping. ``output_schema`` (a JSON Schema
    mapping, kept read-only, or a ``msgspec.Struct`` / dataclass type) is what the
    subagent's final answer must decode to; see :func:`agent_definition`.
    ``compact_at`` is the fraction of its model's context window at which the subagent's
    conversation is compacted (over the lead's ``Compaction.threshold``). Use
    :meth:`replace` to change fields.
    """

    name: str
    description: str
    prompt: str
    tools: tuple[Tool, ...] = ()
    model: str = "inherit"
    skills: tuple[Skill | str, ...] = ()
    disallowed_tools: tuple[str, ...] | None = None
    memory: tuple[str, ...] | None = None
    mcp_servers: tuple[str, ...] | None = None
    initial_prompt: str | None = None
    max_requests: int | None = None
    permission_mode: str | None = None
    params: Mapping[str, Any] | None = None
    mcp_tools: tuple[str, ...] | None = None
    hooks: Mapping[str, Any] | None = None
    color: str | None = None
    output_schema: Mapping[str, Any] | type | None = None
    output_retries: int | None = None
    compact_at: float | None = None

    def __post_init__(self) -> None:
        values = (
            _name(self.name),
            _text("description", self.description),
            _text("prompt", self.prompt),
            _tools(self.tools),
            _text("model", self.model),
            _skills(self.skills),
            _strings("disallowed_tools", self.disallowed_tools, lower=True),
            _strings("memory", self.memory),
            _strings("mcp_servers", self.mcp_servers),
            _optional_text("initial_prompt", self.initial_prompt),
            _max_requests(self.max_requests),
            permission_mode_value(self.permission_mode),
            _params(self.params),
            _mcp_tools(self.mcp_tools),
            _hooks(self.hooks),
            color_value(self.color),
            _output_schema(self.output_schema),
            _output_retries(self.output_retries, self.output_schema),
            compact_at_value(self.compact_at),
        )
        for field, value in zip(FIELD_NAMES, values, strict=True):
            msgspec.structs.force_setattr(self, field, value)

    def replace(self, **changes: Any) -> AgentDefinition:
        """A new definition with ``changes`` applied, validated again.

        Args:
            **changes: Field names and their new values.

        Returns:
            The new definition.

        Raises:
            DefinitionError: A changed field is invalid.
        """
        unknown = sorted(set(changes) - set(FIELD_NAMES))
        if unknown:
            raise DefinitionError(
                f"replace(): unknown field(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(FIELD_NAMES)}"
            )
        return msgspec.structs.replace(self, **changes)

    def __hash__(self) -> int:
        # params, hooks and a JSON output schema are read-only mappings (unhashable);
        # equal definitions still hash equally.
        return hash(tuple(getattr(self, f) for f in FIELD_NAMES if f not in _UNHASHED))

    def __repr__(self) -> str:
        extra = f", permission_mode={self.permission_mode!r}" if self.permission_mode else ""
        return (
            f"AgentDefinition(name={self.name!r}, model={self.model!r}, "
            f"tools={len(self.tools)}, skills={len(self.skills)}{extra})"
        )


def agent_definition(
    name: str,
    description: str,
    prompt: str,
    *,
    tools: Sequence[Tool] = (),
    model: str = "inherit",
    skills: Sequence[Skill | str] = (),
    disallowed_tools: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    mcp_servers: Sequence[str] | None = None,
    initial_prompt: str | None = None,
    max_requests: int | None = None,
    permission_mode: str | None = None,
    params: Mapping[str, Any] | None = None,
    mcp_tools: Sequence[str] | None = None,
    hooks: Mapping[str, Any] | None = None,
    color: str | None = None,
    output_schema: Mapping[str, Any] | type | None = None,
    output_retries: int | None = None,
    compact_at: float | None = None,
) -> AgentDefinition:
    """Build a validated :class:`AgentDefinition` (the same as calling the class).

    Args:
        name: The routing key; trimmed, lowercased, ``^[a-z][a-z0-9_-]*$``.
        description: When the lead should use this agent (shown to the lead's model).
        prompt: The subagent's system prompt.
        tools: The tools the subagent gets.
        model: ``"inherit"`` (a fresh copy of the lead's chat), ``"provider/model"``, or a
            model id on the lead's provider.
        skills: Skills (or approved skill paths) whose instructions the subagent may load.
        disallowed_tools: Tool names removed from every tool source, skills' included.
        memory: Lines appended to the prompt under ``# Memory``.
        mcp_servers: MCP server names: every tool of each server the lead attaches (an
            ``McpResource``), or what an owned resource factory supplies.
        initial_prompt: Sent to the subagent with every brief.
        max_requests: Cap on the subagent's model requests per delegation.
        permission_mode: ``readonly``, ``plan``, ``standard`` or ``full``; ``None`` takes
            the lead's current mode.
        params: Model parameters for the subagent's requests.
        mcp_tools: MCP tool names (``mcp__server__tool``, or ``mcp__server`` for all of a
            server's tools) the subagent gets from its MCP servers.
        hooks: Claude Code command hooks for this agent's own events (the ``hooks`` of
            an agent file: event name -> ``[{matcher, hooks: [{type: command, command,
            timeout}]}]``), run as ``deputy_runtime.command_hooks`` runs them.
        color: The colour the live and web views show the agent in: ``red``, ``blue``,
            ``green``, ``yellow``, ``purple``, ``orange``, ``pink``, ``cyan`` or ``magenta``
            (the ``color`` values of Claude Code's agent files; trimmed and lowercased).
        output_schema: What the subagent's final answer must be: a JSON Schema mapping in
            the supported subset (``type``, ``properties``, ``required``, ``items``,
            ``enum``, ``const``, ``additionalProperties``, ``anyOf``, ``minimum`` /
            ``maximum`` and their exclusive forms, ``minLength`` / ``maxLength``,
            ``minItems`` / ``maxItems``; other keywords are refused), or a
            ``msgspec.Struct`` or dataclass type the answer is decoded into. The
            delegation's record then carries the decoded value (``output``).
        output_retries: How many times a final answer that does not match is sent back
            with the validation error (0 to 10; ``None``: 2). Only with ``output_schema``.
        compact_at: The fraction of the subagent's context window (above 0, at most 1)
            at which its conversation is compacted; ``None`` takes the lead's
            ``Compaction.threshold``. The lead's strategy and window still apply.

    Returns:
        The frozen definition.

    Raises:
        DefinitionError: A field is invalid; the message names the field and what was
            expected.
    """
    return AgentDefinition(
        name,
        description,
        prompt,
        tools,  # type: ignore[arg-type]  # any sequence; normalised to a tuple
        model,
        skills,  # type: ignore[arg-type]
        disallowed_tools,  # type: ignore[arg-type]
        memory,  # type: ignore[arg-type]
        mcp_servers,  # type: ignore[arg-type]
        initial_prompt,
        max_requests,
        permission_mode,
        params,
        mcp_tools,  # type: ignore[arg-type]
        hooks,
        color,
        output_schema,
        output_retries,
        compact_at,
    )
