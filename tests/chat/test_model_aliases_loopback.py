"""Real agent files saying ``model: sonnet`` never reach a provider as "sonnet".

A lead on a loopback OpenAI-compatible server (real sockets) delegates to five markdown
agents whose files say ``sonnet``, ``opus``, ``haiku``, ``inherit`` and a dated Claude
id: every request the server sees names a model the host mapped or the lead's own, and
the unmapped ones are announced as warning events. Against a loopback Anthropic server
the aliases resolve to the table's ids. Both anyio backends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime import AgentDefinition, LeadAgent, UsageLimits, agent_definitions
from deputy_runtime.chat import CLAUDE_CODE_ALIASES, Chat, chat, is_model_alias
from deputy_runtime.runtime import DelegationPolicy, Event, WarningEvent
from tests.chat.agent_server import AgentServer

pytestmark = pytest.mark.anyio

DATED = "claude-sonnet-4-20250514"
FILES = {
    "writer": "sonnet",
    "planner": "opus",
    "quick": "haiku",
    "plain": "inherit",
    "dated": DATED,
}


def _agents(directory: Path) -> dict[str, AgentDefinition]:
    for name, model in FILES.items():
        (directory / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: The {name} agent.\nmodel: {model}\n"
            f"tools: []\nmaxTurns: 2\n---\nYou are the {name} agent.\n",
            encoding="utf-8",
        )
    return dict(agent_definitions(directory, tools={}, markdown=True))


async def _run(lead: LeadAgent) -> list[Event]:
    events: list[Event] = []
    result = await lead.run("Do the work.", on_event=events.append)
    assert result.stop_reason == "complete", result.error
    assert {r.status for r in lead.list_subagents()} == {"completed"}
    return events


def _warnings(events: list[Event]) -> dict[str, str]:
    return {e.agent_name or "": e.message for e in events if isinstance(e, WarningEvent)}


@pytest.fixture(autouse=True)
def _no_alias_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for _, variable in CLAUDE_CODE_ALIASES.values():
        monkeypatch.delenv(variable, raising=False)


async def test_openai_lead_sends_only_mapped_or_lead_models(tmp_path: Path) -> None:
    with AgentServer("openai") as server:
        lead_chat = chat("openai/lead-model", base_url=server.url + "/v1", api_key="sk-test")
        lead = LeadAgent(
            lead_chat,
            _agents(tmp_path),
            usage_limits=UsageLimits(max_requests=20),
            model_aliases={"sonnet": "openai/gpt-5", "opus": "gpt-5-pro"},
        )
        events = await _run(lead)
    assert sorted(server.models) == sorted(
        ["lead-model", "lead-model", "gpt-5", "gpt-5-pro", "lead-model", "lead-model", "lead-model"]
    )
    assert not any(is_model_alias(m) or m.startswith("claude") for m in server.models)
    warnings = _warnings(events)
    assert sorted(warnings) == ["dated", "quick"]
    assert "'haiku' is a Claude Code alias" in warnings["quick"]
    assert f"'{DATED}' is another vendor's model id" in warnings["dated"]
    # The warning is the subagent's own event: it carries the delegation's ids.
    by_name = {r.agent_name: r.delegation_id for r in lead.list_subagents()}
    for event in events:
        if isinstance(event, WarningEvent):
            assert event.delegation_id == by_name[event.agent_name or ""]


async def test_anthropic_lead_resolves_aliases_to_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_DEFAULT_HAIKU_MODEL", "claude-haiku-pinned")
    with AgentServer("anthropic") as server:
        lead_chat = chat("anthropic/claude-lead", base_url=server.url, api_key="sk-ant-test")
        lead = LeadAgent(
            lead_chat,
            _agents(tmp_path),
            usage_limits=UsageLimits(max_requests=20),
        )
        events = await _run(lead)
    expected = [
        "claude-lead",
        "claude-lead",
        CLAUDE_CODE_ALIASES["sonnet"][0],
        CLAUDE_CODE_ALIASES["opus"][0],
        "claude-haiku-pinned",
        "claude-lead",
        DATED,
    ]
    assert sorted(server.models) == sorted(expected)
    assert _warnings(events) == {}


async def test_policy_chat_factory_still_wins(tmp_path: Path) -> None:
    made: list[str] = []

    def factory(definition: object, context: object) -> Chat:
        made.append(getattr(definition, "name", ""))
        return chat(f"openai/policy-{len(made)}", base_url=server.url + "/v1", api_key="k")

    with AgentServer("openai") as server:
        lead = LeadAgent(
            chat("openai/lead-model", base_url=server.url + "/v1", api_key="sk-test"),
            _agents(tmp_path),
            usage_limits=UsageLimits(max_requests=20),
            delegation_policy=DelegationPolicy(chat=factory),
        )
        events = await _run(lead)
    assert sorted(made) == sorted(FILES)
    assert sorted(m for m in server.models if m != "lead-model") == [
        f"policy-{i}" for i in range(1, 6)
    ]
    assert _warnings(events) == {}
