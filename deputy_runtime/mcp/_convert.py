"""MCP values -> runtime values: tool flags, tool schemas and call results.

Annotations (MCP calls them hints) become the flags the permission modes read:

* no ``annotations`` at all: the tool writes (not read-only, not destructive). Standard
  mode allows it; readonly and plan refuse it. Assuming "destructive" here would make every
  server that annotates nothing unusable in the default mode.
* ``readOnlyHint: true``: read-only, unless ``destructiveHint`` is also true (a
  contradiction the permission check resolves as not read-only).
* annotations without ``readOnlyHint: true``: writing, and destructive unless
  ``destructiveHint`` is ``false`` (the MCP default for ``destructiveHint`` is true).

A result's ``structuredContent``, when present, is what the model sees (a JSON value);
otherwise its text blocks joined by newlines, with non-text blocks described in brackets.
Either is bounded and binary-free as ``_bound`` says. ``isError`` results become
:class:`~deputy_runtime.errors.McpToolError` carrying the text.
"""

from __future__ import annotations

from typing import Any

import mcp.types as mcp_types
import msgspec

from ..errors import ToolDefinitionError
from ..tools import inline_refs
from ._bound import binary_line, bounded_text, bounded_value, cut_chars, decoded_size

__all__ = [
    "ToolFlags",
    "block_text",
    "link_text",
    "result_text",
    "result_value",
    "tool_flags",
    "tool_schema",
]


class ToolFlags(msgspec.Struct, frozen=True):
    """The Tool flags one MCP tool's annotations give."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


def tool_flags(annotations: mcp_types.ToolAnnotations | None) -> ToolFlags:
    """``read_only``, ``destructive``, ``idempotent`` and ``open_world`` for a Tool."""
    if annotations is None:
        return ToolFlags(read_only=False, destructive=False, idempotent=False, open_world=True)
    read_only = annotations.read_only_hint is True
    destructive = annotations.destructive_hint is True or (
        not read_only and annotations.destructive_hint is None
    )
    return ToolFlags(
        read_only=read_only,
        destructive=destructive,
        idempotent=annotations.idempotent_hint is True,
        open_world=annotations.open_world_hint is not False,
    )


def tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as a tool's parameters: local ``$ref``s inlined.

    A recursive schema cannot be inlined and is passed on as the server sent it.
    """
    out = dict(schema)
    out["type"] = "object"
    if "$defs" in out:
        try:
            out = inline_refs(out)
        except ToolDefinitionError:
            return dict(schema, type="object")
    return out


def block_text(block: mcp_types.ContentBlock, read_tool: str | None = None) -> str:
    """One content block as text: binary described (mime type, size), never pasted.

    Args:
        block: The block.
        read_tool: The runtime tool that reads this server's resources, named in a
            resource link's line so the model can follow it (``None``: none offered).
    """
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return binary_line(kind, block.mime_type, decoded_size(block.data))
    if isinstance(block, mcp_types.ResourceLink):
        return link_text(block, read_tool)
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return resource.text
    return binary_line("resource", resource.mime_type, decoded_size(resource.blob), resource.uri)


def link_text(link: mcp_types.ResourceLink | mcp_types.Resource, read_tool: str | None) -> str:
    """A resource link (or a listed resource) as one line the model can act on."""
    about = [link.name]
    if link.title:
        about.append(repr(link.title))
    if link.mime_type:
        about.append(link.mime_type)
    if link.size is not None:
        about.append(f"{link.size:,} bytes")
    description = f": {cut_chars(link.description, 200)}" if link.description else ""
    how = (
        f"; read it with {read_tool}(uri={link.uri!r})"
        if read_tool is not None
        else "; no tool here reads this server's resources"
    )
    return f"[resource link {link.uri} ({', '.join(about)}){description}{how}]"


def result_text(result: mcp_types.CallToolResult, read_tool: str | None = None) -> str:
    """The result's content blocks as one text, within the result cap."""
    return bounded_text("\n".join(block_text(block, read_tool) for block in result.content))


def result_value(result: mcp_types.CallToolResult, read_tool: str | None = None) -> Any:
    """What the model sees for a successful result, within the result cap.

    The structured content (binary summarised) when the result has some, else its
    content as text.
    """
    if result.structured_content is not None:
        return bounded_value(result.structured_content)
    return result_text(result, read_tool)
