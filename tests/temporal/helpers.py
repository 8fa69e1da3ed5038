"""Helpers shared by the Temporal tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Replayer

from deputy_runtime import AgentDefinition, AgentResult, SubagentRecord, tools_file
from deputy_runtime.chat import ModelRequest, TestProvider, register_provider
from deputy_runtime.temporal import (
    LeadOutput,
    LeadWorkflow,
    ParallelDelegateWorkflow,
    SubagentWorkflow,
    data_converter,
    workflow_runner,
)


def run_workflow_ids(lead_id: str, out: LeadOutput) -> list[str]:
    """The lead's workflow id and the id of every child workflow it started."""
    return [lead_id] + [
        f"{lead_id}/{r.delegation_id}" for r in out.subagents if r.started_at is not None
    ]


async def assert_replays(
    client: Client, workflow_ids: Iterable[str], *, run_ids: Iterable[str | None] = (None,)
) -> int:
    """Replay each finished workflow's history (each of ``run_ids`` of it: ``None`` is
    the latest run); fail on any nondeterminism. Returns how many histories were
    replayed."""
    replayer = Replayer(
        workflows=[LeadWorkflow, SubagentWorkflow, ParallelDelegateWorkflow],
        data_converter=data_converter,
        workflow_runner=workflow_runner(),
    )
    count = 0
    runs = tuple(run_ids)
    for wid in workflow_ids:
        for run_id in runs:
            history = await client.get_workflow_handle(wid, run_id=run_id).fetch_history()
            replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
            assert replayed.replay_failure is None, (wid, run_id, replayed.replay_failure)
            count += 1
    return count


async def was_signalled(client: Client, workflow_id: str) -> bool:
    """Whether the workflow's history holds a control signal it received (the tool
    activities' own ``deputy_tool_started`` signals do not count)."""
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            name = event.workflow_execution_signaled_event_attributes.signal_name
            if name != "deputy_tool_started":
                return True
    return False


async def chain_run_ids(client: Client, workflow_id: str) -> list[str]:
    """Every run of a workflow's continue-as-new chain, first to last, read from the
    histories (each run's last event names the next run)."""
    described = await client.get_workflow_handle(workflow_id).describe()
    run_ids = [described.raw_description.workflow_execution_info.first_run_id]
    assert run_ids[0], f"{workflow_id}: the server did not name the chain's first run"
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_ids[-1]).fetch_history()
        last = history.events[-1]
        if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return run_ids
        run_ids.append(
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        )


async def most_children_open(client: Client, workflow_id: str) -> int:
    """The most child workflows open at once, from a parent's history: a child counts
    from the command starting it (initiated) until its completion or failure is
    recorded."""
    opened = {EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED}
    closed = {
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED,
    }
    open_now = most = 0
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type in opened:
            open_now += 1
            most = max(most, open_now)
        elif event.event_type in closed:
            open_now -= 1
    return most


class Gate:
    """Holds every request of the ``gated`` model until the test opens it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.opened = asyncio.Event()


class GatedProvider(TestProvider):
    """The ``test`` model, answering only once its gate opens (a worker running in the
    test's process and loop makes the requests)."""

    __test__ = False
    __slots__ = ("gate",)

    def __init__(self, gate: Gate, model: str) -> None:
        super().__init__(model=model, name="gated")
        self.gate = gate

    async def complete(self, request: ModelRequest) -> Any:
        self.gate.started.set()
        await self.gate.opened.wait()
        return await super().complete(request)


def gated_model() -> Gate:
    """Register the ``gated`` provider (``gated/<model>``) on a new gate and return it."""
    gate = Gate()
    register_provider("gated", lambda model, **_: GatedProvider(gate, model), replace=True)
    return gate


def comparable_record(record: SubagentRecord) -> tuple[object, ...]:
    """What a delegation's record must share with the in-process run's (ids and times
    differ between runs; whether it started does not)."""
    return (
        record.agent_name,
        record.task,
        record.status,
        record.stop_reason,
        record.usage,
        record.limits,
        record.error,
        record.started_at is None,
    )


def comparable_result(result: AgentResult | None) -> tuple[object, ...] | None:
    """What a delegation's result must share with the in-process run's."""
    if result is None:
        return None
    return (result.agent_name, result.response, result.turns, result.usage, result.stop_reason)


def review_definitions(workdir: Path, max_requests: int | None = 4) -> list[AgentDefinition]:
    """A reviewer, an explorer and a summarizer over the file tools of ``workdir``."""
    files = {t.name: t for t in tools_file(workdir)}
    return [
        AgentDefinition(
            "reviewer",
            "Reviews code.",
            "You review code.",
            tools=(files["read_file"], files["grep_files"]),
            max_requests=max_requests,
        ),
        AgentDefinition(
            "explorer",
            "Lists files.",
            "You explore.",
            tools=(files["list_files"],),
            max_requests=max_requests,
        ),
        AgentDefinition(
            "summarizer",
            "Summarises files.",
            "You summarise.",
            tools=(files["read_file"],),
            max_requests=max_requests,
        ),
    ]
