"""A server's prompts for the host: listed as values, rendered as one text.

Rules:

* :class:`McpPrompt` is what ``prompts/list`` says about one prompt, for a host choosing
  one (a definition's ``initial_prompt``, say).
* Arguments are checked before ``prompts/get`` is sent: a mapping of the prompt's
  argument names to strings (MCP prompt arguments are strings), every required one
  given, no unknown one; an error names the argument.
* A rendered prompt is its messages' text: a prompt of user messages only is their
  texts joined by blank lines; when any message is the assistant's, each message starts
  with ``[user]`` or ``[assistant]`` on a line of its own. Non-text content is described
  as in tool results (binary never pasted); the whole is bounded like a tool result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp.types as mcp_types
import msgspec

from ..errors import McpError
from ._bound import bounded_text
from ._convert import block_text

__all__ = ["McpPrompt", "McpPromptArgument", "check_arguments", "prompt_value", "render"]


class McpPromptArgument(msgspec.Struct, frozen=True):
    """One argument a prompt takes (its value is a string)."""

    name: str
    description: str | None = None
    required: bool = False


class McpPrompt(msgspec.Struct, frozen=True):
    """One prompt a server offers: ``name`` (what :meth:`McpSession.get_prompt` takes),
    ``title`` and ``description`` for people, and its ``arguments``."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


def prompt_value(listed: mcp_types.Prompt) -> McpPrompt:
    """The :class:`McpPrompt` for one listed prompt."""
    return McpPrompt(
        name=listed.name,
        title=listed.title,
        description=listed.description,
        arguments=tuple(
            McpPromptArgument(name=a.name, description=a.description, required=a.required is True)
            for a in listed.arguments or ()
        ),
    )


def check_arguments(
    server: str, prompt: McpPrompt, arguments: Mapping[str, Any] | None
) -> dict[str, str]:
    """``arguments`` as ``prompts/get`` sends them, or :class:`McpError` naming the problem."""
    where = f"MCP prompt {prompt.name!r} of server {server!r}"
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise McpError(
            f"{where}: arguments must be a mapping of names to strings, got "
            f"{type(arguments).__name__}",
            server=server,
        )
    known = {a.name for a in prompt.arguments}
    for name, value in arguments.items():
        if name not in known:
            takes = ", ".join(sorted(known)) or "none"
            raise McpError(f"{where}: unknown argument {name!r} (it takes: {takes})", server=server)
        if not isinstance(value, str):
            raise McpError(
                f"{where}: argument {name!r} must be a string, got {type(value).__name__}",
                server=server,
            )
    missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
    if missing:
        raise McpError(
            f"{where}: missing required argument(s): {', '.join(missing)}", server=server
        )
    return dict(arguments)


def render(result: mcp_types.GetPromptResult) -> str:
    """The rendered prompt as one text (see the module rules)."""
    labelled = any(m.role != "user" for m in result.messages)
    parts = []
    for message in result.messages:
        text = block_text(message.content)
        parts.append(f"[{message.role}]\n{text}" if labelled else text)
    return bounded_text("\n\n".join(parts))
