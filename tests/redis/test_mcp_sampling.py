"""An MCP server's sampling on a lead with a shared budget: every sampling request is
drawn from the Redis ledger like the delegation's own requests.

The real redis-server of the fixture, the real probe MCP server over stdio and a real
LeadAgent on the scripted provider; nothing is mocked.
"""

from __future__ import annotations

from typing import Any

import pytest

from deputy_runtime import DelegationPolicy, LeadAgent, StopReason, agent_definition, chat
from deputy_runtime.chat import ModelRequest, reply, tool_call
from deputy_runtime.mcp import McpResource
from deputy_runtime.redis import RedisBudget
from tests.mcp._mcp_helpers import stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_sampling_is_drawn_from_the_shared_ledger(redis_url: str, namespace: str) -> None:
    sampled: list[str] = []

    def worker(request: ModelRequest) -> Any:
        if not request.tools:
            sampled.append(request.turns[-1].text)
            return reply("sampled")
        if len(request.turns) == 1:
            return tool_call("mcp__probe__sample_loop", {"most": 10})
        return reply("done")

    def lead_script(request: ModelRequest) -> Any:
        if len(request.turns) == 1:
            return tool_call("delegate_to_agent", {"agent_name": "worker", "task": "go"})
        return reply("delegated")

    async with RedisBudget(redis_url, "b", {"requests": 20}, namespace=namespace) as budget:
        lead = LeadAgent(
            chat("scripted", script={"lead": lead_script, "worker": worker}),
            [
                agent_definition(
                    "worker",
                    "Works.",
                    "Work.",
                    mcp_tools=("mcp__probe__sample_loop",),
                    max_requests=4,
                )
            ],
            shared_budget=budget,
            delegation_policy=DelegationPolicy(
                resource_modes=(McpResource(stdio_server("probe"), mode="owned"),)
            ),
        )
        async with lead:
            result = await lead.run("go")
        state = await budget.state()
    (record,) = lead.list_subagents()
    assert record.stop_reason == StopReason.REQUEST_LIMIT
    assert len(sampled) == 3
    assert record.usage.requests == 4
    # The ledger counts the lead's two requests and all four of the delegation's.
    assert result.usage.requests == 6
    assert state.used.requests == 6
    assert state.reserved.requests == 0
