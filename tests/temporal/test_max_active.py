"""``max_active_delegations`` on the durable lead: a 3-way fan-out of the offline ``test``
model under a cap of 1 or 2, checked against the in-process ``LeadAgent`` with the same
cap, against the histories (never more children open than the cap) and by replay."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import msgspec
import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentResult,
    LeadAgent,
    UsageLimits,
    chat,
    tools_file,
)
from deputy_runtime.chat import ContentToolResult, Turn
from deputy_runtime.runtime import DelegationStart, decode_event
from deputy_runtime.temporal import (
    EVENTS_QUERY,
    INTERRUPT_SIGNAL,
    DeputyActivities,
    LeadInput,
    LeadOutput,
    data_converter,
    lead_input,
    start_lead,
)
from tests.temporal.helpers import (
    assert_replays,
    comparable_record,
    comparable_result,
    gated_model,
    most_children_open,
    review_definitions,
    run_workflow_ids,
    was_signalled,
)

pytestmark = pytest.mark.anyio

TASK = "Review the project and report every TODO."


async def _both(
    client: Client,
    task_queue: str,
    workdir: Path,
    definitions: list[AgentDefinition],
    limits: UsageLimits,
    cap: int,
) -> tuple[str, LeadOutput, LeadAgent, AgentResult]:
    lead = LeadAgent(
        chat("test"),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        max_active_delegations=cap,
    )
    expected = await lead.run(TASK)
    workflow_id = f"lead-cap-{uuid.uuid4().hex}"
    request = lead_input(
        TASK, definitions, model="test", usage_limits=limits, max_active_delegations=cap
    )
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    return workflow_id, await handle.result(), lead, expected


def _tool_errors(turn: Turn) -> list[str | None]:
    return [c.error for c in turn.contents if isinstance(c, ContentToolResult)]


@pytest.mark.parametrize("cap", [1, 2])
async def test_capped_fan_out_matches_the_in_process_lead(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities, cap: int
) -> None:
    limits = UsageLimits(max_requests=20)
    workflow_id, out, lead, expected = await _both(
        client, task_queue, workdir, review_definitions(workdir), limits, cap
    )
    expected_records = lead.list_subagents()
    assert len(out.subagents) == 3
    assert sorted(map(comparable_record, out.subagents)) == sorted(
        map(comparable_record, expected_records)
    )
    got = sorted(map(comparable_result, out.subagent_results), key=repr)
    assert got == sorted(map(comparable_result, lead.get_subagent_results()), key=repr)
    assert {r.status for r in out.subagents} == {"completed"}
    assert out.result.stop_reason == expected.stop_reason == "complete"
    assert out.result.usage == expected.usage
    # Queued delegations were admitted together and started in admission order.
    for record in out.subagents:
        assert record.started_at is not None
        assert record.admitted_at <= record.started_at
    starts = [r.started_at for r in out.subagents if r.started_at is not None]
    assert starts == sorted(starts)
    # All three were admitted in one turn; never more than ``cap`` children were open, and
    # the cap was used (both slots of a cap of 2 were taken together).
    assert await most_children_open(client, workflow_id) == cap
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4


async def test_a_queued_delegation_stops_at_the_limit_its_elders_reached(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    # One slot and 45 tokens, 15 of them the lead's first response: the first delegation's
    # share is 30 // 4 = 7 and its first response (15) passes it; a top-up would add
    # less than one response, so it stops. The second's share of the 15 left is 5 and it
    # passes it the same way, which takes the lead to 45: the third leaves the queue
    # not_started with total_token_limit and the "Run limit reached" error for the model,
    # as in-process.
    limits = UsageLimits(max_total_tokens=45)
    workflow_id, out, lead, expected = await _both(
        client, task_queue, workdir, review_definitions(workdir, max_requests=None), limits, 1
    )
    expected_records = lead.list_subagents()
    assert sorted(map(comparable_record, out.subagents)) == sorted(
        map(comparable_record, expected_records)
    )
    statuses = [(r.status, r.stop_reason) for r in out.subagents]
    assert statuses[2] == ("not_started", "total_token_limit")
    assert out.subagents[2].limits is None
    assert out.subagent_results[2] is None
    assert out.result.usage == expected.usage
    assert out.result.stop_reason == expected.stop_reason
    errors = _tool_errors(out.result.turns[2])
    expected_errors = _tool_errors(expected.turns[2])
    assert errors[2] == expected_errors[2]
    assert errors[2] is not None
    assert errors[2].startswith("Run limit reached for total_token_limit")
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 3


async def test_queued_delegations_of_an_interrupted_lead_never_start(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    # One slot; the first delegation's first request waits at the gate while the lead is
    # interrupted. The running one stops at its next boundary; the two queued behind it
    # leave the queue not_started (their outcome, not an error, goes to the model).
    files = {t.name: t for t in tools_file(workdir)}
    definitions = [
        AgentDefinition(n, f"{n}.", f"You are {n}.", tools=(files["list_files"],), model="gated/x")
        for n in ("first", "second", "third")
    ]
    limits = UsageLimits(max_requests=20)

    gate = gated_model()
    lead = LeadAgent(
        chat("test"),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        max_active_delegations=1,
    )
    in_process = asyncio.create_task(lead.run(TASK))
    await asyncio.wait_for(gate.started.wait(), 120)
    lead.interrupt("enough")
    gate.opened.set()
    expected = await asyncio.wait_for(in_process, 120)

    gate = gated_model()
    workflow_id = f"lead-cap-{uuid.uuid4().hex}"
    request = lead_input(
        TASK, definitions, model="test", usage_limits=limits, max_active_delegations=1
    )
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    try:
        await asyncio.wait_for(gate.started.wait(), 120)
        await handle.signal(INTERRUPT_SIGNAL, "enough")
        # The gate holds the first child's request, so the lead has announced it.
        events = [decode_event(e) for e in await handle.query(EVENTS_QUERY, 0)]
        [start] = [e for e in events if isinstance(e, DelegationStart)]
        child = f"{workflow_id}/{start.delegation_id}"
        deadline = asyncio.get_running_loop().time() + 120
        while not await was_signalled(client, child):  # forwarded before the reply lands
            assert asyncio.get_running_loop().time() < deadline, "the child was not signalled"
            await asyncio.sleep(0.2)
    finally:
        gate.opened.set()
    out = await handle.result()

    records = lead.list_subagents()
    assert [(r.status, r.stop_reason) for r in out.subagents] == [
        (r.status, r.stop_reason) for r in records
    ]
    assert [(r.status, r.stop_reason) for r in out.subagents] == [
        ("stopped", "interrupted"),
        ("not_started", "not_started"),
        ("not_started", "not_started"),
    ]
    assert sorted(map(comparable_record, out.subagents)) == sorted(map(comparable_record, records))
    assert out.result.stop_reason == expected.stop_reason == "interrupted"
    assert out.result.usage == expected.usage
    assert _tool_errors(out.result.turns[2]) == _tool_errors(expected.turns[2])
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


@pytest.mark.parametrize("cap", [0, -1, True, 1.5, "2"])
def test_lead_input_refuses_a_bad_cap(workdir: Path, cap: object) -> None:
    with pytest.raises(ValueError, match="max_active_delegations must be a positive int"):
        lead_input(TASK, review_definitions(workdir), model="test", max_active_delegations=cap)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_active_delegations must be a positive int"):
        LeadAgent(chat("test"), review_definitions(workdir), max_active_delegations=cap)  # type: ignore[arg-type]


def test_a_bad_cap_is_refused_at_the_durable_boundary() -> None:
    # A LeadInput built by hand still cannot reach a workflow with a cap no slot can meet.
    request = LeadInput(task=TASK, model="test", sub_agents=(), max_active_delegations=0)
    [payload] = data_converter.payload_converter.to_payloads([request])
    with pytest.raises(msgspec.ValidationError, match=r"max_active_delegations"):
        data_converter.payload_converter.from_payloads([payload], [LeadInput])
