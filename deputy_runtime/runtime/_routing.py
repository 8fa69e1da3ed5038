"""What a lead's model is told about delegation: the routing section and the delegate tool.

One definition for every path that runs a lead (in-process and durable), so the model
sees the same prompt and the same ``delegate_to_agent`` schema wherever the lead runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._permissions import DELEGATE_TOOL_NAME

__all__ = [
    "DELEGATE_DESCRIPTION",
    "ROUTING_END",
    "ROUTING_START",
    "delegate_parameters",
    "routing_section",
]

#: Markers around the generated routing section of a lead's system prompt.
ROUTING_START = "<!-- deputy-lead-routing:v1:start -->"
ROUTING_END = "<!-- deputy-lead-routing:v1:end -->"

#: The ``delegate_to_agent`` tool's description.
DELEGATE_DESCRIPTION = (
    "Delegate a task to a specialized sub-agent. The sub-agent will complete the task and "
    "return results. Several calls in one turn run in parallel."
)


def routing_section(sub_agents: Iterable[tuple[str, str]]) -> str:
    """The routing section of a lead's system prompt.

    Args:
        sub_agents: ``(name, description)`` of each sub-agent, in order.

    Returns:
        The section, between :data:`ROUTING_START` and :data:`ROUTING_END`.
    """
    blocks = [
        ROUTING_START,
        "# Available Sub-Agents",
        f"Use the `{DELEGATE_TOOL_NAME}` tool to hand a task to one of these sub-agents. "
        "Each one starts fresh and sees only the task you give it.",
    ]
    blocks += [f"## {name}\n{description}" for name, description in sub_agents]
    blocks.append(
        "Give each sub-agent a complete, self-contained task. "
        "Independent tasks can be delegated in the same turn; they run in parallel."
    )
    blocks.append(ROUTING_END)
    return "\n\n".join(blocks)


def delegate_parameters(names: tuple[str, ...]) -> dict[str, Any]:
    """The JSON Schema of the ``delegate_to_agent`` tool's arguments.

    Args:
        names: The sub-agent names, offered to the model as an enum (routing itself
            accepts any string and answers an unknown name with the list of agents).

    Returns:
        A new schema dict.
    """
    agent_name: dict[str, Any] = {
        "type": "string",
        "description": "Name of the sub-agent to delegate to",
    }
    if names:
        agent_name["enum"] = list(names)
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "agent_name": agent_name,
            "task": {
                "type": "string",
                "description": "The complete task for the sub-agent",
                "examples": ["Summarise what you find in the working directory."],
            },
            "constraints": {**strings, "description": "Rules the sub-agent must follow"},
            "deliverable": {"type": "string", "description": "What to hand back"},
            "stop_conditions": {**strings, "description": "When to stop and report"},
        },
        "required": ["agent_name", "task"],
        "additionalProperties": False,
    }
