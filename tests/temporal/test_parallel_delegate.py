"""``parallel_delegate`` on Temporal: a batch workflow with one child workflow per
responder, checked against the in-process ``LeadAgent.parallel_delegate`` of the same
batch on the offline ``test`` model, by replay, and from a trio host."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from deputy_runtime import (
    AgentDefinition,
    DefinitionError,
    DelegationBindingError,
    LeadAgent,
    ParallelResult,
    PermissionCeilingError,
    PermissionMode,
    Permissions,
    UsageLimits,
    chat,
    tools_file,
)
from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ModelRequest,
    TestProvider,
    register_provider,
    unregister_provider,
)
from deputy_runtime.errors import BadRequestError
from deputy_runtime.runtime import DelegationEnd, DelegationStart, decode_event
from deputy_runtime.temporal import (
    EVENTS_QUERY,
    INTERRUPT_SIGNAL,
    DeputyActivities,
    TemporalBridge,
    data_converter,
    deputy_worker,
    parallel_delegate,
)
from tests.temporal.helpers import (
    assert_replays,
    gated_model,
    most_children_open,
    was_signalled,
)

pytestmark = pytest.mark.anyio

TASKS = [("alpha", "t1"), ("beta", "t2"), ("alpha", "t3"), ("gamma", "t4"), ("beta", "t5")]


class _Refusing(TestProvider):
    """A real provider that rejects every request (a 400 is never retried)."""

    __test__ = False

    async def complete(self, request: ModelRequest) -> Any:
        raise BadRequestError("refused by the test provider", status=400)


@pytest.fixture(autouse=True, scope="module")
def _refusing_provider() -> Iterator[None]:
    """The ``refusing`` provider for this module, removed afterwards so later tests see
    the registry as it was."""
    register_provider("refusing", lambda model, **_: _Refusing(model=model), replace=True)
    yield
    unregister_provider("refusing")


def _definitions(**models: str) -> list[AgentDefinition]:
    return [
        AgentDefinition(n, f"{n} answers.", f"You are {n}.", model=models.get(n, "inherit"))
        for n in ("alpha", "beta", "gamma")
    ]


async def _in_process(
    definitions: list[AgentDefinition], limits: UsageLimits, max_active: int
) -> ParallelResult:
    lead = LeadAgent(chat("test"), definitions)
    return await lead.parallel_delegate(TASKS, max_active=max_active, usage_limits=limits)


def _outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    ids = ("delegation_id", "agent_id", "run_id", "parent_agent_id", "parent_run_id")
    return {k: v for k, v in outcome.items() if k not in ids}


def _responder(result: Any) -> tuple[object, ...] | None:
    if result is None:
        return None
    return (result.agent_name, result.response, result.turns, result.usage, result.stop_reason)


def _assert_same(got: ParallelResult, expected: ParallelResult) -> None:
    assert got.names == expected.names
    assert got.statuses == expected.statuses
    assert got.errors == expected.errors
    assert [_outcome(o) for o in got.outcomes] == [_outcome(o) for o in expected.outcomes]
    assert [_responder(r) for r in got.results] == [_responder(r) for r in expected.results]
    assert [r.limits if r else None for r in got.results] == [
        r.limits if r else None for r in expected.results
    ]
    run, want = got.run, expected.run
    assert (run.stop_reason, run.usage, run.limits) == (want.stop_reason, want.usage, want.limits)
    assert len(set(got.delegation_ids)) == len(TASKS)


@pytest.mark.parametrize(
    ("limits", "max_active", "statuses", "stop_reason"),
    [
        # Two at a time, one request each: three run, then the requests are spent.
        (
            UsageLimits(max_requests=3),
            2,
            ("completed",) * 3 + ("not_started",) * 2,
            "request_limit",
        ),
        # One at a time on a token budget: each takes what is left (40, 25, 10 tokens);
        # the third's only reply (15 tokens) passes its 10 and still answers, and then the
        # batch's budget is spent.
        (
            UsageLimits(max_total_tokens=40),
            1,
            ("completed",) * 3 + ("not_started",) * 2,
            "total_token_limit",
        ),
    ],
)
async def test_a_batch_matches_the_in_process_fan_out(
    client: Client,
    task_queue: str,
    running_worker: DeputyActivities,
    limits: UsageLimits,
    max_active: int,
    statuses: tuple[str, ...],
    stop_reason: str,
) -> None:
    definitions = _definitions()
    expected = await _in_process(definitions, limits, max_active)
    workflow_id = f"batch-{uuid.uuid4().hex}"
    got = await parallel_delegate(
        client,
        TASKS,
        definitions,
        model="test",
        task_queue=task_queue,
        workflow_id=workflow_id,
        usage_limits=limits,
        max_active=max_active,
    )
    _assert_same(got, expected)
    assert got.statuses == statuses
    assert got.run.stop_reason == stop_reason
    # Every responder that ran is a child workflow of the batch, and all histories replay.
    ran = [i for i, r in zip(got.delegation_ids, got.results, strict=True) if r is not None]
    for delegation_id in ran:
        child = client.get_workflow_handle(f"{workflow_id}/{delegation_id}")
        assert (await child.describe()).status is not None
    # Never more responders open at once than max_active, and the slots were used.
    assert await most_children_open(client, workflow_id) == max_active
    ids = [workflow_id, *(f"{workflow_id}/{i}" for i in ran)]
    assert await assert_replays(client, ids) == 1 + len(ran)


async def test_a_failing_responder_keeps_its_siblings(
    client: Client, task_queue: str, running_worker: DeputyActivities
) -> None:
    definitions = _definitions(beta="refusing/x")
    expected = await _in_process(definitions, UsageLimits(), 2)
    workflow_id = f"batch-{uuid.uuid4().hex}"
    got = await parallel_delegate(
        client, TASKS, definitions, model="test", task_queue=task_queue, workflow_id=workflow_id
    )
    assert got.statuses == expected.statuses
    assert got.statuses == ("completed", "failed", "completed", "completed", "failed")
    assert [o["stop_reason"] for o in got.outcomes] == [o["stop_reason"] for o in expected.outcomes]
    assert got.run.stop_reason == expected.run.stop_reason == "delegation_error"
    assert got.run.usage == expected.run.usage
    for i in (1, 4):
        assert "refused by the test provider" in (got.errors[i] or "")
    for i in (0, 2, 3):
        result = got.results[i]
        assert result is not None
        assert result.response == (expected.results[i] or result).response
    assert await assert_replays(client, [workflow_id]) == 1


async def test_an_interrupted_batch_starts_no_further_responder(
    client: Client, task_queue: str, running_worker: DeputyActivities
) -> None:
    gate = gated_model()
    definitions = [AgentDefinition("slow", "Slow.", "You are slow.", model="gated/x")]
    workflow_id = f"batch-{uuid.uuid4().hex}"
    batch = asyncio.create_task(
        parallel_delegate(
            client,
            [("slow", "one"), ("slow", "two"), ("slow", "three")],
            definitions,
            model="test",
            task_queue=task_queue,
            workflow_id=workflow_id,
            max_active=1,
        )
    )
    handle = client.get_workflow_handle(workflow_id)
    try:
        await asyncio.wait_for(gate.started.wait(), 120)
        # The first responder is waiting for its reply: the batch's log shows it started.
        [start] = [decode_event(e) for e in await handle.query(EVENTS_QUERY, 0)]
        assert isinstance(start, DelegationStart)
        await handle.signal(INTERRUPT_SIGNAL, "enough")
        # The batch forwards the interrupt to its running responder.
        child = f"{workflow_id}/{start.delegation_id}"
        deadline = asyncio.get_running_loop().time() + 120
        while not await was_signalled(client, child):
            assert asyncio.get_running_loop().time() < deadline, "the child was not signalled"
            await asyncio.sleep(0.2)
    finally:
        gate.opened.set()
    got = await asyncio.wait_for(batch, 120)
    # The running responder got its answer (it had no boundary left); the others never
    # started, and the batch says it was interrupted.
    assert got.statuses == ("completed", "not_started", "not_started")
    assert got.run.stop_reason == "interrupted"
    assert got.run.usage.requests == 1
    assert start.delegation_id == got.delegation_ids[0]
    events = [decode_event(e) for e in await handle.query(EVENTS_QUERY, 1)]
    assert isinstance(events[-1], DelegationEnd)
    assert events[-1].status == "completed"
    with pytest.raises(WorkflowQueryFailedError, match="offset must be a whole number"):
        await handle.query(EVENTS_QUERY, -1)
    assert await assert_replays(client, [workflow_id]) == 1


async def test_bad_batches_are_refused_before_anything_starts(
    client: Client, task_queue: str, workdir: Path
) -> None:
    files = {t.name: t for t in tools_file(workdir)}
    tooled = AgentDefinition("tooled", "Reads.", "You read.", tools=(files["read_file"],))
    wide = AgentDefinition("wide", "Edits.", "You edit.", permission_mode="full")
    definitions = [*_definitions(), tooled, wide]
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"tasks": [("ghost", "x")]}, DefinitionError, "Unknown AgentDefinitions: ghost"),
        ({"tasks": [("tooled", "x")]}, DelegationBindingError, "'tooled' is not stateless"),
        ({"tasks": []}, ValueError, "tasks must not be empty"),
        ({"max_active": 0}, ValueError, "max_active must be a positive int"),
        ({"usage_limits": "many"}, TypeError, "usage_limits must be a UsageLimits"),
        (
            {"tasks": [("wide", "x")], "permissions": Permissions(mode=PermissionMode.READONLY)},
            PermissionCeilingError,
            "cannot delegate with mode full",
        ),
    ]
    lead = LeadAgent(chat("test"), definitions)
    for overrides, error, message in cases:
        arguments: dict[str, Any] = {"tasks": TASKS, **overrides}
        workflow_id = f"bad-{uuid.uuid4().hex}"
        with pytest.raises(error, match=message):
            await parallel_delegate(
                client,
                arguments.pop("tasks"),
                definitions,
                model="test",
                task_queue=task_queue,
                workflow_id=workflow_id,
                **arguments,
            )
        with pytest.raises(RPCError):  # no batch workflow was started
            await client.get_workflow_handle(workflow_id).describe()
        if "permissions" in overrides:
            continue  # a lead-level setting in-process, not an argument of its batch
        in_process = {k: v for k, v in overrides.items() if k != "tasks"}
        with pytest.raises(error, match=message):
            await lead.parallel_delegate(overrides.get("tasks", TASKS), **in_process)


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_a_trio_host_runs_a_batch_through_the_bridge(
    temporal_address: str, workdir: Path
) -> None:
    task_queue = f"deputy-batch-{uuid.uuid4().hex}"
    definitions = _definitions()

    async def run_on_temporal() -> ParallelResult:
        bridge_client = await Client.connect(temporal_address, data_converter=data_converter)
        activities = DeputyActivities(tools_file(workdir), working_dir=workdir)
        async with deputy_worker(bridge_client, activities, task_queue=task_queue):
            return await parallel_delegate(
                bridge_client,
                {"alpha": "one", "gamma": "two"},
                definitions,
                model="test",
                task_queue=task_queue,
                workflow_id=f"batch-trio-{uuid.uuid4().hex}",
                max_active=1,
            )

    async with TemporalBridge() as bridge:
        got = await bridge.call(run_on_temporal)
    assert got.names == ("alpha", "gamma")
    assert got.statuses == ("completed", "completed")
    assert got.run.stop_reason == "complete"
    assert got.run.usage.requests == 2


class _Scorer(TestProvider):
    """Answers each task as a score: prose first, then the JSON (one retry each)."""

    __test__ = False

    async def complete(self, request: ModelRequest) -> Any:
        task = request.turns[0].text
        retried = any(t.role == "user" for t in request.turns[1:])
        text = f'{{"task_length": {len(task)}}}' if retried else "It is long."
        return AssistantTurn((ContentText(text),), self.usage, finish_reason="stop")


async def test_a_structured_batch_matches_the_in_process_fan_out(
    client: Client, task_queue: str, running_worker: DeputyActivities
) -> None:
    name = f"scorer{uuid.uuid4().hex[:8]}"
    register_provider(name, lambda model="m", **_: _Scorer(model=model), default_model="m")
    try:
        schema = {
            "type": "object",
            "properties": {"task_length": {"type": "integer"}},
            "required": ["task_length"],
        }
        definitions = [
            AgentDefinition(n, f"{n} scores.", f"You are {n}.", output_schema=schema)
            for n in ("alpha", "beta", "gamma")
        ]
        # Each responder needs two requests (prose, then JSON): 1 + output_retries (3)
        # are reserved for each, all five at once (a fair share of 15 is 3).
        limits = UsageLimits(max_requests=15)
        lead = LeadAgent(chat(f"{name}/m"), definitions)
        expected = await lead.parallel_delegate(TASKS, max_active=5, usage_limits=limits)
        got = await parallel_delegate(
            client, TASKS, definitions, model=f"{name}/m", task_queue=task_queue,
            workflow_id=f"batch-{uuid.uuid4().hex}", usage_limits=limits, max_active=5,
        )  # fmt: skip
    finally:
        unregister_provider(name)
    assert expected.statuses == ("completed",) * len(TASKS)
    assert [r.usage.requests for r in expected.results if r is not None] == [2] * len(TASKS)
    assert [r.limits.max_requests for r in got.results if r is not None] == [3] * len(TASKS)
    _assert_same(got, expected)
    assert got.outputs == expected.outputs
    assert all(isinstance(o, dict) and o["task_length"] > 0 for o in got.outputs)
