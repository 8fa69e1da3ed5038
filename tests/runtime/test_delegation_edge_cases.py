"""Delegation edge cases: public signatures, live child events, hooks, skills, budgets.

Real LeadAgents on a ScriptedProvider keyed per agent name; tools are real functions and
liveness is proved with events a child's tool waits on (no timing).
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from deputy_runtime import (
    AgentDefinition,
    Chat,
    DelegationPolicy,
    HookDecision,
    HookEvent,
    LeadAgent,
    PermissionAllow,
    PermissionMode,
    Permissions,
    Skill,
    Tool,
    UsageLimits,
    ask_user,
)
from deputy_runtime.chat import OpenAIProvider, ScriptedProvider, reply, tool_call
from deputy_runtime.runtime import DelegationEnd, ToolStart
from deputy_runtime.runtime._routing import ROUTING_START
from tests.runtime.helpers import append_then

pytestmark = pytest.mark.anyio

DELEGATE = "delegate_to_agent"
DELEGATION_ID = re.compile(r"^delegation_[0-9a-f]{32}$")
AGENT_ID = re.compile(r"^agent_[0-9a-f]{32}$")
RUN_ID = re.compile(r"^run_[0-9a-f]{32}$")
QUESTION = {"questions": [{"question": "Which colour?", "options": ["red", "blue"]}]}


def _delegate(name: str = "worker", task: str = "TASK") -> Any:
    return tool_call(DELEGATE, {"agent_name": name, "task": task})


def _tool(name: str, function: Any, **annotations: Any) -> Tool:
    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}},
        function=function,
        **annotations,
    )


def _lead(
    script: dict[str | None, Any], definitions: list[AgentDefinition], tmp_path: Path, **kw: Any
) -> tuple[LeadAgent, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return LeadAgent(Chat(provider), definitions, working_dir=tmp_path, **kw), provider


# -- binding public names --------------------------------------------------------------------


def test_lead_policy_and_parallel_delegate_signatures_match_design(tmp_path: Path) -> None:
    params = inspect.signature(LeadAgent.__init__).parameters
    assert list(params)[:3] == ["self", "chat", "sub_agents"]
    assert params["sub_agents"].default == ()
    for name in (
        "tools",
        "system_prompt",
        "permissions",
        "usage_limits",
        "hooks",
        "working_dir",
        "delegation_policy",
        "delegation_scope",
    ):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    lead = LeadAgent(Chat(ScriptedProvider(["x"])), working_dir=tmp_path)
    # The default is DelegationPolicy(); None is accepted as the same default.
    assert lead.delegation_policy == DelegationPolicy()
    policy = DelegationPolicy()
    assert (
        policy.resource_mode,
        policy.resource_key,
        policy.resources,
        policy.human_input,
        policy.observers,
        policy.chat,
    ) == ("shared", None, None, None, (), None)
    fan_out = inspect.signature(LeadAgent.parallel_delegate).parameters
    assert list(fan_out)[:2] == ["self", "tasks"]
    assert fan_out["max_active"].kind is inspect.Parameter.KEYWORD_ONLY
    assert fan_out["usage_limits"].kind is inspect.Parameter.KEYWORD_ONLY
    assert fan_out["usage_limits"].default is None
    for method in (
        "register_sub_agent",
        "available_sub_agents",
        "list_subagents",
        "get_subagent_results",
        "interrupt",
        "interrupt_subagent",
    ):
        assert callable(getattr(lead, method)), method


# -- live child events in the lead's stream ---------------------------------------------------


async def test_child_events_reach_the_lead_stream_while_the_child_is_still_running(
    tmp_path: Path,
) -> None:
    host_saw_child_tool = anyio.Event()

    async def gate() -> str:
        # Returns only after the host has seen this very call in the lead's stream: if
        # child events were buffered until the delegation ended, this would deadlock.
        await host_saw_child_tool.wait()
        return "released"

    worker = AgentDefinition(
        "worker", "Works.", "ROLE", tools=(_tool("gate", gate, read_only=True),)
    )
    lead, _ = _lead(
        {"lead": [_delegate(), reply("lead done")], "worker": [tool_call("gate", {}), "ok"]},
        [worker],
        tmp_path,
    )
    seen: list[Any] = []
    with anyio.fail_after(10):
        async for event in lead.run_stream("go"):
            seen.append(event)
            if isinstance(event, ToolStart) and event.tool_name == "gate":
                # The delegation has not ended yet when its child's tool starts.
                assert not any(isinstance(e, DelegationEnd) for e in seen)
                host_saw_child_tool.set()
    [record] = lead.list_subagents()
    assert record.status == "completed"
    result = lead.last_result
    assert result is not None
    child_events = [e for e in seen if e.delegation_id is not None]
    assert child_events
    for event in child_events:
        assert event.delegation_id == record.delegation_id
        assert event.parent_agent_id == lead.agent_id
        assert event.parent_run_id == result.run_id
    assert DELEGATION_ID.match(record.delegation_id)
    assert AGENT_ID.match(record.agent_id)
    assert record.agent_id != lead.agent_id
    assert RUN_ID.match(record.run_id)
    assert record.run_id != result.run_id
    lead_start = next(e for e in seen if isinstance(e, ToolStart) and e.tool_name == DELEGATE)
    assert lead_start.call_delegation_id == record.delegation_id
    assert lead_start.tool_call_id == record.tool_call_id


# -- hook forwarding details ------------------------------------------------------------------


async def test_lead_post_tool_use_stop_stops_only_the_child(tmp_path: Path) -> None:
    ran: list[str] = []
    worker = AgentDefinition(
        "worker",
        "Works.",
        "ROLE",
        tools=(_tool("probe", lambda: append_then(ran, "probe", "probed"), read_only=True),),
    )
    lead, provider = _lead(
        {
            "lead": [_delegate(), reply("lead finished")],
            "worker": [tool_call("probe", {}), "never requested"],
        },
        [worker],
        tmp_path,
    )
    seen: list[tuple[str | None, str | None]] = []

    def post(i: Any) -> HookDecision | None:
        seen.append((i.agent_id, i.delegation_id))
        return HookDecision.stop("enough") if i.delegation_id is not None else None

    lead.hooks.add(HookEvent.PostToolUse, post)
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert ran == ["probe"]  # PostToolUse runs after the tool
    assert (record.status, record.stop_reason) == ("stopped", "hook_requested_stop")
    assert len(provider.requests_for("worker")) == 1
    assert result.stop_reason == "complete"
    assert result.response == "lead finished"
    assert (record.agent_id, record.delegation_id) in seen


async def test_lead_can_use_tool_gets_the_childs_context(tmp_path: Path) -> None:
    contexts: list[Any] = []

    def can_use_tool(name: str, arguments: Any, context: Any) -> PermissionAllow:
        contexts.append((name, context))
        return PermissionAllow()

    worker = AgentDefinition(
        "worker", "Works.", "ROLE", tools=(_tool("probe", lambda: "ok", read_only=True),)
    )
    lead, _ = _lead(
        {"lead": [_delegate(), reply("done")], "worker": [tool_call("probe", {}), "ok"]},
        [worker],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.STANDARD, can_use_tool=can_use_tool),
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    child = [c for n, c in contexts if n == "probe"]
    assert len(child) == 1
    assert child[0].agent_id == record.agent_id
    assert child[0].delegation_id == record.delegation_id
    assert child[0].parent_agent_id == lead.agent_id
    assert child[0].parent_run_id == result.run_id


# -- skill tools, provider-native tool params, fan-out budgets --------------------------------


async def test_skill_ask_user_without_human_input_fails_before_any_request(
    tmp_path: Path,
) -> None:
    asker = Skill("asker", "Asks people.", "Ask the user.", tools=(ask_user,))
    worker = AgentDefinition("worker", "Works.", "ROLE", skills=(asker,), permission_mode="plan")
    lead, provider = _lead(
        {"lead": [_delegate(), reply("done")], "worker": [tool_call("ask_user", QUESTION), "x"]},
        [worker],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.PLAN),
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert "human_input" in (record.error or "")
    assert provider.requests_for("worker") == []


async def test_skill_ask_user_is_answered_by_human_input(tmp_path: Path) -> None:
    asked: list[Any] = []

    def human(questions: Any, context: Any) -> dict[str, str]:
        asked.append(context.delegation_id)
        return {q["question"]: "blue" for q in questions}

    asker = Skill("asker", "Asks people.", "Ask the user.", tools=(ask_user,))
    worker = AgentDefinition("worker", "Works.", "ROLE", skills=(asker,), permission_mode="plan")
    lead, provider = _lead(
        {"lead": [_delegate(), reply("done")], "worker": [tool_call("ask_user", QUESTION), "x"]},
        [worker],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.FULL),
        delegation_policy=DelegationPolicy(human_input=human),
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert asked == [record.delegation_id]
    answer = provider.requests_for("worker")[1].turns[-1].contents[0]
    assert answer.error is None  # type: ignore[union-attr]
    assert msgspec.json.decode(answer.value) == {"Which colour?": "blue"}  # type: ignore[union-attr]


def _openai_json(message: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed Chat Completions response carrying ``message``."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


async def _inherited_provider_params_case(tmp_path: Path, native: dict[str, Any]) -> None:
    """A real OpenAIProvider whose own default ``params`` carry the native tool.

    The lead (configured by the host) may use them; a subagent with model ``inherit``
    reuses the lead's provider and so would send them with every request too. Every
    request goes to an httpx MockTransport; the worker's ("ROLE" system prompt) must not.
    """
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if len(bodies) == 1:
            arguments = json.dumps({"agent_name": "worker", "task": "TASK"})
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": DELEGATE, "arguments": arguments},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": "done"}
        return httpx.Response(200, json=_openai_json(message))

    worker = AgentDefinition("worker", "Works.", "ROLE")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        provider = OpenAIProvider("gpt-test", api_key="test", client=client, params=native)
        lead = LeadAgent(Chat(provider), [worker], working_dir=tmp_path)
        result = await lead.run("go")
    assert result.response == "done"
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert "provider-native" in (record.error or "")
    assert "web_search_options" in (record.error or "")
    # two requests, both the lead's: the worker never sent one
    assert len(bodies) == 2
    assert [b["messages"][0]["content"].startswith(ROUTING_START) for b in bodies] == [True, True]
    assert all(b["messages"][0]["content"] != "ROLE" for b in bodies)


@pytest.mark.parametrize(
    "source", ["chat_factory", "inherited_from_lead", "inherited_provider_params"]
)
async def test_provider_native_tool_params_are_refused_from_every_source(
    tmp_path: Path, source: str
) -> None:
    native = {"web_search_options": {"search_context_size": "low"}}
    if source == "inherited_provider_params":
        await _inherited_provider_params_case(tmp_path, native)
        return
    provider = ScriptedProvider({"lead": [_delegate(), reply("done")], "worker": ["child"]})
    worker = AgentDefinition("worker", "Works.", "ROLE")
    if source == "chat_factory":
        policy = DelegationPolicy(chat=lambda definition, context: Chat(provider, params=native))
        lead = LeadAgent(Chat(provider), [worker], working_dir=tmp_path, delegation_policy=policy)
    else:
        lead = LeadAgent(Chat(provider, params=native), [worker], working_dir=tmp_path)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert provider.requests_for("worker") == [], [
        dict(r.params) for r in provider.requests_for("worker")
    ]
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert "provider-native" in (record.error or "")


# -- budgets: the parallel fan-out never exceeds the lead's limits --------------------------


async def test_parallel_delegate_default_budget_is_the_leads_limits(tmp_path: Path) -> None:
    provider = ScriptedProvider({"echo": lambda request: "echoed"})
    echo = AgentDefinition("echo", "Echoes.", "ROLE")
    lead = LeadAgent(
        Chat(provider),
        [echo],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_requests=3),
    )
    result = await lead.parallel_delegate([("echo", f"task {i}") for i in range(7)], max_active=5)
    assert len(provider.requests_for("echo")) == 3
    assert result.statuses.count("completed") == 3
    assert result.statuses.count("not_started") == 4
    assert result.run.usage.requests == 3
    assert result.run.stop_reason == "request_limit"
    assert lead.list_subagents()[-1].status == "not_started"
