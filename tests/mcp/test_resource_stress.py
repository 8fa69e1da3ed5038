"""Owned MCP servers under stress through real delegations: 200 delegations in rounds,
random cancellations of the whole run (while servers start, while tools run) and random
server crashes.

Uses the standard-library test server (``servers/tiny.py``); each server records its pid
in a directory when it starts, so "started" is counted by the servers themselves. A round
is 25 parallel delegations (25 live servers at most).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import LeadAgent, agent_definition, chat
from deputy_runtime.chat import ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.mcp import McpEvent, McpLimits, McpResource, McpServerStopped
from deputy_runtime.runtime import (
    DelegationPolicy,
    Event,
    McpServerEvent,
    ToolEnd,
    ToolStart,
    UsageLimits,
)
from deputy_runtime.tools import tool
from tests.mcp._mcp_helpers import of_type, process_left, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROUNDS = 8
PER_ROUND = 25
PLANS = ("call", "call", "crash", "hang")


@tool(read_only=True)
async def hang() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return "never"


def worker(request: ModelRequest) -> Any:
    """Plan from the task: whoami first; then crash the server, hang, or finish."""
    brief = request.turns[0].text
    plan = next((p for p in PLANS if f"{p}:" in brief), "call")
    step = sum(1 for t in request.turns if t.role == "assistant")
    if step == 0:
        return tool_call("mcp__tiny__whoami", {})
    if step == 1 and plan == "crash":
        return tool_call("mcp__tiny__crash", {})
    if step == 1 and plan == "hang":
        return tool_call("hang", {})
    return reply("done")


async def test_owned_servers_of_200_delegations_under_cancellation_and_crashes(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261203)
    mcp_events: list[McpEvent] = []
    run_events: list[Event] = []
    server = stdio_server(
        "tiny",
        env={"PID_DIR": str(tmp_path)},
        limits=McpLimits(start_timeout=60, close_grace=1, terminate_grace=1),
        events=mcp_events,
    )
    plans: list[str] = []

    issued: list[int] = []

    def lead_script(request: ModelRequest) -> Any:
        # One batch per round; a cancelled round's history must not stop the next one.
        if len(issued) * PER_ROUND < len(plans):
            issued.append(len(plans))
            batch = plans[-PER_ROUND:]
            calls = [
                ("delegate_to_agent", {"agent_name": "worker", "task": f"{plan}:{i}"})
                for i, plan in enumerate(batch)
            ]
            return tool_calls(*calls)
        return reply("round done")

    definition = agent_definition(
        "worker",
        "Works.",
        "Work.",
        tools=(hang,),
        mcp_tools=("mcp__tiny__whoami", "mcp__tiny__crash"),
        max_requests=4,
    )
    lead = LeadAgent(
        chat("scripted", script={"lead": lead_script, "worker": worker}),
        [definition],
        usage_limits=UsageLimits(max_requests=None),
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(server, mode="owned"),)),
    )
    cancelled_rounds = 0
    with anyio.fail_after(300):
        async with lead:
            for _ in range(ROUNDS):
                plans.extend(rng.choice(PLANS) for _ in range(PER_ROUND))
                hanging = plans[-PER_ROUND:].count("hang")
                # Cancel the run after a random number of server starts, or once every
                # delegation has either settled or is hanging.
                cut = rng.randint(1, PER_ROUND) if rng.random() < 0.5 else None
                state = {"started": 0, "hung": 0, "ended": 0}
                go = anyio.Event()

                def watch(
                    event: Event,
                    state: dict[str, int] = state,
                    go: anyio.Event = go,
                    cut: int | None = cut,
                    hanging: int = hanging,
                ) -> None:
                    run_events.append(event)
                    if isinstance(event, McpServerEvent) and event.action == "start":
                        state["started"] += 1
                    elif isinstance(event, ToolStart) and event.tool_name == "hang":
                        state["hung"] += 1
                    elif type(event).__name__ == "DelegationEnd":
                        state["ended"] += 1
                    if (cut is not None and state["started"] >= cut) or (
                        hanging and state["hung"] + state["ended"] >= PER_ROUND
                    ):
                        go.set()

                async with anyio.create_task_group() as tg:

                    async def cancel_when_due(
                        scope: anyio.CancelScope, go: anyio.Event = go
                    ) -> None:
                        await go.wait()
                        scope.cancel()

                    with anyio.CancelScope() as scope:
                        tg.start_soon(cancel_when_due, scope)
                        await lead.run("round", on_event=watch)
                    tg.cancel_scope.cancel()
                if scope.cancelled_caught:
                    cancelled_rounds += 1

    recorded = {int(p.name) for p in tmp_path.iterdir()}
    stops = of_type(mcp_events, McpServerStopped)
    spawned = {e.pid for e in stops if e.pid is not None}
    # Every server that started was stopped by its delegation, and none is left.
    assert recorded <= spawned
    assert len(spawned) == sum(1 for e in stops if e.pid is not None)
    assert [pid for pid in spawned if process_left(pid)] == []
    # Each delegation's whoami answered from the server started for that delegation.
    started_by: dict[str | None, int | None] = {
        e.delegation_id: e.pid
        for e in run_events
        if isinstance(e, McpServerEvent) and e.action == "start"
    }
    answers = [
        e
        for e in run_events
        if isinstance(e, ToolEnd) and e.tool_name == "mcp__tiny__whoami" and e.error is None
    ]
    assert len(answers) > ROUNDS * PER_ROUND // 4
    for e in answers:
        assert e.result_preview is not None
        assert json.loads(e.result_preview)["pid"] == started_by[e.delegation_id]
    crashed = [
        e for e in run_events if isinstance(e, ToolEnd) and e.tool_name == "mcp__tiny__crash"
    ]
    assert crashed
    assert all(e.error is not None for e in crashed)
    assert cancelled_rounds > 0
