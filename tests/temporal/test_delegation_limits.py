"""The rest of the delegation policy on the durable path: per-agent ``max_delegations``
(counted across a continue-as-new), ``on_exceed="error"`` through ``raise_on_exceed``, a
lead's deadline carried into the next run of its chain, and resources binding the
responders of a ``parallel_delegate`` batch. Each scenario is checked against the
in-process run where one exists, and every history replays."""

from __future__ import annotations

import uuid
from pathlib import Path

import msgspec
import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentUsage,
    DelegationPolicy,
    DelegationResources,
    DelegationStatus,
    LeadAgent,
    RequestLimitExceeded,
    StopReason,
    SubagentRecord,
    UsageLimits,
    chat,
)
from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    TestProvider,
    register_provider,
)
from deputy_runtime.temporal import (
    DelegationLimits,
    DeputyActivities,
    LeadInput,
    OwnedResourceFactory,
    OwnedResourceRecord,
    OwnedResourceSpec,
    deputy_worker,
    lead_input,
    parallel_delegate,
    raise_on_exceed,
    start_lead,
)
from deputy_runtime.temporal._limits import (
    DelegationCounts,
    child_seconds,
    out_of_time,
    spent_message,
)
from tests.temporal.helpers import (
    assert_replays,
    chain_run_ids,
    comparable_record,
    gated_model,
    run_workflow_ids,
)

pytestmark = pytest.mark.anyio

TASK = "Split the work."
Script = tuple[tuple[tuple[str, str], ...], ...]


class ScriptedLead(TestProvider):
    """The ``test`` model, except that a lead (offered ``delegate_to_agent``) makes the
    delegations of ``script``, one round per turn, then answers; the same on a worker
    and in-process, since it reads only the request."""

    __test__ = False
    __slots__ = ("script",)

    def __init__(self, script: Script, model: str) -> None:
        super().__init__(model=model, name="scripted")
        self.script = script

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        if not any(t.name == "delegate_to_agent" for t in request.tools):
            return await super().complete(request)
        rounds = sum(
            1
            for turn in request.turns
            if turn.role == "user" and any(isinstance(c, ContentToolResult) for c in turn.contents)
        )
        if rounds >= len(self.script):
            return AssistantTurn((ContentText("done"),), self.usage, finish_reason="stop")
        calls = tuple(
            ContentToolRequest(
                f"call_{rounds}_{i}", "delegate_to_agent", {"agent_name": name, "task": task}
            )
            for i, (name, task) in enumerate(self.script[rounds])
        )
        return AssistantTurn(calls, self.usage, finish_reason="tool_use")


def scripted(script: Script) -> str:
    """Register a provider playing ``script``; returns the model spec.

    Its own name, never the built-in ``scripted``: a replaced built-in would outlive the
    test (the registry guard removes added names only) and break later tests.
    """
    register_provider(
        "limits_scripted", lambda model, **_: ScriptedLead(script, model), replace=True
    )
    return "limits_scripted/test"


def _definition(name: str, model: str = "inherit") -> AgentDefinition:
    return AgentDefinition(
        name, f"The {name}.", f"You are the {name}.", model=model, max_requests=2
    )


@pytest.mark.parametrize("caps", [{"Reviewer": 1}, 1])
async def test_max_delegations_matches_in_process_across_continue_as_new(
    client: Client,
    task_queue: str,
    running_worker: DeputyActivities,
    workdir: Path,
    caps: int | dict[str, int],
) -> None:
    script: Script = (
        (("reviewer", "a"), ("reviewer", "b")),
        (("reviewer", "c"), ("explorer", "d")),
    )
    model = scripted(script)
    definitions = [_definition("reviewer", "test"), _definition("explorer", "test")]
    limits = UsageLimits(max_requests=20)
    policy = DelegationPolicy(max_delegations=caps)
    lead = LeadAgent(
        chat(model),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        delegation_policy=policy,
    )
    expected = await lead.run(TASK)
    workflow_id = f"caps-{uuid.uuid4().hex}"
    # Continue as new at every turn boundary: the second round is counted from the
    # records the first run carried.
    request = lead_input(
        TASK,
        definitions,
        model=model,
        usage_limits=limits,
        delegation_policy=policy,
        continue_as_new_after=1,
    )
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    out = await handle.result()
    assert out.result.stop_reason == expected.stop_reason == "complete"
    assert out.result.usage == expected.usage
    records = out.subagents
    assert [comparable_record(r) for r in records] == [
        comparable_record(r) for r in lead.list_subagents()
    ]
    assert [(r.task, r.status, r.stop_reason) for r in records] == [
        ("a", "completed", "complete"),
        ("b", "not_started", "delegation_limit"),
        ("c", "not_started", "delegation_limit"),
        ("d", "completed", "complete"),
    ]
    assert records[1].error is not None
    assert "budget for agent 'reviewer' is spent: 1 of 1" in records[1].error
    runs = await chain_run_ids(client, workflow_id)
    assert len(runs) >= 2
    assert await assert_replays(client, [workflow_id], run_ids=runs) == len(runs)
    children = run_workflow_ids(workflow_id, out)[1:]
    assert await assert_replays(client, children) == 2


async def test_on_exceed_error_is_raised_from_the_output_as_in_process(
    client: Client, task_queue: str, running_worker: DeputyActivities, workdir: Path
) -> None:
    definitions = [_definition("reviewer"), _definition("explorer")]
    limits = UsageLimits(max_requests=1, on_exceed="error")
    lead = LeadAgent(chat("test"), definitions, usage_limits=limits, working_dir=workdir)
    with pytest.raises(RequestLimitExceeded) as in_process:
        await lead.run(TASK)
    workflow_id = f"exceed-{uuid.uuid4().hex}"
    request = lead_input(TASK, definitions, model="test", usage_limits=limits)
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    out = await handle.result()  # the workflow itself completes with its output
    assert out.result.limits.on_exceed == "error"
    with pytest.raises(RequestLimitExceeded, match="request limit reached") as durable:
        raise_on_exceed(out.result)
    assert durable.value.stop_reason == in_process.value.stop_reason == "request_limit"
    assert [comparable_record(r) for r in out.subagents] == [
        comparable_record(r) for r in lead.list_subagents()
    ]
    # A run that did not stop at a limit is handed back as it is.
    fine = msgspec.structs.replace(out.result, stop_reason="complete")
    assert raise_on_exceed(fine) is fine
    assert await assert_replays(client, [workflow_id]) == 1


async def test_a_lead_keeps_its_deadline_across_continue_as_new(
    client: Client, task_queue: str, running_worker: DeputyActivities
) -> None:
    gated_model()
    # First round quick (the run continues as new after it), second round held at the
    # gate until the lead's own time runs out.
    model = scripted(((("explorer", "a"),), (("worker", "b"),)))
    definitions = [_definition("explorer", "test"), _definition("worker", "gated/test")]
    seconds = 8.0
    workflow_id = f"deadline-can-{uuid.uuid4().hex}"
    request = lead_input(
        TASK,
        definitions,
        model=model,
        usage_limits=UsageLimits(max_requests=10, max_seconds=seconds),
        continue_as_new_after=1,
    )
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    out = await handle.result()
    assert out.result.stop_reason == "time_limit"
    assert [(r.task, r.status) for r in out.subagents] == [("a", "completed"), ("b", "stopped")]
    runs = await chain_run_ids(client, workflow_id)
    assert len(runs) >= 2
    # Every later run starts from the deadline the first one set, not a fresh one.
    deadlines = set()
    for run_id in runs[1:]:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        carried = msgspec.json.decode(started.input.payloads[0].data, type=LeadInput)
        assert carried.checkpoint is not None
        deadlines.add(carried.checkpoint.deadline)
    assert len(deadlines) == 1
    assert None not in deadlines
    worker = out.subagents[1]
    assert worker.limits is not None
    assert worker.limits.max_seconds is not None
    assert 0 < worker.limits.max_seconds < seconds
    assert await assert_replays(client, [workflow_id], run_ids=runs) == len(runs)


class Scratch:
    """An owned resource with no tools: a directory per responder, removed by cleanup."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: list[str] = []
        self.cleaned: list[str] = []

    def create(self, record: OwnedResourceRecord) -> DelegationResources:
        path = self.root / record.resource_id.replace("/", "_")
        path.mkdir(parents=True)
        self.made.append(record.context.delegation_id)

        def cleanup() -> None:
            path.rmdir()
            self.cleaned.append(record.context.delegation_id)

        return DelegationResources(cleanup=cleanup)

    def reclaim(self, record: OwnedResourceRecord) -> None:
        path = self.root / record.resource_id.replace("/", "_")
        if path.exists():
            path.rmdir()


async def test_a_batch_binds_each_responder_to_its_own_resource(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    scratch = Scratch(tmp_path / "scratch")
    factory = OwnedResourceFactory(create=scratch.create, reclaim=scratch.reclaim)
    activities = DeputyActivities(working_dir=tmp_path, owned_resources={"scratch": factory})
    definitions = [_definition("reviewer"), _definition("explorer")]
    tasks = [("reviewer", "one"), ("explorer", "two"), ("reviewer", "three")]
    workflow_id = f"batch-owned-{uuid.uuid4().hex}"
    async with deputy_worker(client, activities, task_queue=task_queue):
        result = await parallel_delegate(
            client,
            tasks,
            definitions,
            model="test",
            task_queue=task_queue,
            workflow_id=workflow_id,
            max_active=2,
            # Bound to the reviewers only: the explorer runs without a resource.
            resources=(OwnedResourceSpec(name="scratch", agents=("reviewer",)),),
        )
    assert result.statuses == ("completed",) * 3
    reviewers = [result.delegation_ids[0], result.delegation_ids[2]]
    assert sorted(scratch.made) == sorted(reviewers)
    assert sorted(scratch.cleaned) == sorted(reviewers)
    assert list((tmp_path / "scratch").iterdir()) == []
    ids = [workflow_id] + [f"{workflow_id}/{d}" for d in result.delegation_ids]
    assert await assert_replays(client, ids) == 4


def test_delegation_limits_travel_from_the_policy() -> None:
    definitions = [_definition("reviewer")]
    request = lead_input(
        "t",
        definitions,
        model="test",
        delegation_policy=DelegationPolicy(max_seconds=5, max_delegations={" Reviewer ": 2}),
    )
    assert request.delegation == DelegationLimits(max_seconds=5.0, max_delegations={"reviewer": 2})
    assert request.delegation.cap("reviewer") == 2
    assert request.delegation.cap("other") is None
    assert lead_input("t", definitions, model="test").delegation == DelegationLimits()
    with pytest.raises(TypeError, match="usage_limits must be a UsageLimits"):
        lead_input("t", definitions, model="test", usage_limits={"max_requests": 1})  # type: ignore[arg-type]
    with pytest.raises(msgspec.ValidationError, match="max_seconds"):
        msgspec.convert({"max_seconds": 0}, DelegationLimits)


def _record(name: str, stop_reason: str) -> SubagentRecord:
    reason = StopReason(stop_reason)
    return SubagentRecord(
        delegation_id=f"delegation_{name}_{reason}",
        agent_name=name,
        agent_id="agent_x",
        run_id="run_x",
        parent_agent_id="agent_lead",
        parent_run_id="run_lead",
        tool_call_id=None,
        task="t",
        status=(
            DelegationStatus.NOT_STARTED
            if reason is StopReason.DELEGATION_LIMIT
            else DelegationStatus.COMPLETED
        ),
        stop_reason=reason,
        usage=AgentUsage(),
        limits=None,
        admitted_at=0.0,
        started_at=None,
        completed_at=None,
        error=None,
        hook_error=None,
        cleanup_error=None,
    )


def test_delegation_counts_resume_from_carried_records() -> None:
    carried = [
        _record("reviewer", "complete"),
        _record("reviewer", "delegation_limit"),  # refused: never counted
        _record("ghost", "setup_error"),  # an unknown agent: never counted
    ]
    counts = DelegationCounts(
        DelegationLimits(max_delegations={"reviewer": 2, "ghost": 0}), carried, ["reviewer"]
    )
    assert counts.take("reviewer") is None  # the second of two
    spent = counts.take("reviewer")
    assert spent == spent_message("reviewer", 2)
    assert "2 of 2 delegations" in spent
    assert counts.take("explorer") is None  # not named: unlimited
    assert DelegationCounts(DelegationLimits(max_delegations=0), (), ["a"]).take("a")


def test_child_seconds_and_out_of_time() -> None:
    assert child_seconds(None, None) is None
    assert child_seconds(5.0, None) == 5.0
    assert child_seconds(None, 2.5) == 2.5
    assert child_seconds(5.0, 2.5) == 2.5
    assert out_of_time(UsageLimits(max_seconds=0)) == "time_limit"
    assert out_of_time(UsageLimits(max_seconds=0.5)) is None
    assert out_of_time(UsageLimits()) is None
