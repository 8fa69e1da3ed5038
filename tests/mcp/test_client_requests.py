"""What an MCP server asks of the client, answered through the delegation that called it:
sampling by its model under its budget, elicitation by the lead's human input, roots.

Every test runs the probe server (written with the MCP SDK) over stdio and real
delegations of a LeadAgent on the scripted provider (the offline model).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import (
    DelegationEnd,
    DelegationPolicy,
    HookDecision,
    HookEvent,
    HookInput,
    Hooks,
    LeadAgent,
    McpSamplingEvent,
    StopReason,
    UsageLimits,
    agent_definition,
    chat,
)
from deputy_runtime.chat import ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.mcp import McpHttp, McpResource, McpServer
from deputy_runtime.runtime import Event, decode_event, encode_event
from tests.mcp._mcp_helpers import http_server, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _is_sampling(request: ModelRequest) -> bool:
    """A request the probe's sampling made (no tools offered, a numbered question)."""
    return not request.tools and request.turns[-1].text.startswith("question ")


def subagent(tool: str, arguments: dict[str, Any], sampled: list[str]) -> Any:
    """The subagent's script: answer sampling requests, call ``tool`` once, then reply."""

    def script(request: ModelRequest) -> Any:
        if _is_sampling(request):
            question = request.turns[-1].text
            sampled.append(question)
            return reply(f"answer to {question}")
        if request.turns[-1].role == "user" and len(request.turns) == 1:
            return tool_call(tool, arguments)
        return reply("done")

    return script


def lead_script(request: ModelRequest, delegations: int = 1) -> Any:
    if len(request.turns) == 1:
        calls = [
            ("delegate_to_agent", {"agent_name": "worker", "task": f"t{i}"})
            for i in range(delegations)
        ]
        return tool_calls(*calls)
    return reply("delegated")


def tool_results(hooks: Hooks) -> list[Any]:
    """Records the value of every MCP tool call's PostToolUse the lead's hooks see."""
    seen: list[Any] = []

    def post(i: HookInput) -> None:
        if i.tool_name and i.tool_name.startswith("mcp__"):
            value = i.tool_result
            # The SDK's servers return a str result as {"result": ...} structured content.
            seen.append(value["result"] if isinstance(value, dict) and "result" in value else value)

    hooks.add(HookEvent.PostToolUse, post)
    return seen


def lead_with(
    server: McpServer,
    *,
    tool: str,
    arguments: dict[str, Any] | None = None,
    sampled: list[str] | None = None,
    max_requests: int = 10,
    mode: str = "owned",
    hooks: Hooks | None = None,
    human_input: Any = None,
    working_dir: Path | None = None,
    delegations: int = 1,
) -> LeadAgent:
    definition = agent_definition(
        "worker", "Works.", "Work.", mcp_tools=(tool,), max_requests=max_requests
    )
    questions = [] if sampled is None else sampled
    script = {
        "lead": functools.partial(lead_script, delegations=delegations),
        "worker": subagent(tool, arguments or {}, questions),
    }
    return LeadAgent(
        chat("scripted", script=script),
        [definition],
        hooks=hooks,
        working_dir=working_dir,
        delegation_policy=DelegationPolicy(
            resource_modes=(McpResource(server, mode=mode),), human_input=human_input
        ),
    )


@pytest.mark.parametrize("mode", ["owned", "shared"])
async def test_sampling_is_answered_by_the_delegations_model_until_its_budget_is_spent(
    mode: str,
) -> None:
    hooks = Hooks()
    values = tool_results(hooks)
    sampled: list[str] = []
    events: list[Event] = []
    lead = lead_with(
        stdio_server("probe"),
        tool="mcp__probe__sample_loop",
        arguments={"most": 10},
        sampled=sampled,
        max_requests=4,
        mode=mode,
        hooks=hooks,
    )
    async with lead:
        result = await lead.run("go", on_event=events.append)
    # One request of its own, then three sampling requests: the fifth is refused before
    # any model request is made.
    assert sampled == ["question 1", "question 2", "question 3"]
    (value,) = values
    assert value["answers"] == [f"answer to question {i}" for i in (1, 2, 3)]
    assert "the run's budget is spent (request_limit)" in value["refusal"]
    (end,) = [e for e in events if isinstance(e, DelegationEnd)]
    assert end.stop_reason == StopReason.REQUEST_LIMIT
    assert end.usage.requests == 4
    # The lead counts its own two requests and all four of the delegation's, tokens too.
    assert result.usage.requests == 6
    assert result.usage.input_tokens == 6 * 10
    assert result.usage.output_tokens == 6 * 5
    sampling = [e for e in events if isinstance(e, McpSamplingEvent)]
    assert [(e.server, e.error is None) for e in sampling] == [("probe", True)] * 3 + [
        ("probe", False)
    ]
    assert {e.delegation_id for e in sampling} == {end.delegation_id}
    assert [e.input_tokens for e in sampling] == [10, 10, 10, 0]
    assert sampling[0].model == "scripted"
    assert decode_event(encode_event(sampling[-1])) == sampling[-1]


@pytest.mark.parametrize("mode", ["owned", "shared"])
async def test_sampling_while_two_delegations_call_one_shared_server_is_refused(
    tmp_path: Path, mode: str
) -> None:
    hooks = Hooks()
    values = tool_results(hooks)
    sampled: list[str] = []
    lead = lead_with(
        stdio_server("probe"),
        tool="mcp__probe__sample_together",
        arguments={"peers": 2, "folder": str(tmp_path)},
        sampled=sampled,
        mode=mode,
        hooks=hooks,
        delegations=2,
    )
    async with lead:
        await lead.run("go")
    assert len(values) == 2
    if mode == "owned":
        # Each delegation has its own server: each request is its own.
        assert [v["answers"] for v in values] == [["answer to question 1"]] * 2
        assert len(sampled) == 2
    else:
        # Both calls are in flight on one session: the request cannot be attributed.
        assert sampled == []
        for value in values:
            assert "tool calls of 2 runs are in flight on this shared session" in value["refusal"]


async def test_sampling_over_streamable_http_is_counted_the_same(tmp_path: Path) -> None:
    sampled: list[str] = []
    events: list[Event] = []
    with http_server(tmp_path, "probe") as (url, _process):
        lead = lead_with(
            McpServer("probe", McpHttp(url=url)),
            tool="mcp__probe__sample_loop",
            arguments={"most": 10},
            sampled=sampled,
            max_requests=3,
        )
        async with lead:
            result = await lead.run("go", on_event=events.append)
    assert sampled == ["question 1", "question 2"]
    (end,) = [e for e in events if isinstance(e, DelegationEnd)]
    assert end.stop_reason == StopReason.REQUEST_LIMIT
    assert result.usage.requests == 2 + 3


async def test_a_leads_request_limit_bounds_its_delegations_sampling() -> None:
    sampled: list[str] = []
    events: list[Event] = []
    lead = lead_with(
        stdio_server("probe"),
        tool="mcp__probe__sample_loop",
        arguments={"most": 10},
        sampled=sampled,
    )
    async with lead:
        result = await lead.run(
            "go", usage_limits=UsageLimits(max_requests=5), on_event=events.append
        )
    # The delegation's share of the lead's five requests (what the lead's own first and
    # last requests leave) covers its own request and the sampling; the lead still
    # answers, and every request is counted once.
    (end,) = [e for e in events if isinstance(e, DelegationEnd)]
    assert end.stop_reason == StopReason.REQUEST_LIMIT
    assert sampled
    assert end.usage.requests == 1 + len(sampled)
    assert result.response == "delegated"
    assert result.usage.requests == 2 + end.usage.requests == 5


async def test_the_hooks_see_every_sampling_request_and_can_refuse_it() -> None:
    hooks = Hooks()
    values = tool_results(hooks)
    seen: list[HookInput] = []

    def pre(i: HookInput) -> HookDecision | None:
        if i.tool_name == "mcp__probe/sampling":
            seen.append(i)
            if len(seen) == 2:
                return HookDecision.deny("no second sample")
        return None

    hooks.add(HookEvent.PreToolUse, pre)
    sampled: list[str] = []
    lead = lead_with(
        stdio_server("probe"),
        tool="mcp__probe__sample_loop",
        arguments={"most": 5},
        sampled=sampled,
        hooks=hooks,
    )
    async with lead:
        await lead.run("go")
    assert sampled == ["question 1"]
    assert len(seen) == 2
    first = seen[0]
    assert first.agent_name == "worker"
    assert first.delegation_id is not None
    assert first.tool_input == {
        "system_prompt": "Answer briefly.",
        "messages": [{"role": "user", "text": "question 1"}],
        "max_tokens": 50,
    }
    (value,) = values
    assert value["answers"] == ["answer to question 1"]
    assert "Denied by hook: no second sample" in value["refusal"]


async def test_elicitation_is_answered_through_the_leads_human_input() -> None:
    hooks = Hooks()
    values = tool_results(hooks)
    asked: list[tuple[list[dict[str, Any]], Any]] = []

    async def human_input(questions: list[dict[str, Any]], context: Any) -> dict[str, Any]:
        asked.append((questions, context))
        answers = {"name": "Ada", "age": "36", "subscribe": "yes"}
        return {
            q["question"]: answers[q["question"].split("\n")[1].split(" ")[0]] for q in questions
        }

    lead = lead_with(
        stdio_server("probe"), tool="mcp__probe__ask_contact", hooks=hooks, human_input=human_input
    )
    async with lead:
        await lead.run("go")
    assert values == ["accept: Ada, 36, True"]
    ((questions, context),) = asked
    assert questions[0]["question"].startswith("Who should we contact?\nname")
    assert questions[2]["options"] == ["true", "false"]
    assert context.agent_name == "worker"


async def test_elicitation_without_human_input_is_refused() -> None:
    hooks = Hooks()
    values = tool_results(hooks)
    lead = lead_with(stdio_server("probe"), tool="mcp__probe__ask_contact", hooks=hooks)
    async with lead:
        await lead.run("go")
    (value,) = values
    assert value.startswith("refused: elicitation/create refused: no human input")
    assert "DelegationPolicy(human_input=...)" in value


@pytest.mark.parametrize("mode", ["owned", "shared"])
async def test_roots_are_the_working_directory_and_the_hosts(tmp_path: Path, mode: str) -> None:
    work = tmp_path / "work"
    extra = tmp_path / "data"
    work.mkdir()
    extra.mkdir()
    hooks = Hooks()
    values = tool_results(hooks)
    server = stdio_server("probe")
    server = McpServer(server.name, server.config, roots=(str(extra),))
    lead = lead_with(
        server, tool="mcp__probe__list_roots", hooks=hooks, working_dir=work, mode=mode
    )
    async with lead:
        await lead.run("go")
    assert values == [[work.resolve().as_uri(), extra.as_uri()]]


async def test_a_call_made_outside_an_agent_run_cannot_sample() -> None:
    # As a durable run's worker calls a tool: no run is current, so nobody is charged.
    async with stdio_server("probe").session() as session:
        value = await session.call("sample_loop", {"most": 3})
    assert value["answers"] == []
    assert "no tool call of an agent run is in flight" in value["refusal"]


async def test_roots_must_be_absolute_paths() -> None:
    base = stdio_server("probe")
    with pytest.raises(ValueError, match=r"roots\[0\] must be an absolute directory path"):
        McpServer("probe", base.config, roots=("relative/dir",))
    with pytest.raises(ValueError, match="roots must be a list of absolute paths"):
        McpServer("probe", base.config, roots="/tmp")


async def test_a_shared_resource_reopened_by_another_lead_gives_that_leads_directory(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    resource = McpResource(stdio_server("probe"))
    seen: list[Any] = []
    for directory in (first, second):
        hooks = Hooks()
        values = tool_results(hooks)
        definition = agent_definition(
            "worker", "Works.", "Work.", mcp_tools=("mcp__probe__list_roots",), max_requests=3
        )
        script = {"lead": lead_script, "worker": subagent("mcp__probe__list_roots", {}, [])}
        lead = LeadAgent(
            chat("scripted", script=script),
            [definition],
            hooks=hooks,
            working_dir=directory,
            delegation_policy=DelegationPolicy(resource_modes=(resource,)),
        )
        async with lead:
            await lead.run("go")
        seen.extend(values)
    assert seen == [[first.resolve().as_uri()], [second.resolve().as_uri()]]
