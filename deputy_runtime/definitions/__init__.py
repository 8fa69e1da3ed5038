"""Agent definitions: the AgentDefinition value and its YAML and markdown files."""

from ._discovery import agent_definitions
from ._format import agent_definition_read, agent_definition_write
from ._markdown import (
    agent_definition_from_markdown,
    agent_definition_to_markdown,
    claude_agent_definitions,
)
from ._model import AgentDefinition, agent_definition
from ._schema import AGENT_DEFINITION_SCHEMA, agent_definition_schema

__all__ = [
    "AGENT_DEFINITION_SCHEMA",
    "AgentDefinition",
    "agent_definition",
    "agent_definition_from_markdown",
    "agent_definition_read",
    "agent_definition_schema",
    "agent_definition_to_markdown",
    "agent_definition_write",
    "agent_definitions",
    "claude_agent_definitions",
]
