"""The JSON Schema of definition file format versions 1 and 2, for editors and linters.

The schema describes the file's shape (fields, types, name and key patterns); the reader
stays the authority, since it also checks what a schema cannot (registry membership,
duplicate keys, YAML tags, the 1 MiB limit).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from .._outputschema import MAX_OUTPUT_RETRIES
from ._model import MAX_REQUESTS_LIMIT, PERMISSION_MODES

__all__ = ["AGENT_DEFINITION_SCHEMA", "agent_definition_schema"]

_TEXT: Final = {"type": "string", "pattern": r"\S"}
_KEY: Final = {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9_.-]*$"}
# A registry key, or an MCP tool name with its one accepted wildcard (mcp__server__*).
_TOOL: Final = {
    "type": "string",
    "pattern": r"^(?:[A-Za-z][A-Za-z0-9_.-]*|mcp__[A-Za-z0-9][A-Za-z0-9_.-]*__\*)$",
}


def _references(what: str, key: dict[str, Any] = _KEY) -> dict[str, Any]:
    mcp = "; MCP tool names (mcp__server__tool, mcp__server) too" if key is _TOOL else ""
    return {
        "description": f"{what} registry keys (case-sensitive){mcp}; one string is shorthand "
        "for a one-element list",
        "anyOf": [key, {"type": "array", "items": key, "uniqueItems": True}],
    }


def _strings(what: str) -> dict[str, Any]:
    return {
        "description": f"{what}; null and [] are different",
        "anyOf": [{"type": "null"}, _TEXT, {"type": "array", "items": _TEXT}],
    }


def _nullable(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "anyOf": [{"type": "null"}, schema]}


#: JSON Schema (draft 2020-12) of an AgentDefinition YAML file, format versions 1 and 2
#: (2 adds ``output_schema``, ``output_retries`` and ``compact_at``; the reader checks the
#: output schema's keywords itself).
AGENT_DEFINITION_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "deputy_runtime AgentDefinition file (format versions 1 and 2)",
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "name", "description", "prompt"],
    "properties": {
        "version": {
            "description": (
                "Format version: 1, or 2 for a definition with an output_schema or compact_at"
            ),
            "type": "integer",
            "enum": [1, 2],
        },
        "name": {
            "description": "Routing name; trimmed and lowercased when read",
            "type": "string",
            "pattern": r"^\s*[A-Za-z][A-Za-z0-9_-]*\s*$",
        },
        "description": {**_TEXT, "description": "What the subagent does, for the lead's model"},
        "prompt": {**_TEXT, "description": "The subagent's system prompt"},
        "tools": _references("Tool", _TOOL),
        "model": {**_TEXT, "description": "'inherit', a model id, or 'provider/model'"},
        "skills": _references("Skill"),
        "disallowed_tools": _strings("Tool names removed from the subagent (case ignored)"),
        "memory": _strings("Notes appended to the system prompt under '# Memory'"),
        "mcp_servers": _strings("Names of MCP servers the subagent needs"),
        "initial_prompt": _nullable(_TEXT, "Text sent ahead of every delegated task"),
        "max_requests": _nullable(
            {"type": "integer", "minimum": 0, "maximum": MAX_REQUESTS_LIMIT},
            "Most model requests per delegation",
        ),
        "permission_mode": _nullable(
            {"enum": list(PERMISSION_MODES)}, "Requested mode; null inherits the lead's"
        ),
        "params": _nullable(
            {"type": "object", "propertyNames": {"minLength": 1}},
            "Model parameters such as temperature and max_tokens",
        ),
        "output_schema": _nullable(
            {"type": "object"},
            "Format 2: the JSON Schema (a supported subset) the final answer must match",
        ),
        "output_retries": _nullable(
            {"type": "integer", "minimum": 0, "maximum": MAX_OUTPUT_RETRIES},
            "Format 2: mismatching answers sent back with the error (null: 2)",
        ),
        "compact_at": _nullable(
            {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "Format 2: fraction of the context window at which the conversation is "
            "compacted (null: the lead's threshold)",
        ),
    },
    # A format-1 file never holds the format-2 fields.
    "if": {"properties": {"version": {"const": 1}}},
    "then": {
        "not": {
            "anyOf": [
                {"required": ["output_schema"]},
                {"required": ["output_retries"]},
                {"required": ["compact_at"]},
            ]
        }
    },
}


def agent_definition_schema() -> dict[str, Any]:
    """The JSON Schema of definition format versions 1 and 2, for editors and validators.

    Returns:
        A fresh copy of :data:`AGENT_DEFINITION_SCHEMA` (safe to modify).
    """
    return copy.deepcopy(AGENT_DEFINITION_SCHEMA)
