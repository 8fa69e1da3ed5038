"""LeadAgent and one delegation end to end.

Routing, admission records, the fresh isolated child and its first message, the compact
outcome (8 KiB answer cut), child failure as a tool error, interrupts, and the child's
events in the lead's run_stream. All on a ScriptedProvider keyed per agent name.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    Chat,
    DefinitionError,
    HookEvent,
    HookInput,
    LeadAgent,
    ProviderError,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_call
from deputy_runtime.chat._types import ContentText, ModelRequest, Turn
from deputy_runtime.runtime import (
    DelegationEnd,
    DelegationStart,
    ModelRequestEvent,
    StopEvent,
    ToolEnd,
    ToolStart,
)
from tests.runtime.helpers import (
    DELEGATE,
    definition,
    delegate,
    delegate_many,
    delegate_results,
    make_tool,
    outcome,
    request_text,
    scripted_lead,
)

pytestmark = pytest.mark.anyio


# -- construction and routing section -----------------------------------------------------


def test_delegate_tool_first_and_routing_section(tmp_path: Path) -> None:
    extra = make_tool("extra", read_only=True)
    lead, _ = scripted_lead(
        {"lead": []},
        [definition("alpha"), definition("beta")],
        tmp_path,
        tools=[extra],
        system_prompt="BASE PROMPT",
    )
    assert [t.name for t in lead.get_tools()] == [DELEGATE, "extra"]
    prompt = lead.system_prompt
    assert prompt is not None
    assert prompt.startswith("BASE PROMPT")
    start = prompt.index("<!-- deputy-lead-routing:v1:start -->")
    end = prompt.index("<!-- deputy-lead-routing:v1:end -->")
    section = prompt[start:end]
    assert "## alpha\nThe alpha sub-agent." in section
    assert "## beta\nThe beta sub-agent." in section
    assert lead.available_sub_agents() == ["alpha", "beta"]


def test_register_sub_agent_updates_routing_and_rejects_duplicates(tmp_path: Path) -> None:
    lead, _ = scripted_lead({"lead": []}, [definition("alpha")], tmp_path)
    lead.register_sub_agent(definition("gamma"))
    assert lead.available_sub_agents() == ["alpha", "gamma"]
    assert "## gamma" in (lead.system_prompt or "")
    with pytest.raises(DefinitionError, match="already registered"):
        lead.register_sub_agent(definition("GAMMA "))
    with pytest.raises(DefinitionError, match="duplicate AgentDefinition routing keys"):
        scripted_lead({"lead": []}, [definition("a"), definition("A")], tmp_path)
    with pytest.raises(DefinitionError, match="AgentDefinition"):
        lead.register_sub_agent("not a definition")  # type: ignore[arg-type]


def test_sub_agents_accepts_the_mapping_from_agent_definitions(tmp_path: Path) -> None:
    defs = {"alpha": definition("alpha"), "beta": definition("beta")}
    lead, _ = scripted_lead({"lead": []}, (), tmp_path)
    lead2 = LeadAgent(lead.chat, defs, working_dir=tmp_path)
    assert lead2.available_sub_agents() == ["alpha", "beta"]


# -- one delegation -------------------------------------------------------------------------


async def test_successful_delegation_returns_compact_outcome(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {
            "lead": [delegate(" Worker ", "Review it", id="call_a"), reply("all done")],
            "worker": ["Reviewed"],
        },
        [definition("worker")],
        tmp_path,
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"
    [res] = delegate_results(p)
    assert res.error is None
    out = outcome(res)
    [record] = lead.list_subagents()
    assert out == {
        "delegation_id": record.delegation_id,
        "agent_id": record.agent_id,
        "agent_name": "worker",
        "run_id": record.run_id,
        "parent_agent_id": lead.agent_id,
        "parent_run_id": result.run_id,
        "tool_call_id": "call_a",
        "status": "completed",
        "stop_reason": "complete",
        "task_success": "not_assessed",
        "answer": "Reviewed",
        "answer_truncated": False,
        "error": None,
    }
    # compact JSON (no spaces after separators)
    assert ", " not in res.value
    assert '": ' not in res.value
    assert record.delegation_id.startswith("delegation_")
    assert record.agent_id.startswith("agent_")
    assert record.run_id.startswith("run_")
    assert record.status == "completed"
    assert record.task == "Review it"
    assert record.tool_call_id == "call_a"
    assert record.parent_run_id == result.run_id
    assert record.admitted_at <= (record.started_at or 0) <= (record.completed_at or 0)
    assert record.error is None
    assert record.hook_error is None
    assert record.cleanup_error is None
    [child_result] = lead.get_subagent_results("worker")
    assert child_result is not None
    assert child_result.response == "Reviewed"
    assert child_result.delegation_id == record.delegation_id
    assert child_result.parent_agent_id == lead.agent_id
    assert child_result.parent_run_id == result.run_id
    assert lead.get_subagent_results(delegation_id=record.delegation_id) == [child_result]
    assert lead.get_subagent_results("nobody") == []
    p.assert_complete()


async def test_child_is_fresh_and_never_sees_lead_history(tmp_path: Path) -> None:
    reader = make_tool("read_stuff", read_only=True)
    worker = definition("worker", prompt="ROLE", memory=["STATIC NOTE"], initial_prompt="INITIAL")
    lead, p = scripted_lead(
        {
            "lead": [
                delegate(
                    "worker",
                    "TASK",
                    constraints=["be brief"],
                    deliverable="a list",
                    stop_conditions=["when done"],
                ),
                reply("ok"),
            ],
            "worker": ["fine"],
        },
        [worker],
        tmp_path,
        tools=[reader],
        system_prompt="PRIVATE_PARENT system prompt",
    )
    lead.chat.set_turns(
        [
            Turn("user", (ContentText("PRIVATE_PARENT question"),)),
            Turn("assistant", (ContentText("PRIVATE_PARENT answer"),)),
        ]
    )
    await lead.run("PRIVATE_PARENT task")
    [first] = p.requests_for("worker")
    assert first.system_prompt == "ROLE\n\n# Memory\n\n- STATIC NOTE"
    assert first.tools == ()
    assert len(first.turns) == 1
    assert first.turns[0].role == "user"
    assert "PRIVATE" not in request_text(first)
    message = json.loads(first.turns[0].text)
    assert message == {
        "format": "deputy_delegation_v1",
        "definition_initial_prompt": "INITIAL",
        "brief": {
            "task": "TASK",
            "constraints": ["be brief"],
            "deliverable": "a list",
            "stop_conditions": ["when done"],
        },
    }
    assert first.turns[0].text.count("INITIAL") == 1
    # the lead's own conversation kept its history and gained only its own turns
    lead_turns = lead.chat.get_turns()
    assert lead_turns[0].text == "PRIVATE_PARENT question"
    assert all("ROLE" not in repr(t) for t in lead_turns)


async def test_first_message_without_brief_extras(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker", "  keep  whitespace  "), reply("ok")], "worker": ["x"]},
        [definition("worker")],
        tmp_path,
    )
    await lead.run("go")
    message = json.loads(p.requests_for("worker")[0].turns[0].text)
    assert message == {
        "format": "deputy_delegation_v1",
        "definition_initial_prompt": None,
        "brief": {
            "task": "  keep  whitespace  ",
            "constraints": [],
            "deliverable": None,
            "stop_conditions": [],
        },
    }


async def test_unknown_agent_is_a_failed_setup_and_a_tool_error(tmp_path: Path) -> None:
    # An unknown agent is a setup failure: recorded failed/setup_error, no
    # provider request, and a tool error naming the agents that exist.
    lead, p = scripted_lead(
        {"lead": [delegate("ghost"), reply("sorry")]},
        [definition("alpha"), definition("beta")],
        tmp_path,
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"
    [res] = delegate_results(p)
    assert res.error is not None
    assert res.error.startswith("Subagent 'ghost' failed.\n")
    outcome = json.loads(res.error.split("\n", 1)[1])
    assert outcome["error"] == "Unknown agent: ghost. Available agents: alpha, beta"
    [record] = lead.list_subagents()
    assert (record.agent_name, record.status, record.stop_reason) == (
        "ghost",
        "failed",
        "setup_error",
    )
    assert record.usage.requests == 0
    assert [name for name, _ in p.request_log] == ["lead", "lead"]


async def test_blank_task_is_rejected_before_admission(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker", "   "), reply("sorry")]}, [definition("worker")], tmp_path
    )
    await lead.run("go")
    [res] = delegate_results(p)
    assert res.error is not None
    assert "blank" in res.error
    assert lead.list_subagents() == []


async def test_answer_is_cut_to_8_kib_of_utf8(tmp_path: Path) -> None:
    # 3-byte characters, so a byte cut at 8192 falls inside a character.
    long_answer = "€" * 7000  # 21000 bytes
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [long_answer]},
        [definition("worker")],
        tmp_path,
    )
    await lead.run("go")
    out = outcome(delegate_results(p)[0])
    assert out["answer_truncated"] is True
    encoded = out["answer"].encode()
    assert len(encoded) <= 8 * 1024
    assert len(encoded) > 8 * 1024 - 3
    assert long_answer.startswith(out["answer"])
    # the full answer stays available to the host
    [child] = lead.get_subagent_results()
    assert child is not None
    assert child.response == long_answer


async def test_answer_of_exactly_8_kib_is_not_truncated(tmp_path: Path) -> None:
    answer = "a" * 8192
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [answer]},
        [definition("worker")],
        tmp_path,
    )
    await lead.run("go")
    out = outcome(delegate_results(p)[0])
    assert out["answer"] == answer
    assert out["answer_truncated"] is False


@pytest.mark.parametrize(
    "failure",
    [ProviderError("deterministic child failure"), RuntimeError("deterministic child failure")],
    ids=["provider_error", "crash"],
)
async def test_failed_child_is_a_tool_error_with_json(tmp_path: Path, failure: Exception) -> None:
    stop_hook: list[Any] = []
    lead, p = scripted_lead(
        {"lead": [delegate("worker", id="call_f"), reply("noted")], "worker": [failure]},
        [definition("worker")],
        tmp_path,
    )
    lead.hooks.add(HookEvent.SubagentStop, stop_hook.append)
    events = [e async for e in lead.run_stream("go")]
    [res] = delegate_results(p)
    assert res.error is not None
    head, _, payload = res.error.partition("\n")
    assert head == "Subagent 'worker' failed."
    body = json.loads(payload)
    assert body["status"] == "failed"
    assert "deterministic child failure" in body["error"]
    [record] = lead.list_subagents()
    assert record.status == "failed"
    assert record.error is not None
    assert "deterministic child failure" in record.error
    assert body["delegation_id"] == record.delegation_id
    starts = [e for e in events if isinstance(e, ToolStart) and e.tool_name == DELEGATE]
    ends = [e for e in events if isinstance(e, ToolEnd) and e.tool_name == DELEGATE]
    assert len(starts) == len(ends) == 1
    assert starts[0].tool_call_id == ends[0].tool_call_id == "call_f"
    assert starts[0].call_delegation_id == ends[0].call_delegation_id == record.delegation_id
    assert ends[0].error == res.error
    assert [h.status for h in stop_hook] == ["failed"]
    # the lead itself carried on
    assert isinstance(events[-1], StopEvent)
    assert events[-1].stop_reason == "complete"


async def test_lead_tool_events_carry_no_delegation_id_for_own_tools(tmp_path: Path) -> None:
    own = make_tool("lookup", read_only=True)
    lead, _ = scripted_lead(
        {"lead": [tool_call("lookup", {}), reply("done")]},
        [definition("w")],
        tmp_path,
        tools=[own],
    )
    events = [e async for e in lead.run_stream("go")]
    start = next(e for e in events if isinstance(e, ToolStart))
    assert start.tool_name == "lookup"
    assert start.call_delegation_id is None, "a non-delegate tool call got a delegation id: " + str(
        start.call_delegation_id
    )


async def test_delegation_ids_unique_even_when_provider_repeats_call_ids(
    tmp_path: Path,
) -> None:
    # Some providers (local models) number tool calls per turn: "call_0" every turn.
    lead, _ = scripted_lead(
        {
            "lead": [
                delegate("worker", "one", id="call_0"),
                delegate("worker", "two", id="call_0"),
                reply("done"),
            ],
            "worker": ["a", "b"],
        },
        [definition("worker")],
        tmp_path,
    )
    async with aclosing(lead.run_stream("go")) as stream:
        async for _ in stream:
            pass
    ids = [r.delegation_id for r in lead.list_subagents()]
    assert len(ids) == 2
    assert len(set(ids)) == 2, ids


async def test_records_are_live_while_running(tmp_path: Path) -> None:
    seen: list[list[str]] = []
    release = anyio.Event()

    async def worker(request: ModelRequest) -> str:
        seen.append([r.status for r in lead.list_subagents()])
        await release.wait()
        return "done"

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": worker},
        [definition("worker")],
        tmp_path,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.run, "go")
        while not seen:
            await anyio.sleep(0)
        [record] = lead.list_subagents()
        assert record.status == "running"
        assert record.completed_at is None
        release.set()
    assert seen == [["running"]]
    assert [r.status for r in lead.list_subagents()] == ["completed"]


async def test_several_delegate_calls_in_one_turn_run_concurrently(tmp_path: Path) -> None:
    arrived = 0
    both = anyio.Event()

    async def worker(request: ModelRequest) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both.set()
        await both.wait()  # deadlocks unless both children are in flight together
        return "done"

    lead, p = scripted_lead(
        {"lead": [delegate_many(("worker", "a"), ("worker", "b")), reply("ok")], "worker": worker},
        # A definition without max_requests would take the lead's whole remaining budget
        # and leave its sibling none (budgets are reserved first come, first served).
        [definition("worker", max_requests=2)],
        tmp_path,
    )
    with anyio.fail_after(10):
        result = await lead.run("go")
    assert result.stop_reason == "complete"
    assert [r.status for r in lead.list_subagents()] == ["completed", "completed"]
    # admission order follows the scheduler (trio may start the second call first)
    assert sorted(r.task for r in lead.list_subagents()) == ["a", "b"]
    assert [outcome(r)["status"] for r in delegate_results(p)] == ["completed", "completed"]


# -- interrupts -------------------------------------------------------------------------------


async def test_interrupt_stops_lead_and_every_active_child(tmp_path: Path) -> None:
    in_flight = 0
    both = anyio.Event()
    release = anyio.Event()

    async def worker(request: ModelRequest) -> Any:
        nonlocal in_flight
        in_flight += 1
        if in_flight == 2:
            both.set()
        await release.wait()
        return tool_call("noop", {})  # would continue if not interrupted

    noop = make_tool("noop", read_only=True)
    lead, p = scripted_lead(
        {"lead": [delegate_many(("worker", "a"), ("worker", "b"))], "worker": worker},
        [definition("worker", tools=[noop], max_requests=3)],
        tmp_path,
    )
    result: list[Any] = []

    async def run() -> None:
        result.append(await lead.run("go"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await both.wait()
        lead.interrupt("host stop")
        release.set()
    [lead_result] = result
    assert lead_result.stop_reason == "interrupted"
    records = lead.list_subagents()
    assert [r.status for r in records] == ["stopped", "stopped"]
    assert [r.stop_reason for r in records] == ["interrupted", "interrupted"]
    # each child made exactly its one request; the lead made no request after the turn
    assert len(p.requests_for("worker")) == 2
    assert len(p.requests_for("lead")) == 1


async def test_interrupt_subagent_stops_only_that_child(tmp_path: Path) -> None:
    calls = 0
    started = anyio.Event()
    release = anyio.Event()

    async def worker(request: ModelRequest) -> Any:
        nonlocal calls
        calls += 1
        task = json.loads(request.turns[0].text)["brief"]["task"]
        if len(request.turns) == 1:
            if calls == 2:
                started.set()
            await release.wait()
            return tool_call("noop", {})
        return f"finished {task}"

    noop = make_tool("noop", read_only=True)
    lead, _ = scripted_lead(
        {"lead": [delegate_many(("worker", "a"), ("worker", "b")), reply("ok")], "worker": worker},
        [definition("worker", tools=[noop], max_requests=3)],
        tmp_path,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.run, "go")
        with anyio.fail_after(10):
            await started.wait()
        first = lead.list_subagents()[0]
        assert lead.interrupt_subagent(first.delegation_id, "enough") is True
        assert lead.interrupt_subagent("delegation_nope") is False
        release.set()
    a, b = lead.list_subagents()
    assert (a.status, a.stop_reason) == ("stopped", "interrupted")
    assert (b.status, b.stop_reason) == ("completed", "complete")
    assert lead.last_result is not None
    assert lead.last_result.stop_reason == "complete"
    assert lead.interrupt_subagent(a.delegation_id) is False  # no longer active


async def test_interrupt_subagent_inside_subagent_start_prevents_the_run(
    tmp_path: Path,
) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["should not run"]},
        [definition("worker")],
        tmp_path,
    )

    def interrupt(h: HookInput) -> None:
        lead.interrupt_subagent(h.delegation_id or "")

    lead.hooks.add(HookEvent.SubagentStart, interrupt)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert p.requests_for("worker") == []
    assert record.status in ("not_started", "stopped")


async def test_interrupt_inside_subagent_start_means_not_started(tmp_path: Path) -> None:
    stops: list[Any] = []
    lead, p = scripted_lead(
        {"lead": [delegate("worker")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
    )
    lead.hooks.add(HookEvent.SubagentStart, lambda h: lead.interrupt("cancelled by owner"))
    lead.hooks.add(HookEvent.SubagentStop, stops.append)
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "not_started"
    assert record.started_at is not None
    assert p.requests_for("worker") == []
    assert [s.status for s in stops] == ["not_started"]
    assert result.stop_reason == "interrupted"


# -- events in the lead's stream ----------------------------------------------------------------


async def test_child_events_are_forwarded_with_delegation_ids(tmp_path: Path) -> None:
    noop = make_tool("noop", read_only=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate_many(("worker", "a"), ("helper", "b")), reply("ok")],
            "worker": [tool_call("noop", {}), "w done"],
            "helper": ["h done"],
        },
        [definition("worker", tools=[noop]), definition("helper")],
        tmp_path,
    )
    events = [e async for e in lead.run_stream("go")]
    records = {r.agent_name: r for r in lead.list_subagents()}
    lead_run = lead.last_result.run_id if lead.last_result else None
    for name, record in records.items():
        mine = [e for e in events if e.delegation_id == record.delegation_id]
        kinds = [type(e).__name__ for e in mine]
        assert kinds[0] == "DelegationStart", kinds
        assert kinds[-1] == "DelegationEnd", kinds
        assert "ModelRequestEvent" in kinds
        assert "TextDelta" in kinds  # the child's streamed text, live
        assert "StopEvent" in kinds
        for e in mine:
            assert e.parent_agent_id == lead.agent_id
            assert e.parent_run_id == lead_run
            assert e.agent_name == name
            assert e.agent_id == record.agent_id
            assert e.run_id == record.run_id
        end = mine[-1]
        assert isinstance(end, DelegationEnd)
        assert end.status == "completed"
        assert end.usage == record.usage
        start = mine[0]
        assert isinstance(start, DelegationStart)
        assert start.tool_call_id == record.tool_call_id
    worker_tools = [
        e
        for e in events
        if isinstance(e, ToolStart) and e.delegation_id == records["worker"].delegation_id
    ]
    assert [e.tool_name for e in worker_tools] == ["noop"]
    # the lead's own events carry no delegation id, and its stop event comes last
    lead_requests = [
        e for e in events if isinstance(e, ModelRequestEvent) and e.agent_id == lead.agent_id
    ]
    assert len(lead_requests) == 2
    assert all(e.delegation_id is None for e in lead_requests)
    assert isinstance(events[-1], StopEvent)
    assert events[-1].agent_id == lead.agent_id


async def test_denied_delegate_call_leaves_no_record(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
    )
    denied: list[str] = []

    def veto_once(h: Any) -> Any:
        from deputy_runtime import HookDecision

        if h.tool_name == DELEGATE and h.agent_id == lead.agent_id and not denied:
            denied.append(h.tool_call_id)
            return HookDecision.deny("not now")
        return None

    lead.hooks.add(HookEvent.PreToolUse, veto_once)
    await lead.run("go")
    first, second = delegate_results(p)
    assert first.error == "Denied by hook: not now"
    assert outcome(second)["status"] == "completed"
    [record] = lead.list_subagents()
    assert record.tool_call_id != denied[0]


async def test_child_usage_is_part_of_lead_usage(tmp_path: Path) -> None:
    noop = make_tool("noop", read_only=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("noop", {}), tool_call("noop", {}), "done"],
        },
        [definition("worker", tools=[noop])],
        tmp_path,
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert record.usage.requests == 3
    assert record.usage.tool_calls == 2
    assert record.usage.input_tokens == 30
    assert record.usage.output_tokens == 15
    # lead: 2 own requests + 1 own tool call (the delegate call) + the child's usage
    assert result.usage.requests == 5
    assert result.usage.tool_calls == 1 + 2
    assert result.usage.input_tokens == 20 + 30
    assert result.usage.output_tokens == 10 + 15
    [child] = lead.get_subagent_results()
    assert child is not None
    assert child.usage == record.usage


async def test_definition_model_rules(tmp_path: Path) -> None:
    from deputy_runtime.chat import register_provider, unregister_provider

    other = ScriptedProvider({"spec_w": ["from the registered provider"]}, model="unset")
    made: list[str] = []

    def factory(model: str, **kwargs: Any) -> ScriptedProvider:
        made.append(model)
        return other.with_model(model)

    register_provider("deleg-test-provider", factory)
    try:
        provider = ScriptedProvider(
            {
                "lead": [
                    delegate("inherit_w"),
                    delegate("bare_w"),
                    delegate("spec_w"),
                    reply("ok"),
                ],
                "inherit_w": ["i"],
                "bare_w": ["b"],
            },
            model="lead-model",
        )
        lead = LeadAgent(
            Chat(provider, params={"temperature": 0.5}),
            [
                definition("inherit_w"),
                definition("bare_w", model="other-model", params={"max_tokens": 7}),
                definition("spec_w", model="deleg-test-provider/special"),
            ],
            working_dir=tmp_path,
        )
        events = [e async for e in lead.run_stream("go")]
    finally:
        unregister_provider("deleg-test-provider")
    models = {
        e.agent_name: e.model
        for e in events
        if isinstance(e, ModelRequestEvent) and e.delegation_id is not None
    }
    assert models == {"inherit_w": "lead-model", "bare_w": "other-model", "spec_w": "special"}
    assert made == ["special"]
    assert provider.requests_for("inherit_w")[0].params == {"temperature": 0.5}
    assert provider.requests_for("bare_w")[0].params == {"temperature": 0.5, "max_tokens": 7}
    assert provider.requests_for("spec_w") == []
    assert [o["answer"] for o in map(outcome, delegate_results(provider))][2] == (
        "from the registered provider"
    )


# -- a host that stops reading the stream --------------------------------------------------------


def _only_generator_exit(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_generator_exit(e) for e in exc.exceptions)
    return isinstance(exc, GeneratorExit)


async def _break_at_delegation_start(lead: LeadAgent) -> BaseException | None:
    try:
        async with aclosing(lead.run_stream("go")) as stream:
            async for event in stream:
                if isinstance(event, DelegationStart):
                    break
    except BaseException as exc:
        if not _only_generator_exit(exc):
            raise
        return exc
    return None


def _slow_owned_lead(tmp_path: Path, factory: Any, **kwargs: Any) -> LeadAgent:
    async def worker(request: ModelRequest) -> Any:
        for _ in range(50):
            await anyio.sleep(0)
        return tool_call("effect", {})

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": worker},
        [definition("worker", max_requests=3)],
        tmp_path,
        **kwargs,
    )
    return lead


async def test_breaking_out_of_the_stream_cancels_and_cleans_up(tmp_path: Path) -> None:
    from deputy_runtime import DelegationPolicy
    from deputy_runtime.runtime import IN_PROCESS_LEASES
    from tests.runtime.helpers import Cleanups

    factory = Cleanups(lambda: [make_tool("effect", read_only=True)], async_cleanup=True)
    lead = _slow_owned_lead(
        tmp_path, factory, delegation_policy=DelegationPolicy("owned", resources=factory)
    )
    await _break_at_delegation_start(lead)
    factory.assert_exactly_once()
    assert len(factory.made) == 1
    assert [r.status for r in lead.list_subagents()] == ["stopped"]
    assert not lead.running
    assert lead.delegations.active == {}
    exclusive = _slow_owned_lead(
        tmp_path, None, delegation_policy=DelegationPolicy("exclusive", resource_key="stream")
    )
    await _break_at_delegation_start(exclusive)
    assert IN_PROCESS_LEASES.held() == {}


async def test_breaking_out_of_the_stream_raises_nothing(tmp_path: Path) -> None:
    lead = _slow_owned_lead(tmp_path, None)
    assert await _break_at_delegation_start(lead) is None


async def test_every_delegation_end_has_a_start(tmp_path: Path) -> None:
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker", mcp_servers=["srv"])],  # fails during setup
        tmp_path,
    )
    events = [e async for e in lead.run_stream("go")]
    started = {e.delegation_id for e in events if isinstance(e, DelegationStart)}
    ended = [e.delegation_id for e in events if isinstance(e, DelegationEnd)]
    assert ended
    assert set(ended) <= started


async def test_interrupt_while_idle_does_not_poison_the_next_run(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
    )
    lead.interrupt("too late")
    result = await lead.run("go")
    assert p.requests == 3
    assert result.stop_reason == "complete"
    assert [r.status for r in lead.list_subagents()] == ["completed"]
