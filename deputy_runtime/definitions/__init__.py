"""Agent definitions: the AgentDefinition value and its YAML and markdown files.

A definition says what a subagent is (name, description, prompt, tools, model, limits);
the runtime builds a fresh agent from it on every delegation. Definitions come from Python
(:func:`agent_definition`), from strict YAML files (:func:`agent_definition_read`,
:func:`agent_definitions`) or from Claude-Code-style markdown files
(:func:`agent_definition_from_markdown`, :func:`claude_agent_definitions`). Files name
tools and skills; the host's registries resolve the names, so no file ever loads code.
"""

from ._discovery import DefinitionCollection, agent_definitions, collect_agent_definitions
from ._format import agent_definition_read, agent_definition_write
from ._markdown import (
    agent_definition_from_markdown,
    agent_definition_to_markdown,
    claude_agent_definitions,
)
from ._mcp import McpToolName, missing_mcp_server_message, split_tool_names
from ._model import AgentDefinition, agent_definition
from ._plugins import PluginFolder, find_plugins
from ._problems import DefinitionProblem, DefinitionWarning, Severity
from ._schema import AGENT_DEFINITION_SCHEMA, agent_definition_schema
from ._validate import ValidationReport, validate_definitions

# isort: split
# The building blocks the package's own command line (validate, list, convert) works with.
# They are importable from here so that no module outside this package reaches into its
# private modules, but they are not in __all__: they are not public API and may change.
from ._claude_tools import CLAUDE_CODE_TOOLS as CLAUDE_CODE_TOOLS
from ._discovery import FORMAT_BY_SUFFIX as FORMAT_BY_SUFFIX
from ._discovery import candidate_names as candidate_names
from ._discovery import definition_format as definition_format
from ._files import install_atomically as install_atomically
from ._files import read_definition_text as read_definition_text
from ._format import definition_from_yaml as definition_from_yaml
from ._frontmatter import MAX_BODY_LINES as MAX_BODY_LINES
from ._frontmatter import MAX_DESCRIPTION_LENGTH as MAX_DESCRIPTION_LENGTH
from ._markdown_read import ParsedMarkdown as ParsedMarkdown
from ._markdown_read import build_definition as build_definition
from ._markdown_read import parse_markdown as parse_markdown
from ._markdown_write import markdown_text as markdown_text
from ._markdown_write import surrounding_whitespace as surrounding_whitespace
from ._markdown_write import whitespace_losses as whitespace_losses
from ._mcp import parse_mcp_name as parse_mcp_name
from ._problems import ProblemLog as ProblemLog
from ._registry import REGISTRY_KEY_PATTERN as REGISTRY_KEY_PATTERN
from ._yaml import YAMLProblem as YAMLProblem
from ._yaml import load_yaml as load_yaml

__all__ = [
    "AGENT_DEFINITION_SCHEMA",
    "AgentDefinition",
    "DefinitionCollection",
    "DefinitionProblem",
    "DefinitionWarning",
    "McpToolName",
    "PluginFolder",
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
    "find_plugins",
    "missing_mcp_server_message",
    "split_tool_names",
    "validate_definitions",
]
