"""Tool results as the MCP spec has them, against the SDK-written probe server over stdio.

Output schemas are checked, titles reach the model and the events, binary content is
summarised (never pasted as base64) and every result stays within the file tools' cap.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import msgspec
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from deputy_runtime.errors import McpToolError
from deputy_runtime.mcp import McpEvent, McpToolCall, McpToolUnavailable
from deputy_runtime.tools import FileToolLimits
from tests.mcp._mcp_helpers import SERVERS, of_type, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CAP = FileToolLimits().read_bytes


def by_name(tools: Any) -> dict[str, Any]:
    return {tool.name: tool for tool in tools}


async def raw_snapshot() -> Any:
    """The probe's ``snapshot`` result as the SDK's own client receives it."""
    params = StdioServerParameters(command=sys.executable, args=[str(SERVERS / "probe.py")])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("snapshot", {})
        return result.structured_content


async def test_structured_results_are_checked_against_the_output_schema() -> None:
    events: list[McpEvent] = []
    async with stdio_server("probe", events=events).session() as session:
        tools = by_name(session.tools())
        assert await tools["mcp__probe__lookup"].function(title="dune") == {
            "title": "dune",
            "year": 1965,
        }
        with pytest.raises(McpToolError) as caught:
            await tools["mcp__probe__bad_lookup"].function(title="dune")
        message = str(caught.value)
        assert "does not match its outputSchema" in message
        assert "structuredContent.year: expected integer, got string" in message

    calls = of_type(events, McpToolCall)
    assert [(c.mcp_tool, c.title, c.error is None) for c in calls] == [
        ("lookup", "Book lookup", True),
        ("bad_lookup", None, False),
    ]


async def test_titles_lead_the_description_and_invalid_schemas_are_not_offered() -> None:
    events: list[McpEvent] = []
    async with stdio_server("probe", events=events).session() as session:
        tools = by_name(session.tools())
        assert tools["mcp__probe__lookup"].description == (
            "Book lookup: The year a book was first published."
        )
        # No title: the description is the server's own.
        assert tools["mcp__probe__maybe_task"].description.startswith("Tasks are optional")
        assert "mcp__probe__broken_schema" not in tools
        why = session.unavailable_tools()["mcp__probe__broken_schema"]
        assert why.startswith("its outputSchema is not a valid JSON Schema: 5 is not valid")
    unavailable = of_type(events, McpToolUnavailable)
    assert ("mcp__probe__broken_schema", why) in [(e.tool, e.reason) for e in unavailable]


async def test_a_png_in_structured_content_is_summarised_not_pasted() -> None:
    raw = await raw_snapshot()
    # The shape a browser server sends: the SDK hands over the base64 as it came.
    assert len(json.dumps(raw)) > 360_000
    assert raw["screenshot"]["data"].startswith("iVBORw0KGgo")

    async with stdio_server("probe").session() as session:
        value = await by_name(session.tools())["mcp__probe__snapshot"].function()
    size = len(base64.b64decode(raw["screenshot"]["data"]))
    assert value == {
        "screenshot": {
            "data": f"[binary image/png, {size:,} bytes, not shown]",
            "mimeType": "image/png",
        },
        "width": 300,
        "height": 300,
    }
    assert len(msgspec.json.encode(value)) < 200


async def test_image_blocks_are_described_and_big_text_is_cut_to_the_file_tools_cap() -> None:
    async with stdio_server("probe").session() as session:
        tools = by_name(session.tools())
        text = await tools["mcp__probe__picture"].function()
        big = await tools["mcp__probe__big_text"].function()
    first, caption = text.split("\n")
    assert first.startswith("[image image/png, ")
    assert first.endswith(" bytes, not shown]")
    assert caption == "a 16x16 picture"
    assert "iVBOR" not in text
    # A str result is structured as {"result": ...} by the SDK server: over the cap,
    # the structured value becomes its JSON text, cut.
    body, notice = big.rsplit("\n", 1)
    head = '{"result":"'
    assert body == head + "y" * (CAP - len(head))
    total = len(head) + 300 * 1024 + 2
    assert notice == (
        f"[result cut: {CAP:,} of {total:,} bytes shown; an MCP result shows at most {CAP:,} bytes]"
    )
