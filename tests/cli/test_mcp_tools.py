"""The tools of ``mcp-serve`` in-process: results, structured content, refusals, and
each call's own shell.

The subprocess tests (``test_mcp_serve.py``) drive the whole command through the SDK's
client; these call :class:`LeadTools` directly with scripted models, to reach what the
offline test model never produces (an answer in a schema whose root is not an object, a
lead that does not delegate). Every call still runs a real lead and its delegation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from deputy_runtime import (
    AgentDefinition,
    InProcessLedger,
    LeadAgent,
    UsageLimits,
    agent_definition,
    chat,
    tool,
)
from deputy_runtime._cli.mcpserve import with_shell
from deputy_runtime._cli.mcptools import LEAD_TOOL, LeadTools, tool_name
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call
from deputy_runtime.tools import tools_bash

pytestmark = pytest.mark.anyio

_COUNTER = agent_definition(
    "counter",
    "Counts things.",
    "Count.",
    output_schema={"type": "integer", "minimum": 0},
)


def _text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def _delegating_lead(agent: str) -> Any:
    def lead(request: ModelRequest) -> Any:
        done = [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]
        if not done:
            return tool_call("delegate_to_agent", {"agent_name": agent, "task": "count"})
        return reply("delegated")

    return lead


async def _no_progress(value: float, message: str) -> None:
    """A lead that runs no tool, or a call refused before it runs, sends no progress."""
    raise AssertionError(f"unexpected progress: {message}")


def _tools(
    script: Mapping[str, Any],
    ledger: InProcessLedger | None = None,
    definitions: Mapping[str, AgentDefinition] | None = None,
) -> LeadTools:
    def make_lead(agents: Mapping[str, AgentDefinition]) -> LeadAgent:
        return LeadAgent(
            chat("scripted", script=dict(script)),
            agents,
            usage_limits=UsageLimits(max_requests=10),
            shared_budget=ledger,
        )

    return LeadTools(
        definitions if definitions is not None else {"counter": _COUNTER},
        make_lead,
        ledger=ledger if ledger is not None else InProcessLedger(),
        budget_option="--total-requests 2",
    )


async def test_a_schema_that_is_not_an_object_is_wrapped() -> None:
    tools = _tools({"lead": _delegating_lead("counter"), "counter": lambda r: "3"})
    counter = {t.name: t for t in tools.tools()}["counter"]
    assert counter.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer", "minimum": 0}},
        "required": ["result"],
    }
    events: list[dict[str, Any]] = []

    async def progress(value: float, message: str) -> None:
        events.append(json.loads(message))

    result = await tools.call("counter", {"task": "how many?"}, progress)
    assert not result.is_error, _text(result)
    assert result.structured_content == {"result": 3}
    assert _text(result) == "3"
    assert [e["type"] for e in events if e["type"].startswith("delegation")] == [
        "delegation_start",
        "delegation_end",
    ]


async def test_a_lead_that_does_not_delegate_is_a_tool_error() -> None:
    tools = _tools({"lead": lambda r: "I will not."})
    result = await tools.call("counter", {"task": "count"}, _no_progress)
    assert result.is_error
    assert _text(result) == "the lead did not delegate to counter; stop reason complete"


async def test_run_lead_answers_with_the_leads_text() -> None:
    tools = _tools({"lead": lambda r: "All done."})
    assert [t.name for t in tools.tools()] == [LEAD_TOOL, "counter"]
    result = await tools.call(LEAD_TOOL, {"task": "anything"}, _no_progress)
    assert not result.is_error
    assert _text(result) == "All done."


async def test_a_budget_below_one_call_refuses_before_building_a_lead() -> None:
    built: list[str] = []

    def refuse(request: ModelRequest) -> Any:
        built.append("asked")
        return reply("nothing")

    tools = _tools({"lead": refuse}, ledger=InProcessLedger(requests=1))
    result = await tools.call(LEAD_TOOL, {"task": "x"}, _no_progress)
    assert result.is_error
    assert _text(result).startswith(
        "refused: the server's budget is spent (requests 0 of 1 used, 1 left; a call needs "
        "at least 2; --total-requests 2)"
    )
    assert built == []


def test_namespaced_agents_get_mcp_tool_names() -> None:
    assert tool_name("plugin:reviewer") == "plugin.reviewer"
    namespaced = agent_definition("tools:reviewer", "Reviews.", "Review.")
    tools = _tools({}, definitions={"tools:reviewer": namespaced})
    assert [t.name for t in tools.tools()] == [LEAD_TOOL, "tools.reviewer"]


def test_nothing_to_offer_is_refused() -> None:
    def never(agents: Mapping[str, AgentDefinition]) -> LeadAgent:
        raise AssertionError("no lead is built for a refused server")

    with pytest.raises(ValueError, match="no tool to offer"):
        LeadTools({}, never, ledger=InProcessLedger(), lead_tool=False)


async def test_a_run_that_raises_is_a_tool_error_and_the_tools_go_on() -> None:
    """A lead whose limits raise (``on_exceed="error"``) fails its call, not the server."""

    def make_lead(agents: Mapping[str, AgentDefinition]) -> LeadAgent:
        return LeadAgent(
            chat("scripted", script={"lead": _delegating_lead("counter")}),
            agents,
            usage_limits=UsageLimits(max_requests=1, on_exceed="error"),
        )

    tools = LeadTools({"counter": _COUNTER}, make_lead, ledger=InProcessLedger())
    events: list[str] = []

    async def progress(value: float, message: str) -> None:
        events.append(json.loads(message)["type"])

    result = await tools.call("counter", {"task": "count"}, progress)
    assert result.is_error
    assert _text(result) == "the run failed: Run stopped: request limit reached"
    assert events == ["tool_start", "tool_end"]  # the lead's delegate call, refused
    again = await tools.call("counter", {"task": "count"}, progress)
    assert _text(again) == _text(result)


def test_with_shell_swaps_only_the_hosts_shell_tools(tmp_path: Path) -> None:
    host, fresh = tools_bash(tmp_path), tools_bash(tmp_path)
    bash = {t.name: t for t in host.tools}["bash"]

    @tool(read_only=True)
    def note(text: str) -> str:
        """Note something."""
        return text

    shell_user = agent_definition("runner", "Runs.", "Run.", tools=[bash, note])
    other = agent_definition("reader", "Reads.", "Read.", tools=[note])
    swapped = with_shell({"runner": shell_user, "reader": other}, host, fresh)
    assert [t.name for t in swapped["runner"].tools] == ["bash", "note"]
    assert swapped["runner"].tools[0] is {t.name: t for t in fresh.tools}["bash"]
    assert swapped["runner"].tools[1] is note
    assert swapped["reader"] is other  # nothing to swap: the very same definition
    assert with_shell({"runner": shell_user}, None, fresh)["runner"] is shell_user
