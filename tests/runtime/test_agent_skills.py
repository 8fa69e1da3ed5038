"""Skills in the agent: listed in the system prompt, instructions loaded on demand."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime import (
    Agent,
    Chat,
    LeadAgent,
    Skill,
    SkillError,
    agent_definition,
    skill_load,
    tool,
)
from deputy_runtime.chat import AssistantTurn, ModelRequest, ScriptedProvider, reply, tool_call
from deputy_runtime.chat._types import ContentToolResult

pytestmark = pytest.mark.anyio


def write_skill(root: Path, name: str, body: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: How to {name}.\n---\n{body}\n", encoding="utf-8"
    )
    return folder


async def test_skills_are_listed_and_loaded_on_demand(tmp_path: Path) -> None:
    skill = skill_load(write_skill(tmp_path, "haiku", "Write 5-7-5 syllables."))
    seen: list[ModelRequest] = []

    def first(request: ModelRequest) -> AssistantTurn:
        seen.append(request)
        return tool_call("load_skill", {"name": "haiku"})

    provider = ScriptedProvider({"poet": [first, reply("done")]})
    agent = Agent(Chat(provider), name="poet", system_prompt="You write.", skills=[skill])
    result = await agent.run("write a haiku")
    prompt = seen[0].system_prompt or ""
    assert prompt.startswith("You write.")
    assert "- haiku: How to haiku." in prompt
    # Progressive disclosure: the instructions are not in the prompt, only in the tool result.
    assert "5-7-5" not in prompt
    loaded = [c for c in result.turns[2].contents if isinstance(c, ContentToolResult)]
    assert "Write 5-7-5 syllables." in loaded[0].value
    assert [t.name for t in seen[0].tools] == ["load_skill"]


async def test_skill_tools_are_offered_and_disallowed_removes_them(tmp_path: Path) -> None:
    @tool(read_only=True)
    def count_syllables(text: str) -> int:
        """Count syllables."""
        return len(text.split())

    skill = Skill("poetry", "Poems.", "Count first.", tools=(count_syllables,))
    seen: dict[str, list[str]] = {}

    def child(request: ModelRequest) -> str:
        seen["tools"] = [t.name for t in request.tools]
        return "ok"

    provider = ScriptedProvider(
        {
            "lead": [
                tool_call("delegate_to_agent", {"agent_name": "poet", "task": "t"}),
                tool_call("delegate_to_agent", {"agent_name": "strict_poet", "task": "t"}),
                reply("fin"),
            ],
            "poet": child,
            "strict_poet": child,
        }
    )
    poet = agent_definition("poet", "Writes poems", "You write.", skills=[skill])
    strict = poet.replace(name="strict_poet", disallowed_tools=["count_syllables"])
    lead = LeadAgent(Chat(provider), [poet, strict], working_dir=tmp_path)
    await lead.run("go")
    assert lead.list_subagents()[0].status == "completed"
    assert seen["tools"] == ["load_skill"]  # the strict poet ran last


async def test_skill_paths_load_only_when_a_subagent_is_built(tmp_path: Path) -> None:
    missing = tmp_path / "not-there"
    definition = agent_definition("poet", "Writes", "You write.", skills=[str(missing)])
    provider = ScriptedProvider(
        {
            "lead": [
                tool_call("delegate_to_agent", {"agent_name": "poet", "task": "t"}),
                reply("fin"),
            ]
        }
    )
    # Building the lead reads nothing; the delegation fails in setup with the path named.
    lead = LeadAgent(Chat(provider), [definition], working_dir=tmp_path)
    result = await lead.run("go")
    record = lead.list_subagents()[0]
    assert record.status == "failed"
    assert record.stop_reason == "setup_error"
    assert str(missing) in (record.error or "")
    assert result.stop_reason == "complete"
    with pytest.raises(SkillError):
        skill_load(missing)
