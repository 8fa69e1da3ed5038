"""A lead with three parallel delegations through a real Temporal dev server, checked
against the in-process run of the same task on the offline ``test`` model."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentResult,
    LeadAgent,
    SubagentRecord,
    UsageLimits,
    chat,
    tools_file,
)
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    lead_input,
    start_lead,
)
from tests.temporal.helpers import (
    assert_replays,
    comparable_record,
    comparable_result,
    run_workflow_ids,
)

pytestmark = pytest.mark.anyio

TASK = "Review the project and report every TODO."


def _definitions(workdir: Path, max_requests: int | None = 4) -> list[AgentDefinition]:
    files = {t.name: t for t in tools_file(workdir)}
    return [
        AgentDefinition(
            "reviewer",
            "Reviews code.",
            "You review code.",
            tools=(files["read_file"], files["grep_files"]),
            max_requests=max_requests,
            permission_mode="readonly",
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
            memory=("Keep it short.",),
        ),
    ]


async def _in_process(
    workdir: Path, definitions: list[AgentDefinition], limits: UsageLimits
) -> tuple[AgentResult, list[SubagentRecord], list[AgentResult | None]]:
    lead = LeadAgent(chat("test"), definitions, usage_limits=limits, working_dir=workdir)
    result = await lead.run(TASK)
    return result, lead.list_subagents(), lead.get_subagent_results()


async def _durable(
    client: Client, task_queue: str, definitions: list[AgentDefinition], limits: UsageLimits
) -> tuple[str, LeadOutput]:
    workflow_id = f"lead-{uuid.uuid4().hex}"
    request = lead_input(TASK, definitions, model="test", usage_limits=limits)
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    return workflow_id, await handle.result()


async def test_three_parallel_delegations_match_the_in_process_run(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    definitions = _definitions(workdir)
    limits = UsageLimits(max_requests=20)
    expected, expected_records, expected_results = await _in_process(workdir, definitions, limits)
    _, out = await _durable(client, task_queue, definitions, limits)

    assert len(out.subagents) == 3
    assert sorted(map(comparable_record, out.subagents)) == sorted(
        map(comparable_record, expected_records)
    )
    got_results = sorted(map(comparable_result, out.subagent_results), key=repr)
    assert got_results == sorted(map(comparable_result, expected_results), key=repr)
    assert {r.status for r in out.subagents} == {"completed"}
    # The lead: same usage, same stop reason, same shape of answer (its text quotes each
    # delegation's outcome, whose ids differ between the two runs).
    assert out.result.stop_reason == expected.stop_reason == "complete"
    assert out.result.usage == expected.usage
    assert out.result.response.splitlines()[0] == expected.response.splitlines()[0]
    # Each record names its own lead and child ids, and the result matches the record.
    for record, result in zip(out.subagents, out.subagent_results, strict=True):
        assert result is not None
        assert record.parent_agent_id == out.result.agent_id
        assert record.parent_run_id == out.result.run_id
        assert (result.delegation_id, result.agent_id) == (record.delegation_id, record.agent_id)


async def test_parallel_delegations_never_exceed_the_lead_budget(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    # No max_requests on the definitions: the lead keeps one of the 4 requests it has left
    # and the three delegations of its turn share the other 3 (fair shares, as in-process).
    definitions = _definitions(workdir, max_requests=None)
    limits = UsageLimits(max_requests=5)
    expected, expected_records, _ = await _in_process(workdir, definitions, limits)
    _, out = await _durable(client, task_queue, definitions, limits)

    assert sorted(map(comparable_record, out.subagents)) == sorted(
        map(comparable_record, expected_records)
    )
    # Every child was granted a request limit: 1 each.
    granted = [r.limits.max_requests for r in out.subagents if r.limits is not None]
    assert None not in granted
    assert sorted(g for g in granted if g is not None) == [1, 1, 1]
    assert sum(r.usage.requests for r in out.subagents) <= 3
    assert limits.max_requests is not None
    assert out.result.usage.requests <= limits.max_requests
    assert out.result.usage == expected.usage
    assert out.result.stop_reason == expected.stop_reason


async def test_a_finished_run_replays_without_nondeterminism(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    workflow_id, out = await _durable(
        client, task_queue, _definitions(workdir), UsageLimits(max_requests=20)
    )
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4


async def test_a_limit_passed_by_a_reply_stops_the_run_as_in_process(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    # The first reply (15 tokens) passes the 10-token limit while asking for delegations:
    # the run stops there, no delegation starts, and the open calls are answered.
    definitions = _definitions(workdir)
    limits = UsageLimits(max_requests=20, max_total_tokens=10)
    expected, expected_records, _ = await _in_process(workdir, definitions, limits)
    _, out = await _durable(client, task_queue, definitions, limits)
    assert out.result.stop_reason == expected.stop_reason == "total_token_limit"
    assert out.result.turns == expected.turns
    assert out.result.usage == expected.usage
    assert out.subagents == () == tuple(expected_records)
