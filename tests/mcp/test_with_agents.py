"""MCP tools inside the runtime: a subagent's MCP calls pass the lead's ceiling and hooks
exactly like built-in tools (the tools are plain Tools; nothing MCP-specific is needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import (
    HookInput,
    Hooks,
    LeadAgent,
    PermissionMode,
    Permissions,
    agent_definition,
    chat,
)
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.runtime import HookEvent
from tests.mcp._mcp_helpers import stdio_server

pytestmark = pytest.mark.anyio


def results(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


async def test_a_subagents_mcp_calls_meet_the_ceiling_and_the_leads_hooks(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    seen: list[tuple[str | None, str | None]] = []
    hooks = Hooks()

    def observe(i: HookInput) -> None:
        seen.append((i.agent_name, i.tool_name))

    hooks.add(HookEvent.PreToolUse, observe)
    scribe_results: list[ContentToolResult] = []

    def scribe(request: ModelRequest) -> Any:
        got = results(request)
        if not got:
            return tool_calls(
                ("mcp__writer__wipe", {}), ("mcp__writer__append", {"text": "new line"})
            )
        scribe_results.extend(got)
        return reply("done")

    def lead(request: ModelRequest) -> Any:
        if not results(request):
            return tool_call("delegate_to_agent", {"agent_name": "scribe", "task": "write"})
        return reply("delegated")

    async with stdio_server("writer", env={"NOTES_FILE": str(notes)}).session() as session:
        definition = agent_definition(
            "scribe", "Writes notes.", "Write.", tools=session.tools(), max_requests=3
        )
        agent = LeadAgent(
            chat("scripted", script={"lead": lead, "scribe": scribe}),
            [definition],
            permissions=Permissions(mode=PermissionMode.STANDARD),
            hooks=hooks,
            working_dir=tmp_path,
        )
        result = await agent.run("Take a note")
    assert result.response == "delegated"
    wipe, append = scribe_results
    # Destructive (destructiveHint) is refused in standard mode; the write is allowed.
    assert wipe.error is not None
    assert "is destructive" in wipe.error
    assert append.error is None
    assert notes.read_text() == "keep me\nnew line\n"
    # The lead's PreToolUse hook saw the subagent's allowed MCP call.
    assert ("scribe", "mcp__writer__append") in seen
