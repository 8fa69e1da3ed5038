"""Lead control on a real Temporal dev server: following a run's delegations live
(``follow_run``), cancelling a run with delegations in flight, and continue-as-new."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from deputy_runtime import AgentDefinition, UsageLimits, decode_event, encode_event, tool
from deputy_runtime.runtime import (
    DelegationStart,
    Event,
    ModelRequestEvent,
    RunStart,
    StopEvent,
    ToolStart,
)
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    LeadWorkflow,
    SubagentInput,
    SubagentOutput,
    SubagentWorkflow,
    deputy_worker,
    follow_run,
    lead_input,
    start_lead,
)
from tests.temporal.helpers import (
    assert_replays,
    chain_run_ids,
    comparable_record,
    comparable_result,
    run_workflow_ids,
)
from tests.temporal.test_fanout import TASK, _definitions
from tests.temporal.test_run_cli import REPO_ROOT, _env

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 120.0  # generous: the machine is shared; every wait is on a condition
#: A continue-as-new threshold every workflow of the fan-out passes at its first boundary.
SMALL = 10


class Gate:
    """A tool that blocks until released, counting the calls that reached it and the
    calls that left it (returned or were cancelled)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.started = 0
        self.left = 0
        self.all_started = asyncio.Event()
        self.release = asyncio.Event()

        @tool(read_only=True)
        async def hold() -> str:
            """Wait for the test to let the call finish."""
            self.started += 1
            if self.started >= self.expected:
                self.all_started.set()
            try:
                await self.release.wait()
            finally:
                self.left += 1
            return "released"

        self.tool = hold

    def definitions(self, *names: str) -> list[AgentDefinition]:
        return [
            AgentDefinition(n, f"The {n}.", "You wait.", tools=(self.tool,), max_requests=3)
            for n in names
        ]


@pytest.fixture
async def gate(client: Client, task_queue: str, workdir: Path) -> AsyncIterator[Gate]:
    gate = Gate(expected=3)
    activities = DeputyActivities([gate.tool], working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        yield gate
        gate.release.set()  # never leave a held call behind


def _per_agent(events: list[Event]) -> dict[str, list[bytes]]:
    order: dict[str, list[bytes]] = {}
    for e in events:
        order.setdefault(e.agent_id, []).append(encode_event(e))
    return order


async def test_follow_run_yields_a_running_childs_events_live_and_each_once(
    client: Client, task_queue: str, gate: Gate
) -> None:
    gate.expected = 2
    request = lead_input(
        "Do the work", gate.definitions("one", "two"), model="test", usage_limits=UsageLimits(20)
    )
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    followed: list[Event] = []
    held: set[str] = set()
    with anyio.fail_after(WAIT_SECONDS):
        async for event in follow_run(client, handle.id, poll_interval=0.05):
            followed.append(event)
            if isinstance(event, ToolStart) and event.tool_name == "hold":
                assert event.delegation_id is not None
                held.add(event.delegation_id)
                # Both children are still inside their held call: nothing reached the
                # lead's log yet, the events came from the children's own logs.
                if len(held) == 2:
                    assert not gate.release.is_set()
                    assert gate.started == 2
                    requests = [e for e in followed if isinstance(e, ModelRequestEvent)]
                    assert {e.delegation_id for e in requests} >= held
                    gate.release.set()
    assert len(held) == 2
    out = await handle.result()
    final = [e for e in followed if isinstance(e, StopEvent) and e.delegation_id is None]
    assert final
    assert final[-1] is followed[-1]
    assert final[-1].agent_id == out.result.agent_id
    # Every event exactly once, each agent's in order: the lead's complete log, where
    # the children's events were copied when they settled.
    log: list[str] = await handle.query("events", 0)
    assert Counter(encode_event(e).decode() for e in followed) == Counter(log)
    assert _per_agent(followed) == _per_agent([decode_event(e) for e in log])


async def test_cancel_reaches_every_running_child(
    client: Client, task_queue: str, gate: Gate
) -> None:
    request = lead_input(
        "Do the work",
        gate.definitions("one", "two", "three"),
        model="test",
        usage_limits=UsageLimits(20),
    )
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    with anyio.fail_after(WAIT_SECONDS):
        await gate.all_started.wait()  # every child is inside its held tool call
    events = [decode_event(t) for t in await handle.query("events", 0)]
    starts = [e for e in events if isinstance(e, DelegationStart)]
    assert len(starts) == 3
    await handle.cancel()
    with anyio.fail_after(WAIT_SECONDS), pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert isinstance(failure.value.cause, CancelledError)
    child_ids = [f"{handle.id}/{e.delegation_id}" for e in starts]
    for child_id in child_ids:
        description = await client.get_workflow_handle(child_id).describe()
        assert description.status == WorkflowExecutionStatus.CANCELED, child_id
        assert description.raw_description.pending_activities == []
    # The held calls were cancelled on the worker (the gate never opened).
    with anyio.fail_after(WAIT_SECONDS):
        while gate.left < 3:
            await anyio.sleep(0.05)  # poll interval of the counter check
    assert not gate.release.is_set()
    # The follower says so too, after yielding what the log holds.
    followed: list[Event] = []
    with pytest.raises(WorkflowFailureError):
        async for event in follow_run(client, handle.id, poll_interval=0.05):
            followed.append(event)
    assert sum(isinstance(e, DelegationStart) for e in followed) == 3
    assert await assert_replays(client, [handle.id, *child_ids]) == 4


#: Delegation ids whose cancelled child ran the cleanup activity below.
CLEANED: list[str] = []


@activity.defn(name="test_cleanup")
async def record_cleanup(delegation_id: str) -> None:
    """Stands for an owned resource's cleanup: records that it ran."""
    CLEANED.append(delegation_id)


@workflow.defn(name="DeputySubagent")
class CleaningSubagent(SubagentWorkflow):
    """The subagent workflow with a cleanup activity on its cancellation hook."""

    @workflow.run
    async def run(self, request: SubagentInput) -> SubagentOutput:
        self.delegation_id = request.delegation_id
        return await super().run(request)

    async def on_cancelled(self) -> None:
        await workflow.execute_activity(
            record_cleanup, self.delegation_id, start_to_close_timeout=timedelta(seconds=60)
        )


async def test_a_cancelled_child_can_still_run_activities_on_its_hook(
    client: Client, task_queue: str, workdir: Path
) -> None:
    gate = Gate(expected=2)
    CLEANED.clear()
    activities = DeputyActivities([gate.tool], working_dir=workdir)
    # Unsandboxed: the subclass lives in this test module (the sandbox re-imports the
    # modules of the workflows it runs, and this one imports pytest).
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[LeadWorkflow, CleaningSubagent],
        activities=[*activities.activities(), record_cleanup],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with worker:
        request = lead_input(
            "Do the work",
            gate.definitions("one", "two"),
            model="test",
            usage_limits=UsageLimits(20),
        )
        handle = await start_lead(
            client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
        )
        with anyio.fail_after(WAIT_SECONDS):
            await gate.all_started.wait()
        await handle.cancel()
        with anyio.fail_after(WAIT_SECONDS), pytest.raises(WorkflowFailureError):
            await handle.result()
        events = [decode_event(t) for t in await handle.query("events", 0)]
    delegations = sorted(e.delegation_id or "" for e in events if isinstance(e, DelegationStart))
    assert len(delegations) == 2
    # Each cancelled child ran its cleanup activity before it ended CANCELED.
    assert sorted(CLEANED) == delegations
    for delegation in delegations:
        child = client.get_workflow_handle(f"{handle.id}/{delegation}")
        assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED
    gate.release.set()


async def test_continue_as_new_gives_the_unchained_output(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    definitions = _definitions(workdir)
    limits = UsageLimits(max_requests=20)
    outputs: list[LeadOutput] = []
    for threshold in (10_000, SMALL):
        request = lead_input(
            TASK, definitions, model="test", usage_limits=limits, continue_as_new_after=threshold
        )
        handle = await start_lead(
            client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
        )
        followed = [e async for e in follow_run(client, handle.id, poll_interval=0.05)]
        outputs.append(await handle.result())
        run_ids = await chain_run_ids(client, handle.id)
        assert (len(run_ids) > 1) == (threshold == SMALL), run_ids
        # The events query and the follower span the chain: one RunStart for the lead.
        log = await client.get_workflow_handle(handle.id).query("events", 0)
        assert Counter(encode_event(e).decode() for e in followed) == Counter(log)
        lead_starts = [e for e in followed if isinstance(e, RunStart) and e.delegation_id is None]
        assert len(lead_starts) == 1
        # Every run of the chain replays, and so does every child.
        assert await assert_replays(client, [handle.id], run_ids=run_ids) == len(run_ids)
        # Each child continues as new past the same threshold; every run replays.
        child_runs = 0
        for child in run_workflow_ids(handle.id, outputs[-1])[1:]:
            runs = await chain_run_ids(client, child)
            assert (len(runs) > 1) == (threshold == SMALL), (child, runs)
            child_runs += await assert_replays(client, [child], run_ids=runs)
        assert child_runs >= 3 * (2 if threshold == SMALL else 1)
    unchained, chained = outputs
    assert list(map(comparable_record, chained.subagents)) == list(
        map(comparable_record, unchained.subagents)
    )
    assert list(map(comparable_result, chained.subagent_results)) == list(
        map(comparable_result, unchained.subagent_results)
    )
    assert chained.result.usage == unchained.result.usage
    assert chained.result.stop_reason == unchained.result.stop_reason == "complete"
    assert len(chained.result.turns) == len(unchained.result.turns)
    assert chained.result.agent_id == chained.subagents[0].parent_agent_id


def test_lead_input_refuses_a_bad_continue_as_new_threshold() -> None:
    for bad in (0, -5, True, 2.5):
        with pytest.raises(ValueError, match="continue_as_new_after"):
            lead_input("Do it", [], model="test", continue_as_new_after=bad)  # type: ignore[arg-type]


async def test_a_child_cancelled_alone_settles_and_the_lead_goes_on(
    client: Client, task_queue: str, gate: Gate
) -> None:
    gate.expected = 2
    request = lead_input(
        "Do the work", gate.definitions("one", "two"), model="test", usage_limits=UsageLimits(20)
    )
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    with anyio.fail_after(WAIT_SECONDS):
        await gate.all_started.wait()
    events = [decode_event(t) for t in await handle.query("events", 0)]
    first, second = (e for e in events if isinstance(e, DelegationStart))
    assert first.delegation_id is not None
    assert second.delegation_id is not None
    await client.get_workflow_handle(f"{handle.id}/{first.delegation_id}").cancel()
    with anyio.fail_after(WAIT_SECONDS):
        while gate.left < 1:  # the cancelled child's held call stopped
            await anyio.sleep(0.05)  # poll interval of the counter check
    gate.release.set()
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    records = {r.delegation_id: r for r in out.subagents}
    cancelled, finished = records[first.delegation_id], records[second.delegation_id]
    assert (cancelled.status, cancelled.stop_reason) == ("failed", "error")
    assert cancelled.error is not None
    assert "cancel" in cancelled.error.lower()
    assert (finished.status, finished.stop_reason) == ("completed", "complete")
    assert out.result.stop_reason == "complete"
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 3


async def test_attach_reports_a_run_cancelled_while_it_follows(
    client: Client, task_queue: str, temporal_address: str, gate: Gate, tmp_path: Path
) -> None:
    gate.expected = 2
    request = lead_input(
        "Do the work", gate.definitions("one", "two"), model="test", usage_limits=UsageLimits(20)
    )
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    out, err = tmp_path / "attach.jsonl", tmp_path / "attach.stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "deputy_runtime", "attach", "--json",
            "--temporal", temporal_address, handle.id,
            cwd=REPO_ROOT, env=_env(), stdout=stdout, stderr=stderr,
        )  # fmt: skip
    try:
        with anyio.fail_after(WAIT_SECONDS):
            while True:  # attach draws both held calls while they are held
                lines = out.read_text().splitlines()
                held = [e for e in map(decode_event, lines) if isinstance(e, ToolStart)]
                if len({e.delegation_id for e in held if e.delegation_id}) == 2:
                    break
                assert process.returncode is None, err.read_text()
                await anyio.sleep(0.1)  # poll interval of the output check
        await handle.cancel()
        with anyio.fail_after(WAIT_SECONDS):
            status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert status == 130, err.read_text()
    assert f"workflow {handle.id} was cancelled" in err.read_text()


async def test_follow_run_refuses_bad_arguments_and_unknown_runs(client: Client) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        await anext(follow_run(client, "any", poll_interval=0))
    with pytest.raises(ValueError, match="offset"):
        await anext(follow_run(client, "any", offset=-1))
    with anyio.fail_after(WAIT_SECONDS), pytest.raises(RPCError) as error:
        await anext(follow_run(client, f"no-such-run-{uuid.uuid4().hex}"))
    assert error.value.status == RPCStatusCode.NOT_FOUND
