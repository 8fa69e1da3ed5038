"""Resources a model can list and read, and prompts a host can render, over stdio.

The probe server advertises resources (text, binary, over the cap, a template) and a
prompt; ``tiny`` advertises neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import (
    LeadAgent,
    PermissionMode,
    Permissions,
    agent_definition,
    chat,
)
from deputy_runtime.chat import (
    ContentText,
    ContentToolResult,
    ModelRequest,
    reply,
    tool_call,
    tool_calls,
)
from deputy_runtime.errors import McpError, McpToolError
from deputy_runtime.mcp import McpPrompt, McpPromptArgument, McpResource
from deputy_runtime.runtime import DelegationPolicy
from deputy_runtime.tools import FileToolLimits
from tests.mcp._mcp_helpers import stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CAP = FileToolLimits().read_bytes
LIST = "mcp__probe__list_resources"
READ = "mcp__probe__read_resource"


async def test_resources_are_listed_and_read_text_shown_binary_described() -> None:
    async with stdio_server("probe").session() as session:
        assert session.supports_resources
        tools = {t.name: t for t in session.resource_tools()}
        assert sorted(tools) == [LIST, READ]
        assert all(t.read_only and not t.destructive for t in tools.values())

        listing = await tools[LIST].function()
        assert {r["uri"]: r.get("title") for r in listing["resources"]} == {
            "probe://notes/readme": "Read me",
            "probe://images/logo": None,
            "probe://notes/big": None,
        }
        assert listing["templates"] == [
            {"uriTemplate": "probe://books/{title}", "name": "book", "mimeType": "application/json"}
        ]

        read = tools[READ].function
        assert await read(uri="probe://notes/readme") == "# Probe\n\nRead me, I am text."
        logo = await read(uri="probe://images/logo")
        assert logo.startswith("[resource probe://images/logo image/png, ")
        assert logo.endswith(" bytes, not shown]")
        big = await read(uri="probe://notes/big")
        assert big.startswith("z" * CAP + "\n[result cut: ")
        assert await read(uri="probe://books/dune") == '{"title": "dune", "year": 1965}'
        with pytest.raises(McpToolError, match="refused resources/read"):
            await read(uri="probe://nowhere")


async def test_a_resource_link_says_which_tool_reads_it() -> None:
    async with stdio_server("probe").session() as session:
        linked = {t.name: t for t in session.tools()}["mcp__probe__linked"]
        text = await linked.function()
    assert text == (
        "see the readme\n[resource link probe://notes/readme (readme, text/markdown, 27 bytes); "
        f"read it with {READ}(uri='probe://notes/readme')]"
    )


async def test_a_server_without_resources_offers_no_reading_tools() -> None:
    async with stdio_server("tiny").session() as session:
        assert not session.supports_resources
        assert not session.supports_prompts
        assert session.resource_tools() == ()


def results(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


def lead_script(request: ModelRequest) -> Any:
    if not results(request):
        return tool_calls(("delegate_to_agent", {"agent_name": "worker", "task": "read"}))
    return reply("delegated")


@pytest.mark.parametrize("mode", [PermissionMode.READONLY, PermissionMode.PLAN])
async def test_reading_tools_pass_a_readonly_ceiling(mode: PermissionMode, tmp_path: Path) -> None:
    seen: list[ContentToolResult] = []

    def worker(request: ModelRequest) -> Any:
        got = results(request)
        if not got:
            return tool_call(READ, {"uri": "probe://notes/readme"})
        seen.extend(got)
        return reply("done")

    definition = agent_definition(
        "worker", "Reads.", "Read.", mcp_servers=("probe",), max_requests=3
    )
    lead = LeadAgent(
        chat("scripted", script={"lead": lead_script, "worker": worker}),
        [definition],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(stdio_server("probe")),)),
        permissions=Permissions(mode=mode),
        working_dir=tmp_path,
    )
    async with lead:
        await lead.run("go")
    assert [(r.error, r.value) for r in seen] == [(None, "# Probe\n\nRead me, I am text.")]


async def test_prompts_are_listed_rendered_and_their_arguments_checked() -> None:
    async with stdio_server("probe").session() as session:
        assert session.supports_prompts
        assert await session.list_prompts() == (
            McpPrompt(
                name="summarize",
                title="Summarise a topic",
                description="Ask for a summary.",
                arguments=(
                    McpPromptArgument(name="topic", required=True),
                    McpPromptArgument(name="style"),
                ),
            ),
        )
        text = await session.get_prompt("summarize", {"topic": "dune", "style": "terse"})
        assert text == "Summarise dune in a terse style."
        with pytest.raises(McpError, match=r"missing required argument\(s\): topic"):
            await session.get_prompt("summarize")
        with pytest.raises(McpError, match=r"unknown argument 'tone' \(it takes: style, topic\)"):
            await session.get_prompt("summarize", {"topic": "x", "tone": "y"})
        with pytest.raises(McpError, match="argument 'topic' must be a string, got int"):
            await session.get_prompt("summarize", {"topic": 3})  # type: ignore[dict-item]
        with pytest.raises(McpError, match="has no prompt 'nope'; its prompts: summarize"):
            await session.get_prompt("nope")


async def test_a_rendered_prompt_is_a_definitions_initial_prompt() -> None:
    async with stdio_server("probe").session() as session:
        initial = await session.get_prompt("summarize", {"topic": "dune"})
    firsts: list[str] = []

    def worker(request: ModelRequest) -> Any:
        first = request.turns[0].contents[0]
        assert isinstance(first, ContentText)
        firsts.append(first.text)
        return reply("done")

    definition = agent_definition("worker", "Sums up.", "Sum up.").replace(initial_prompt=initial)
    lead = LeadAgent(chat("scripted", script={"lead": lead_script, "worker": worker}), [definition])
    await lead.run("go")
    assert len(firsts) == 1
    assert '"definition_initial_prompt":"Summarise dune in a plain style."' in firsts[0]
