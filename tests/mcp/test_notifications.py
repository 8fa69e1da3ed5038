"""Progress and log notifications from a real server become events, per call and per run.

The probe's ``count`` tool reports progress for each step and logs each step (and one
long warning), so a session's events and a lead run's stream can be checked exactly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deputy_runtime import LeadAgent, agent_definition, chat
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.mcp import (
    McpEvent,
    McpLimits,
    McpLogLevel,
    McpLogMessage,
    McpProgress,
    McpResource,
    McpToolCall,
)
from deputy_runtime.runtime import (
    DelegationPolicy,
    DelegationStart,
    Event,
    McpLogEvent,
    McpProgressEvent,
    ToolEnd,
    decode_event,
    encode_event,
)
from tests.mcp._mcp_helpers import of_type, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

STEPS = [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


async def test_a_call_reports_progress_and_the_logs_sent_while_it_runs() -> None:
    events: list[McpEvent] = []
    mine: list[McpEvent] = []
    limits = McpLimits(stderr_line_chars=50)
    async with stdio_server("probe", events=events, limits=limits).session() as session:
        count = {t.name: t for t in session.tools(mine.append)}["mcp__probe__count"]
        assert await count.function(steps=3) == {"result": "counted to 3"}
    for seen in (events, mine):
        progress = of_type(seen, McpProgress)
        assert [(p.progress, p.total, p.message) for p in progress] == STEPS
        assert {(p.tool, p.mcp_tool) for p in progress} == {("mcp__probe__count", "count")}
        logs = of_type(seen, McpLogMessage)
        assert [(m.level, m.logger, m.data) for m in logs] == [
            (McpLogLevel.INFO, "counter", '{"step":1}'),
            (McpLogLevel.INFO, "counter", '{"step":2}'),
            (McpLogLevel.INFO, "counter", '{"step":3}'),
            # Bounded like a stderr line.
            (McpLogLevel.WARNING, "counter", "x" * 47 + "..."),
        ]
        # Every notification of the call comes before the call's end.
        (end,) = [i for i, e in enumerate(seen) if isinstance(e, McpToolCall)]
        assert all(seen.index(e) < end for e in (*progress, *logs))


def results(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


def lead_script(n: int) -> Any:
    def lead(request: ModelRequest) -> Any:
        if not results(request):
            return tool_calls(
                *[
                    ("delegate_to_agent", {"agent_name": "worker", "task": f"t{i}"})
                    for i in range(n)
                ]
            )
        return reply("delegated")

    return lead


def worker_script(request: ModelRequest) -> Any:
    got = results(request)
    if not got:
        return tool_call("mcp__probe__count", {"steps": 3})
    assert got[0].error is None, got[0].error
    return reply("done")


@pytest.mark.parametrize("mode", ["shared", "owned"])
async def test_progress_and_logs_reach_the_lead_stream_with_the_callers_ids(mode: str) -> None:
    run_events: list[Event] = []
    worker = agent_definition("worker", "Counts.", "Count.", mcp_servers=("probe",), max_requests=3)
    lead = LeadAgent(
        chat("scripted", script={"lead": lead_script(2), "worker": worker_script}),
        [worker],
        delegation_policy=DelegationPolicy(
            resource_modes=(McpResource(stdio_server("probe"), mode=mode),)
        ),
    )
    async with lead:
        result = await lead.run("go", on_event=run_events.append)
    assert result.response == "delegated"
    delegations = {e.delegation_id for e in run_events if isinstance(e, DelegationStart)}
    assert len(delegations) == 2
    for delegation in delegations:
        mine = [e for e in run_events if e.delegation_id == delegation]
        progress = [e for e in mine if isinstance(e, McpProgressEvent)]
        assert [(p.progress, p.total, p.message) for p in progress] == STEPS
        assert {(p.server, p.tool) for p in progress} == {("probe", "mcp__probe__count")}
        logs = [e for e in mine if isinstance(e, McpLogEvent)]
        steps = [json.loads(e.data)["step"] for e in logs if e.level == "info"]
        if mode == "owned":
            assert steps == [1, 2, 3]
        else:
            # A shared server's log messages do not say which call they are about: each
            # call in flight gets them, so a delegation sees its own and perhaps those
            # of the other call running beside it.
            assert {1, 2, 3} <= set(steps)
            assert all(steps.count(step) <= 2 for step in (1, 2, 3))
        assert {(e.level, e.logger) for e in logs} == {("info", "counter"), ("warning", "counter")}
        end = next(
            i
            for i, e in enumerate(mine)
            if isinstance(e, ToolEnd) and e.tool_name == "mcp__probe__count"
        )
        assert all(mine.index(e) < end for e in progress)
        reported: list[Event] = [*progress, *logs]
        for event in reported:
            assert decode_event(encode_event(event)) == event
