"""A cost limit that cannot see the cost says so: one warning event per run."""

from __future__ import annotations

from typing import Any

import pytest

from deputy_runtime import Agent, Chat, UsageLimits, tool
from deputy_runtime.chat import ScriptedProvider, reply, tool_call
from deputy_runtime.chat._types import Usage
from deputy_runtime.runtime import Event, WarningEvent

pytestmark = pytest.mark.anyio


@tool(read_only=True)
def ping() -> str:
    """Answer pong."""
    return "pong"


async def warnings_of(script: list[Any], limits: UsageLimits) -> list[str]:
    agent = Agent(Chat(ScriptedProvider(script)), tools=[ping], usage_limits=limits)
    events: list[Event] = []
    result = await agent.run("go", on_event=events.append)
    assert result.stop_reason == "complete"
    return [e.message for e in events if isinstance(e, WarningEvent)]


async def test_unreported_cost_under_a_cost_limit_warns_once() -> None:
    messages = await warnings_of(
        [tool_call("ping", {}), tool_call("ping", {}), reply("done")],
        UsageLimits(max_cost_usd=1.0),
    )
    assert len(messages) == 1
    assert "max_cost_usd is set, but provider 'scripted'" in messages[0]
    assert "counts only reported costs" in messages[0]


@pytest.mark.parametrize(
    ("usage", "limits"),
    [
        (Usage(requests=1, input_tokens=1, cost_usd=0.01), UsageLimits(max_cost_usd=1.0)),
        (Usage(requests=1, input_tokens=1), UsageLimits()),
    ],
)
async def test_no_warning_when_costs_are_reported_or_not_limited(
    usage: Usage, limits: UsageLimits
) -> None:
    script = [tool_call("ping", {}, usage=usage), reply("done", usage=usage)]
    assert await warnings_of(script, limits) == []
