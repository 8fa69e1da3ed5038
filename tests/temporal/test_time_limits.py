"""Time limits on the durable path: ``UsageLimits.max_seconds`` on a lead and a batch and
``DelegationPolicy.max_seconds`` per delegation, kept as durable timers in workflow time.

A request of the ``gated`` model (tests/temporal/helpers.py) holds until the test opens
its gate, which it never does here: only the time limits end those runs. Each scenario
runs in-process first (the same definitions, the same gated model) and its records are
compared; no test asserts how long anything took, only stop reasons, statuses, usage,
limits and answers, and every history replays.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import TypedDict, Unpack

import msgspec
import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentResult,
    BudgetExceeded,
    DelegationPolicy,
    LeadAgent,
    UsageLimits,
    chat,
    tool,
    tools_file,
)
from deputy_runtime.chat import (
    AssistantTurn,
    ContentToolResult,
    ModelRequest,
    TestProvider,
    Turn,
    register_provider,
)
from deputy_runtime.runtime import StopEvent, decode_event
from deputy_runtime.temporal import (
    EVENTS_QUERY,
    DeputyActivities,
    LeadOutput,
    SubagentInput,
    deputy_worker,
    lead_input,
    parallel_delegate,
    raise_on_exceed,
    start_lead,
)
from tests.temporal.helpers import (
    assert_replays,
    chain_run_ids,
    comparable_record,
    gated_model,
    run_workflow_ids,
)

pytestmark = pytest.mark.anyio

TASK = "Look into it."
#: Long enough for the lead's first request and its delegations to start on a loaded
#: machine; the gated requests hold the runs past it whatever the machine does.
LEAD_SECONDS = 6.0
CHILD_SECONDS = 3.0
CUT_OFF = "The run was cancelled while this tool call was running"


def _definition(name: str, model: str = "gated/test") -> AgentDefinition:
    return AgentDefinition(
        name, f"The {name}.", f"You are the {name}.", model=model, max_requests=2
    )


def _tool_results(turn: Turn) -> list[ContentToolResult]:
    return [c for c in turn.contents if isinstance(c, ContentToolResult)]


class _LeadOptions(TypedDict, total=False):
    """The ``lead_input`` options these scenarios set (the rest keep their defaults)."""

    tools: tuple[str, ...]
    usage_limits: UsageLimits
    max_active_delegations: int
    continue_as_new_after: int
    delegation_policy: DelegationPolicy


async def _durable(
    client: Client,
    task_queue: str,
    prefix: str,
    *,
    sub_agents: list[AgentDefinition],
    model: str = "test",
    **options: Unpack[_LeadOptions],
) -> tuple[str, LeadOutput]:
    workflow_id = f"{prefix}-{uuid.uuid4().hex}"
    request = lead_input(TASK, sub_agents, model=model, **options)
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    return workflow_id, await handle.result()


async def test_a_hung_lead_request_ends_the_run_time_limit_as_in_process(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    gate = gated_model()
    limits = UsageLimits(max_requests=5, max_seconds=2.0, on_exceed="error")
    definitions = [_definition("worker", "test")]
    lead = LeadAgent(chat("gated/test"), definitions, usage_limits=limits, working_dir=workdir)
    with pytest.raises(BudgetExceeded, match="time limit") as raised:
        await lead.run(TASK)
    expected = raised.value.result
    assert isinstance(expected, AgentResult)

    workflow_id, out = await _durable(
        client,
        task_queue,
        "time-lead",
        sub_agents=definitions,
        model="gated/test",
        usage_limits=limits,
    )
    assert gate.started.is_set()
    assert not gate.opened.is_set()
    result = out.result
    assert (result.stop_reason, result.error) == ("time_limit", None)
    assert (result.stop_reason, result.usage, result.response, result.limits) == (
        expected.stop_reason,
        expected.usage,
        expected.response,
        expected.limits,
    )
    assert result.usage.requests == 1  # the request cut off was sent, so it counts
    assert out.subagents == ()
    # on_exceed="error": the workflow returns its output; the client raises as in-process.
    with pytest.raises(BudgetExceeded, match="time limit") as durable:
        raise_on_exceed(result)
    assert durable.value.stop_reason == "time_limit"
    events = [
        decode_event(e)
        for e in await client.get_workflow_handle(workflow_id).query(EVENTS_QUERY, 0)
    ]
    assert isinstance(events[-1], StopEvent)
    assert events[-1].stop_reason == "time_limit"
    assert await assert_replays(client, [workflow_id]) == 1


async def test_a_delegation_runs_out_of_its_own_time_softly(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    gated_model()
    definitions = [_definition("worker"), _definition("helper", "test")]
    limits = UsageLimits(max_requests=10)
    policy = DelegationPolicy(max_seconds=CHILD_SECONDS)
    lead = LeadAgent(
        chat("test"),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        delegation_policy=policy,
    )
    expected = await lead.run(TASK)
    workflow_id, out = await _durable(
        client,
        task_queue,
        "time-child",
        sub_agents=definitions,
        usage_limits=limits,
        delegation_policy=policy,
    )
    assert out.result.stop_reason == expected.stop_reason == "complete"
    assert out.result.usage == expected.usage
    assert [comparable_record(r) for r in out.subagents] == [
        comparable_record(r) for r in lead.list_subagents()
    ]
    by_name = {r.agent_name: r for r in out.subagents}
    worker = by_name["worker"]
    assert (worker.status, worker.stop_reason) == ("stopped", "time_limit")
    assert worker.limits is not None
    assert worker.limits.max_seconds == CHILD_SECONDS
    assert by_name["helper"].status == "completed"
    # The lead's model got the stopped delegation's outcome as a result, not an error.
    answers = {r.request_id: r for t in out.result.turns for r in _tool_results(t)}
    answer = answers[worker.tool_call_id or ""]
    assert answer.error is None
    assert json.loads(str(answer.value))["stop_reason"] == "time_limit"
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 3


async def test_the_lead_time_limit_bounds_and_ends_its_delegations(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    gated_model()
    # One slot: "worker" runs (its request held at the gate), "helper" waits queued.
    definitions = [_definition("worker"), _definition("helper")]
    limits = UsageLimits(max_requests=10, max_seconds=LEAD_SECONDS)
    lead = LeadAgent(
        chat("test"),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        max_active_delegations=1,
    )
    expected = await lead.run(TASK)
    workflow_id, out = await _durable(
        client,
        task_queue,
        "time-both",
        sub_agents=definitions,
        usage_limits=limits,
        max_active_delegations=1,
    )
    result = out.result
    assert result.stop_reason == expected.stop_reason == "time_limit"
    assert result.usage == expected.usage
    assert result.usage.requests == 2  # the lead's first, the running child's one
    worker, helper = out.subagents
    in_worker, in_helper = lead.list_subagents()
    assert (worker.status, in_worker.status) == ("stopped", "stopped")
    assert worker.stop_reason in {"time_limit", "interrupted"}
    # The child's limit is what the lead had left when it started: never more.
    assert worker.limits is not None
    assert worker.limits.max_seconds is not None
    assert 0 < worker.limits.max_seconds <= LEAD_SECONDS
    assert comparable_record(helper) == comparable_record(in_helper)
    assert (helper.status, helper.stop_reason) == ("not_started", "not_started")
    # Both delegate calls were running (one queued) when the lead was cut off.
    last = _tool_results(result.turns[-1])
    expected_last = _tool_results(expected.turns[-1])
    assert [r.error and r.error.startswith(CUT_OFF) for r in last] == [True, True]
    assert [r.error for r in last] == [r.error for r in expected_last]
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


async def test_a_batch_time_limit_stops_running_responders_and_starts_no_more(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    gated_model()
    definitions = [_definition("w")]
    tasks = [("w", str(i)) for i in range(5)]
    limits = UsageLimits(max_seconds=CHILD_SECONDS)
    lead = LeadAgent(chat("test"), definitions, working_dir=workdir)
    expected = await lead.parallel_delegate(tasks, max_active=2, usage_limits=limits)
    workflow_id = f"time-batch-{uuid.uuid4().hex}"
    result = await parallel_delegate(
        client,
        tasks,
        definitions,
        model="test",
        task_queue=task_queue,
        workflow_id=workflow_id,
        usage_limits=limits,
        max_active=2,
    )
    assert result.run.stop_reason == expected.run.stop_reason == "time_limit"
    assert result.statuses == expected.statuses
    assert result.statuses[:2] == ("stopped", "stopped")
    assert result.statuses[2:] == ("not_started",) * 3
    assert result.run.usage == expected.run.usage
    handle = client.get_workflow_handle(workflow_id)
    ids = [workflow_id] + [f"{workflow_id}/{d}" for d in result.delegation_ids[:2]]
    assert await handle.describe()
    assert await assert_replays(client, ids) == 3


async def test_policy_max_seconds_bounds_each_responder(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    gated_model()
    definitions = [_definition("slow"), _definition("quick", "test")]
    tasks = [("slow", "wait"), ("quick", "answer")]
    policy = DelegationPolicy(max_seconds=CHILD_SECONDS)
    lead = LeadAgent(chat("test"), definitions, working_dir=workdir, delegation_policy=policy)
    expected = await lead.parallel_delegate(tasks)
    workflow_id = f"time-batch-policy-{uuid.uuid4().hex}"
    result = await parallel_delegate(
        client,
        tasks,
        definitions,
        model="test",
        task_queue=task_queue,
        workflow_id=workflow_id,
        delegation_policy=policy,
    )
    assert result.statuses == expected.statuses == ("stopped", "completed")
    assert [o["stop_reason"] for o in result.outcomes] == ["time_limit", "complete"]
    assert result.run.stop_reason == expected.run.stop_reason == "delegation_stopped"
    limits = [r.limits for r in result.results if r is not None]
    assert [x.max_seconds for x in limits] == [CHILD_SECONDS, CHILD_SECONDS]
    ids = [workflow_id] + [f"{workflow_id}/{d}" for d in result.delegation_ids]
    assert await assert_replays(client, ids) == 3


@tool(read_only=True)
async def hold() -> str:
    """Wait for a release that never comes (only a time limit ends it)."""
    await asyncio.Event().wait()
    return "released"


@tool(read_only=True)
async def ping() -> str:
    """Answer at once."""
    return "pong"


async def test_a_tool_running_at_the_deadline_is_answered_as_cut_off(
    client: Client, task_queue: str, workdir: Path
) -> None:
    definitions = [_definition("helper", "test")]
    limits = UsageLimits(max_requests=5, max_seconds=CHILD_SECONDS)
    lead = LeadAgent(
        chat("test"), definitions, tools=[hold, ping], usage_limits=limits, working_dir=workdir
    )
    expected = await lead.run(TASK)
    activities = DeputyActivities([hold, ping], working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        workflow_id, out = await _durable(
            client,
            task_queue,
            "time-tool",
            sub_agents=definitions,
            usage_limits=limits,
            tools=("hold", "ping"),
        )
    result = out.result
    assert result.stop_reason == expected.stop_reason == "time_limit"
    assert result.usage == expected.usage

    def answers(turns: tuple[Turn, ...]) -> dict[str, tuple[object, ...]]:
        names = {c.id: c.name for c in turns[-2].tool_requests}
        return {
            names[r.request_id]: (r.error, r.value if names[r.request_id] == "ping" else None)
            for r in _tool_results(turns[-1])
        }

    got = answers(result.turns)
    assert got == answers(expected.turns)
    assert got["ping"] == (None, "pong")  # finished before the deadline: its result stays
    assert str(got["hold"][0]).startswith(CUT_OFF)
    # The delegation finished before the deadline too, so the model keeps its outcome.
    assert got["delegate_to_agent"][0] is None
    assert [r.status for r in out.subagents] == ["completed"]
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


class HangsAfterTools(TestProvider):
    """The ``test`` model until its tool calls are answered; then it never answers."""

    __test__ = False
    __slots__ = ()

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        if any(isinstance(c, ContentToolResult) for t in request.turns for c in t.contents):
            await asyncio.Event().wait()
        return await super().complete(request)


async def test_a_delegation_keeps_its_deadline_across_continue_as_new(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    register_provider(
        "hangs", lambda model, **_: HangsAfterTools(model=model, name="hangs"), replace=True
    )
    files = {t.name: t for t in tools_file(workdir)}
    definitions = [
        AgentDefinition(
            "reader", "Reads.", "You read.", model="hangs/test", tools=(files["list_files"],)
        )
    ]
    limits = UsageLimits(max_requests=10)
    policy = DelegationPolicy(max_seconds=CHILD_SECONDS)
    lead = LeadAgent(
        chat("test"),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        delegation_policy=policy,
    )
    expected = await lead.run(TASK)
    # The child continues as new after its tool turn, then its second request hangs
    # until the deadline its first run set.
    workflow_id, out = await _durable(
        client,
        task_queue,
        "time-child-can",
        sub_agents=definitions,
        usage_limits=limits,
        delegation_policy=policy,
        continue_as_new_after=1,
    )
    assert out.result.stop_reason == expected.stop_reason == "complete"
    assert [comparable_record(r) for r in out.subagents] == [
        comparable_record(r) for r in lead.list_subagents()
    ]
    [record] = out.subagents
    assert (record.status, record.stop_reason) == ("stopped", "time_limit")
    child_id = f"{workflow_id}/{record.delegation_id}"
    runs = await chain_run_ids(client, child_id)
    assert len(runs) >= 2
    deadlines = set()
    for run_id in runs[1:]:
        history = await client.get_workflow_handle(child_id, run_id=run_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        carried = msgspec.json.decode(started.input.payloads[0].data, type=SubagentInput)
        assert carried.checkpoint is not None
        deadlines.add(carried.checkpoint.deadline)
    assert len(deadlines) == 1
    assert None not in deadlines
    assert await assert_replays(client, [child_id], run_ids=runs) == len(runs)
