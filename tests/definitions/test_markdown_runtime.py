"""Markdown-defined subagents in a real LeadAgent run: tool policy and the task reach the child.

Runs the real runtime on a ScriptedProvider (the only stand-in: no model is reachable here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import Chat, LeadAgent
from deputy_runtime.chat import ContentText, ModelRequest, ScriptedProvider, reply, tool_call
from deputy_runtime.definitions import claude_agent_definitions
from tests.definitions._markdown_helpers import agent_file, make_tool

pytestmark = pytest.mark.anyio


def _project(tmp_path: Path) -> Path:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    agent_file(
        agents,
        "---\nname: chart-reviewer\ndescription: Reviews charts.\ndisallowedTools: Write\n---\n"
        "You review charts.\n",
        "chart-reviewer.md",
    )
    agent_file(
        agents,
        "---\nname: reader\ndescription: Only reads.\ntools: read\n---\nYou read.\n",
        "reader.md",
    )
    agent_file(
        agents, "---\ndescription: No tools at all.\ntools: []\n---\nYou think.\n", "thinker.md"
    )
    return tmp_path


async def test_tool_policy_and_task_reach_the_subagent(tmp_path: Path) -> None:
    registry = {name: make_tool(name) for name in ("read", "grep", "write")}
    found = claude_agent_definitions(_project(tmp_path), registry)
    assert list(found) == ["chart-reviewer", "reader", "thinker"]

    seen: dict[str, ModelRequest] = {}

    def child(name: str) -> Any:
        def respond(request: ModelRequest) -> str:
            seen[name] = request
            return f"{name} done"

        return respond

    lead_script = [
        tool_call("delegate_to_agent", {"agent_name": "chart-reviewer", "task": "check meds"}),
        tool_call("delegate_to_agent", {"agent_name": "reader", "task": "read the chart"}),
        tool_call("delegate_to_agent", {"agent_name": "thinker", "task": "think"}),
        reply("all done"),
    ]
    script = {"lead": lead_script} | {name: child(name) for name in found}
    lead = LeadAgent(Chat(ScriptedProvider(script)), found, working_dir=tmp_path, name="lead")
    result = await lead.run("review the chart")
    assert result.response == "all done"

    offered = {name: sorted(spec.name for spec in seen[name].tools) for name in found}
    # tools absent: every registry tool, minus disallowedTools (case-insensitive).
    assert offered["chart-reviewer"] == ["grep", "read"]
    assert offered["reader"] == ["read"]
    assert offered["thinker"] == []
    assert seen["chart-reviewer"].system_prompt is not None
    assert seen["chart-reviewer"].system_prompt.startswith("You review charts.")
    first = seen["chart-reviewer"].turns[0]
    texts = "".join(c.text for c in first.contents if isinstance(c, ContentText))
    assert "check meds" in texts  # AgentLane drops the task; deputy hands it over
