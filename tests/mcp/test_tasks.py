"""Tools that declare task-augmented execution, against the probe server over stdio.

The installed SDK cannot make task-augmented calls, so a tool that requires one is not
offered (it would fail every call) and the host is told why; a tool for which tasks are
optional is called normally.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from deputy_runtime import LeadAgent, agent_definition, chat
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.mcp import McpEvent, McpResource, McpToolUnavailable
from deputy_runtime.runtime import (
    DelegationPolicy,
    DelegationStart,
    DelegationStatus,
    Event,
    WarningEvent,
)
from tests.mcp._mcp_helpers import of_type, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REASON = (
    "it requires task-augmented execution (execution.taskSupport 'required'), which the "
    f"installed MCP SDK (mcp {importlib.metadata.version('mcp')}) cannot call"
)


async def test_a_task_required_tool_is_not_offered_and_an_optional_one_runs() -> None:
    events: list[McpEvent] = []
    async with stdio_server("probe", events=events).session() as session:
        tools = {tool.name: tool for tool in session.tools()}
        assert "mcp__probe__longjob" not in tools
        assert session.unavailable_tools()["mcp__probe__longjob"] == REASON
        assert await tools["mcp__probe__maybe_task"].function() == {"result": "ran without a task"}
    unavailable = {(e.tool, e.reason) for e in of_type(events, McpToolUnavailable)}
    assert ("mcp__probe__longjob", REASON) in unavailable


def results(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


def lead_script(request: ModelRequest) -> Any:
    if not results(request):
        return tool_calls(("delegate_to_agent", {"agent_name": "worker", "task": "t"}))
    return reply("delegated")


def worker_script(seen: list[ContentToolResult]) -> Any:
    def worker(request: ModelRequest) -> Any:
        got = results(request)
        if not got:
            return tool_call("mcp__probe__maybe_task", {})
        seen.extend(got)
        return reply("done")

    return worker


def lead_for(seen: list[ContentToolResult], **grant: Any) -> LeadAgent:
    worker = agent_definition("worker", "Works.", "Work.", max_requests=3, **grant)
    return LeadAgent(
        chat("scripted", script={"lead": lead_script, "worker": worker_script(seen)}),
        [worker],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(stdio_server("probe")),)),
    )


async def test_a_subagent_given_the_server_is_warned_about_the_tool_it_does_not_get() -> None:
    run_events: list[Event] = []
    seen: list[ContentToolResult] = []
    lead = lead_for(seen, mcp_servers=("probe",))
    async with lead:
        await lead.run("go", on_event=run_events.append)
    assert [r.value for r in seen] == [{"result": "ran without a task"}]
    (start,) = [e for e in run_events if isinstance(e, DelegationStart)]
    warnings = [e for e in run_events if isinstance(e, WarningEvent)]
    assert {w.delegation_id for w in warnings} == {start.delegation_id}
    # One warning per tool not offered: this one, and the probe's invalid-schema tool.
    messages = [w.message for w in warnings]
    assert f"MCP tool 'mcp__probe__longjob' is not offered to subagent 'worker': {REASON}" in (
        messages
    )
    assert len(messages) == 2
    assert messages[0].startswith("MCP tool 'mcp__probe__broken_schema' is not offered")


async def test_naming_a_task_required_tool_fails_the_setup_saying_why() -> None:
    seen: list[ContentToolResult] = []
    lead = lead_for(seen, mcp_tools=("mcp__probe__longjob",))
    async with lead:
        await lead.run("go")
    (record,) = lead.list_subagents()
    assert record.status == DelegationStatus.FAILED
    assert record.error is not None
    assert "names 'mcp__probe__longjob', which MCP server 'probe' lists" in record.error
    assert REASON in record.error
    assert seen == []
