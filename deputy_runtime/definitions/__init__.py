"""Agent definitions: the AgentDefinition value and its YAML and markdown files."""

from ._discovery import DefinitionCollection, agent_definitions, collect_agent_definitions
from ._format import agent_definition_read, agent_definition_write
from ._markdown import (
    agent_definition_from_markdown,
    agent_definition_to_markdown,
    claude_agent_definitions,
)
from ._mcp import McpToolName, missing_mcp_server_message, split_tool_names
from ._model import AgentDefinition, agent_definition
from ._problems import DefinitionProblem, DefinitionWarning, Severity
from ._schema import AGENT_DEFINITION_SCHEMA, agent_definition_schema
from ._validate import ValidationReport, validate_definitions

__all__ = [
    "AGENT_DEFINITION_SCHEMA",
    "AgentDefinition",
    "DefinitionCollection",
    "DefinitionProblem",
    "DefinitionWarning",
    "McpToolName",
    "Severity",
    "ValidationReport",
    "agent_definition",
    "agent_definition_from_markdown",
    "agent_definition_read",
    "agent_definition_schema",
    "agent_definition_to_markdown",
    "agent_definition_write",
    "agent_definitions",
    "claude_agent_definitions",
    "collect_agent_definitions",
    "missing_mcp_server_message",
    "split_tool_names",
    "validate_definitions",
]
