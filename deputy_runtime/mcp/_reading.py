"""A server's resources for a model: two read-only tools, and what they show.

Rules:

* A session whose server advertises the ``resources`` capability offers
  ``mcp__<server>__list_resources`` (the resources and resource templates, as JSON) and
  ``mcp__<server>__read_resource(uri)`` (one resource's contents). Both are read-only
  and idempotent, so the readonly and plan permission modes allow them.
* Both are bounded like tool results (``_bound``): text at most the file tools' read
  cap, binary contents described by mime type and size, never pasted.
* A server tool of the same runtime name keeps the name; the reading tool is then not
  offered (the server's own tool is what its name has always meant).
* Listings follow the server's cursors for at most :data:`MAX_PAGES` pages; a longer
  listing ends with ``"truncated": true``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp.types as mcp_types

from ..tools import Tool
from ._bound import binary_line, bounded_text, bounded_value, cut_chars, decoded_size

if TYPE_CHECKING:
    from ._session import McpSession

__all__ = [
    "LIST_RESOURCES",
    "MAX_PAGES",
    "READ_RESOURCE",
    "contents_text",
    "listing_value",
    "resource_tools",
]

#: The tool names' last parts: ``mcp__<server>__list_resources``, ``...__read_resource``.
LIST_RESOURCES = "list_resources"
READ_RESOURCE = "read_resource"
#: The most pages of one listing that are fetched.
MAX_PAGES = 100
_DESCRIPTION_CHARS = 500


def _about(entry: mcp_types.Resource | mcp_types.ResourceTemplate) -> dict[str, Any]:
    out: dict[str, Any] = {"name": entry.name}
    if entry.title:
        out["title"] = entry.title
    if entry.description:
        out["description"] = cut_chars(entry.description, _DESCRIPTION_CHARS)
    if entry.mime_type:
        out["mimeType"] = entry.mime_type
    return out


def listing_value(
    resources: list[mcp_types.Resource],
    templates: list[mcp_types.ResourceTemplate],
    truncated: bool,
) -> Any:
    """The JSON value ``list_resources`` shows: resources, templates, bounded."""
    value: dict[str, Any] = {
        "resources": [
            {"uri": r.uri, **_about(r), **({"size": r.size} if r.size is not None else {})}
            for r in resources
        ],
        "templates": [{"uriTemplate": t.uri_template, **_about(t)} for t in templates],
    }
    if truncated:
        value["truncated"] = True
    return bounded_value(value)


def contents_text(result: mcp_types.ReadResourceResult) -> str:
    """A read's contents as one text: text as it is, binary described, bounded."""
    parts: list[str] = []
    many = len(result.contents) > 1
    for item in result.contents:
        if isinstance(item, mcp_types.TextResourceContents):
            head = f"[resource {item.uri}{f' {item.mime_type}' if item.mime_type else ''}]\n"
            parts.append(head + item.text if many else item.text)
        else:
            parts.append(binary_line("resource", item.mime_type, decoded_size(item.blob), item.uri))
    return bounded_text("\n".join(parts))


def resource_tools(session: McpSession, taken: set[str]) -> tuple[Tool, ...]:
    """The list and read tools of ``session``, leaving out names in ``taken``."""
    prefix = session.server.tool_prefix

    async def list_resources() -> Any:
        return await session.list_resources()

    async def read_resource(uri: str) -> str:
        return await session.read_resource(uri)

    tools = (
        Tool(
            name=prefix + LIST_RESOURCES,
            description=(
                f"List the resources of MCP server {session.name!r} (uri, name, mime type, "
                f"size) and its resource templates; read one with {prefix + READ_RESOURCE}."
            ),
            parameters={"type": "object", "properties": {}, "additionalProperties": False},
            function=list_resources,
            read_only=True,
            idempotent=True,
        ),
        Tool(
            name=prefix + READ_RESOURCE,
            description=(
                f"Read one resource of MCP server {session.name!r} by its uri (from "
                f"{prefix + LIST_RESOURCES}, a resource link, or a template filled in). "
                "Text is shown; binary contents are described, not shown."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "minLength": 1, "description": "The uri."}
                },
                "required": ["uri"],
                "additionalProperties": False,
            },
            function=read_resource,
            read_only=True,
            idempotent=True,
        ),
    )
    return tuple(tool for tool in tools if tool.name not in taken)
